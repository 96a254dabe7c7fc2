package agent

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// What an isolated job (one with a job user) sees of the machine besides
// its folder (sandbox.go masks the rest): the job init sets it up in the
// job's mount namespace before it drops to the job user.
//
//   - /tmp is the node's own (tmp in the agent's work dir, the job user's
//     alone): what one node's jobs leave there no other node's job sees, it
//     goes with the node, and the agent empties it before a job of another
//     owner than the last one's runs.
//   - /dev/shm is the job's own memory (a tmpfs of the job's namespace, of
//     resources.shmSize, 2 GiB by default, as Azure ML gives): the job's
//     processes share it (NCCL, DataLoader workers) and it is gone when
//     the job ends.
//   - /proc is a proc of the namespace's own, mounted hidepid=invisible:
//     the job sees its own processes, not other jobs', nodes' or agents'
//     (their command lines included); the job init's command line holds
//     nothing of the job anyway (its spec comes on a descriptor).
//   - The job user is a user: /etc/passwd and /etc/group are the machine's
//     with an entry for the job user and its group (named cumulus-job, home
//     the job's folder) when it has none, as container runtimes give an
//     arbitrary uid; USER and LOGNAME name it, HOME is its home. Programs
//     that ask who they run as (getpwuid, getpass.getuser, id, ssh) get an
//     answer. The files are root's in the namespace: the job cannot change
//     what its own user, or root, is.

// privateTmp is the folder of the work dir that becomes an isolated job's
// /tmp.
const privateTmp = "tmp"

// jobUserName names the job user inside its jobs when the machine has no
// name for its uid (the name is free there; else cumulus-job-<uid>).
const jobUserName = "cumulus-job"

// identityDir is the folder, in the masking tmpfs, of the passwd and group
// files bind-mounted over /etc/passwd and /etc/group.
const identityDir = ".cumulus-identity"

// prepareJobSpace makes the node's private /tmp, the job user's alone.
func (a *agent) prepareJobSpace() error {
	cred := a.jobCred
	for _, name := range []string{privateTmp} {
		d := filepath.Join(a.cfg.WorkDir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("private /%s: %w", name, err)
		}
		if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("private /%s: %w", name, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("private /%s: %w", name, err)
		}
	}
	return nil
}

// freshJobSpace empties the node's private /tmp before a job
// of owner runs, when the last job here had another owner (or none is
// known since the agent started). Only the job user writes there, and
// none of its processes outlive a job.
func (a *agent) freshJobSpace(owner string) error {
	if a.jobCred == nil {
		return nil
	}
	a.mu.Lock()
	same := a.spaceOwner != "" && a.spaceOwner == owner
	a.mu.Unlock()
	if same {
		return nil
	}
	for _, name := range []string{privateTmp} {
		d := filepath.Join(a.cfg.WorkDir, name)
		ents, err := os.ReadDir(d)
		if err != nil {
			return fmt.Errorf("empty the private /%s: %w", name, err)
		}
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				return fmt.Errorf("empty the private /%s: %w", name, err)
			}
		}
	}
	a.mu.Lock()
	a.spaceOwner = owner
	a.mu.Unlock()
	return nil
}

// jobUserSpec is the job user as the job init is told it.
type jobUserSpec struct {
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	Home string `json:"home"`
}

// identityFiles are the passwd and group files of a job's namespace: the
// machine's, with an entry for uid and gid when they have none; name is
// the user's name there.
func identityFiles(passwd, group []byte, u jobUserSpec) (newPasswd, newGroup []byte, name string) {
	name, gname := "", ""
	names, gnames := map[string]bool{}, map[string]bool{}
	for _, f := range entries(passwd) {
		names[f[0]] = true
		if len(f) > 2 && f[2] == strconv.FormatUint(uint64(u.UID), 10) && name == "" {
			name = f[0]
		}
	}
	for _, f := range entries(group) {
		gnames[f[0]] = true
		if len(f) > 2 && f[2] == strconv.FormatUint(uint64(u.GID), 10) && gname == "" {
			gname = f[0]
		}
	}
	newPasswd, newGroup = passwd, group
	if gname == "" {
		gname = freeName(gnames, u.GID)
		newGroup = appendLine(group, fmt.Sprintf("%s:x:%d:", gname, u.GID))
	}
	if name == "" {
		name = freeName(names, u.UID)
		newPasswd = appendLine(passwd, fmt.Sprintf("%s:x:%d:%d:Cumulus job:%s:/bin/sh", name, u.UID, u.GID, u.Home))
	}
	return newPasswd, newGroup, name
}

// entries splits a passwd or group file into its lines' fields.
func entries(b []byte) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out
}

func freeName(taken map[string]bool, id uint32) string {
	if !taken[jobUserName] {
		return jobUserName
	}
	return jobUserName + "-" + strconv.FormatUint(uint64(id), 10)
}

func appendLine(b []byte, line string) []byte {
	out := append([]byte(nil), b...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(append(out, line...), '\n')
}

// isolateJob sets up the job's mount namespace (the init runs in a new
// one, as root): the node's private /tmp and /dev/shm, a /proc that shows
// the job its own processes only, the mask around the job's folder
// (sandbox.go), and the job user's passwd and group entries. It returns
// the job user's name.
func isolateJob(spec initSpec) (string, error) {
	keep, err := os.Open(spec.Dir)
	if err != nil {
		return "", err
	}
	defer keep.Close()
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make mounts private: %w", err)
	}
	// The private /tmp first (the mask may cover the work dir it is in),
	// opened before /tmp is covered (it may lie under it).
	tmp, err := os.Open(spec.Tmp)
	if err != nil {
		return "", fmt.Errorf("private folder: %w", err)
	}
	defer tmp.Close()
	if err := os.MkdirAll("/tmp", 0o1777); err != nil {
		return "", err
	}
	if err := syscall.Mount("/proc/self/fd/"+strconv.Itoa(int(tmp.Fd())), "/tmp", "", syscall.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("private /tmp: %w", err)
	}
	if err := os.MkdirAll("/dev/shm", 0o1777); err != nil {
		return "", err
	}
	size := cmp.Or(spec.ShmSize, api.DefaultShmSize)
	if err := syscall.Mount("tmpfs", "/dev/shm", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("mode=1777,size=%d", size)); err != nil {
		return "", fmt.Errorf("private /dev/shm: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "hidepid=invisible"); err != nil {
		return "", fmt.Errorf("a /proc of the job's own: %w", err)
	}
	if err := maskAround(spec.Mask, spec.Dir, keep); err != nil {
		return "", err
	}
	if spec.User == nil {
		return "", nil
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	group, err := os.ReadFile("/etc/group")
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	pw, gr, name := identityFiles(passwd, group, *spec.User)
	dir := filepath.Join(spec.Mask, identityDir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"passwd", pw}, {"group", gr}} {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return "", err
		}
		target := filepath.Join("/etc", f.name)
		if _, err := os.Stat(target); os.IsNotExist(err) {
			if err := os.WriteFile(target, nil, 0o644); err != nil {
				return "", err
			}
		}
		if err := syscall.Mount(p, target, "", syscall.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("the job user's %s entry: %w", f.name, err)
		}
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return "", fmt.Errorf("the job user's %s entry: %w", f.name, err)
		}
	}
	return name, nil
}
