package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/api"
)

// What a job can reach on this node, and how long it lives.
//
// Every process of a job is started through a small supervisor, the job
// init: this executable again, under the name cumulus-job-init. The agent
// starts it from a thread locked for the job's lifetime with a parent-death
// signal, so when the agent dies (kill -9 included) the kernel tells the
// init, which kills the job's whole process group at once: a job never runs
// on unsupervised while the control plane starts it again elsewhere. With
// a job user, every process of that user is killed as well (when the job
// ends, and when the agent dies), so that leaving the process group
// (setsid) does not help.
//
// With a job user (Config.JobUser, which the local provider sets when it
// runs as root) the init also isolates the job before it drops to that
// user: in a mount namespace of its own, the topmost directory above the
// job's folder that other users cannot search (typically the home or
// temporary directory that holds the control plane's data dir and the node
// folders), or else the agent's work dir, is covered by an empty tmpfs in
// which only the job's own folder is mounted back. The job then sees its
// own folder (code, inputs, outputs, checkpoint) and the machine's system
// directories, never the agent's identity, other jobs' or nodes' folders
// or the data dir; and as another user it cannot read the agent's
// /proc/<pid>/environ.
//
// Jobs get a minimal environment (jobBaseEnv plus their own variables and
// the Cumulus/Azure ML ones), never the agent's, and the agent marks itself
// not dumpable, so that a job running as the agent's own user (no job user)
// cannot read the agent's environment or memory through /proc either.

func init() {
	switch filepath.Base(os.Args[0]) {
	case mpiRshName:
		os.Exit(mpiRsh(os.Args[1:]))
	case mpiLaunchdName:
		os.Exit(mpiLaunchd())
	case launcherName:
		os.Exit(launcherMain(os.Args[1:]))
	case containerExecName:
		os.Exit(containerExecMain(os.Args[1:]))
	}
}

// defaultPath is a job's PATH when the agent has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// jobBaseEnv is what a job gets of the node's environment: PATH, HOME (the
// job's folder), USER and LOGNAME (the agent's user; the job init names
// the job user instead), the locale (LANG, default C.UTF-8, and LC_ALL)
// and TZ when set. Nothing else of the agent's environment reaches a job.
func jobBaseEnv(home string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	env := []string{"PATH=" + path, "HOME=" + home, "LANG=" + lang}
	if u, err := user.Current(); err == nil && u.Username != "" {
		env = append(env, "USER="+u.Username, "LOGNAME="+u.Username)
	}
	for _, k := range []string{"LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// agentEnvWithoutSecrets is the agent's environment less its join token:
// the container runtime's client runs with it (DOCKER_HOST and the like).
func agentEnvWithoutSecrets() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUMULUS_JOIN_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// parseJobUser reads Config.JobUser: "" (jobs run as the agent's user) or
// "uid[:gid]" (numeric; gid defaults to uid).
func parseJobUser(s string) (*syscall.Credential, error) {
	if s == "" {
		return nil, nil
	}
	us, gs, ok := strings.Cut(s, ":")
	if !ok {
		gs = us
	}
	uid, err1 := strconv.ParseUint(us, 10, 32)
	gid, err2 := strconv.ParseUint(gs, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil, fmt.Errorf("job user %q is not uid[:gid] with a uid other than 0", s)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// isolate prepares the agent before it runs jobs: it makes the work dir
// (only the agent may list it; with a job user, others may pass through it
// to their job's folder), marks the agent not dumpable, and checks that a
// job user can be switched to.
func (a *agent) isolate() error {
	jobs := filepath.Join(a.cfg.WorkDir, "jobs")
	if err := os.MkdirAll(jobs, 0o700); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	cred, err := parseJobUser(a.cfg.JobUser)
	if err != nil {
		return err
	}
	if cred != nil {
		if os.Geteuid() != 0 {
			return fmt.Errorf("job user %s: the agent must run as root to run jobs as another user", a.cfg.JobUser)
		}
		for _, d := range []string{a.cfg.WorkDir, jobs} {
			if err := os.Chmod(d, 0o711); err != nil {
				return fmt.Errorf("work dir: %w", err)
			}
		}
	}
	a.jobCred = cred
	if cred != nil {
		if err := a.prepareJobSpace(); err != nil {
			return err
		}
	}
	// Not dumpable: /proc/<agent>/environ, mem and the like belong to root,
	// so a job of the agent's own user cannot read the join token there.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		a.logger().Warn("could not mark the agent not dumpable; a job of the agent's user may read its environment", "err", errno)
	}
	return nil
}

// handOver gives the job's folder to the job user (when there is one):
// everything in it but the agent's own files (state, log) is chowned, and
// the folder is closed to everyone else.
func (j *job) handOver() error {
	cred := j.a.jobCred
	if cred == nil {
		return nil
	}
	uid, gid := int(cred.Uid), int(cred.Gid)
	err := filepath.WalkDir(j.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if filepath.Dir(p) == j.dir {
			switch d.Name() {
			case stateFile, logFile:
				return nil
			}
		}
		return os.Lchown(p, uid, gid)
	})
	if err == nil {
		err = os.Chmod(j.dir, 0o700)
	}
	if err != nil {
		return fmt.Errorf("give the job's folder to its user: %w", err)
	}
	return nil
}

// maskDir is the directory the job init covers with an empty tmpfs (in
// the job's mount namespace) before mounting the job's folder back: the
// topmost directory on the way to the job's folder that other users cannot
// search, else the agent's work dir.
func (j *job) maskDir() string { return j.a.maskDir(j.dir) }

// maskDir is the mask (see job.maskDir) around dir, a folder in the work dir.
func (a *agent) maskDir(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	p := "/"
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			return p
		}
	}
	work, err := filepath.Abs(a.cfg.WorkDir)
	if err != nil {
		return ""
	}
	return work
}

// initProcess is a job init told spec: its descriptor jobinit.SpecFD is an
// anonymous file holding the spec, which the caller closes (closeSpec)
// once the init has started.
func initProcess(ctx context.Context, spec jobinit.Spec) (*exec.Cmd, error) {
	b := spec.Encode()
	var f *os.File
	if fd, err := unix.MemfdCreate("cumulus-job-init", unix.MFD_CLOEXEC); err == nil {
		f = os.NewFile(uintptr(fd), "job-init-spec")
	} else {
		// No memfd (an old kernel, a sandbox): a file of the agent's
		// user alone, unlinked at once.
		if f, err = os.CreateTemp("", "cumulus-job-init-"); err != nil {
			return nil, fmt.Errorf("job init spec: %w", err)
		}
		os.Remove(f.Name())
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("job init spec: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("job init spec: %w", err)
	}
	c := exec.CommandContext(ctx, "/proc/self/exe")
	c.Args, c.ExtraFiles = []string{jobinit.Name}, []*os.File{f}
	return c, nil
}

// asJobUser makes spec run its command as the job user, isolated, in its
// folder spec.Dir (nothing changes when no mask can be found).
func (a *agent) asJobUser(spec *jobinit.Spec) {
	cred := a.jobCred
	mask := a.maskDir(spec.Dir)
	if cred == nil || mask == "" {
		return
	}
	spec.Mask = mask
	spec.User = &jobinit.User{UID: cred.Uid, GID: cred.Gid, Home: spec.Dir}
	spec.ShmSize = api.DefaultShmSize
	work, _ := filepath.Abs(a.cfg.WorkDir)
	spec.Tmp = filepath.Join(work, privateTmp)
}

// closeSpec closes the parent's copy of a job init's spec.
func closeSpec(c *exec.Cmd) {
	if len(c.ExtraFiles) > 0 && c.ExtraFiles[0] != nil {
		c.ExtraFiles[0].Close()
	}
}

// initCommand wraps cmd in the job init: the same command, environment,
// folder and output, run by a supervisor that kills the job's process
// group when the agent dies, and (with a job user) isolates it and drops
// to that user. The caller starts it with startInit, from a locked thread.
//
// alone says cmd is the job's only process on this node: the init then
// also ends whatever else the job user runs once cmd has ended (see
// jobinit.Spec.KillAll), and the agent has no process to start for it.
func (j *job) initCommand(cmd *exec.Cmd, asJobUser, alone bool) (*exec.Cmd, error) {
	dir, _ := filepath.Abs(cmd.Dir)
	spec := jobinit.Spec{Ready: true, Dir: dir, Path: cmd.Path, Args: cmd.Args[1:]}
	var cred *syscall.Credential
	if asJobUser {
		cred = j.a.jobCred
	}
	if cred != nil {
		j.a.asJobUser(&spec)
		spec.ShmSize = cmp.Or(j.asg.ShmSize, spec.ShmSize)
		spec.KillAll = alone && spec.User != nil
		j.initKillsAll = spec.KillAll
	}
	c, err := initProcess(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	c.Env, c.Dir, c.Stdout, c.Stderr, c.WaitDelay, c.Err = jobinit.InitEnv(cmd.Environ()), cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.WaitDelay, cmd.Err
	c.ExtraFiles = append(c.ExtraFiles, cmd.ExtraFiles...)
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: jobinit.DeathSignal}
	if spec.User != nil {
		c.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
	}
	return c, nil
}

// startInit starts a job init (initCommand) and waits until it has
// started the command, or failed to: the job's timeout and signals then
// reach the command, not an init that is still starting.
func startInit(c *exec.Cmd) error {
	defer closeSpec(c)
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	c.ExtraFiles = slices.Insert(c.ExtraFiles, 1, w) // after the spec: jobinit.ReadyFD
	err = c.Start()
	w.Close()
	if err != nil {
		return err
	}
	var b [1]byte
	_, _ = r.Read(b[:]) // a byte when the command runs; EOF when the init ended first
	return nil
}

// CheckIsolation runs what a job with a job user runs, as uid, on a
// scratch folder: the job init masks the folder's parent, gives it a
// private /tmp and /dev/shm, a /proc of its own and a passwd entry, and
// drops to uid. It reports why that fails (not root, no mount namespace:
// a container without CAP_SYS_ADMIN, …), so that a provider can say it at
// start rather than fail every job.
func CheckIsolation(uid int) error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	root, err := os.MkdirTemp("", "cumulus-isolation-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	dir, tmp := filepath.Join(root, "job"), filepath.Join(root, "tmp")
	for _, d := range []string{dir, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if err := os.Chown(d, uid, uid); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "hidden"), nil, 0o644); err != nil {
		return err
	}
	u := uint32(uid)
	cmd, err := initProcess(context.Background(), jobinit.Spec{User: &jobinit.User{UID: u, GID: u, Home: dir}, Mask: root, Tmp: tmp, ShmSize: api.DefaultShmSize, Dir: dir,
		Path: "/bin/sh", Args: []string{"-c", `touch ok && ! test -e ../hidden && touch /tmp/tmp-ok && touch /dev/shm/shm-ok && ! test -e /proc/1 && test "$(id -un)" = "$USER"`}})
	if err != nil {
		return err
	}
	defer closeSpec(cmd)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	fi, err := os.Stat(filepath.Join(dir, "ok"))
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uint32(uid) {
		return errors.New("the command did not run as the job user")
	}
	if _, err := os.Stat(filepath.Join(tmp, "tmp-ok")); err != nil {
		return errors.New("the job's /tmp is not the node's own")
	}
	return nil
}
