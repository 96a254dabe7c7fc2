// Package jobinit is the job init: the supervisor every process of a job
// runs under (see the agent's sandbox.go for what it guards), which sets
// up an isolated job's mount namespace (/tmp, /dev/shm, /proc, the mask
// around its folder, its user's passwd entry) and drops to the job user;
// and the helper that ends every process of a job user.
//
// Both are this executable started under their own name (argv[0]), and
// this package's init runs them before the rest of the program is
// initialized: it depends on the standard library alone, and its import
// path sorts before every package of the program that is ready to be
// initialized before it (Go initializes, of the packages whose imports are
// initialized, the one whose path sorts first). A job init then costs the
// start of the Go runtime and its own work, not the package inits of the
// whole control plane, which were most of the 3 ms of CPU each of the two
// per job cost before. TestJobInitStartsAlone checks it.
package jobinit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Names (argv[0]) under which this executable is a helper.
const (
	// Name is the job init's.
	Name = "cumulus-job-init"
	// KillAllName is that of a process that, started as a job user, kills
	// every process of that user (kill(-1)): what is left of a job that
	// left its process group.
	KillAllName = "cumulus-job-kill-all"
	// ContainerExecName is the client of a prepared container's launcher:
	// the job init runs it (this executable again, with the whole program)
	// with the connection to the launcher as descriptor 3.
	ContainerExecName = "cumulus-container-exec"
)

// DeathSignal is what the kernel sends the job init when the agent thread
// that started it dies.
const DeathSignal = syscall.SIGUSR1

// Descriptors of a job init: its spec (an anonymous file the agent wrote),
// the pipe on which it says the command runs, and, for the client of a
// prepared container, the connection to the container's launcher that
// the init hands to its command.
const (
	SpecFD     = 3
	ReadyFD    = 4
	LauncherFD = 5
)

// EnvContainer names, in a job init's environment, the container its
// command (`docker run --name …`) runs, for the init to remove when the
// agent dies: the engine keeps a container whose client was killed.
const EnvContainer = "CUMULUS_JOB_CONTAINER"

// EnvGoMaxProcs keeps, in a job init's environment, the command's own
// GOMAXPROCS while the init runs with one processor (InitEnv, CommandEnv).
const EnvGoMaxProcs = "CUMULUS_JOB_GOMAXPROCS"

// InitEnv is the environment of a job init whose command is to have env:
// env with GOMAXPROCS=1 for the init (its runtime then wakes no second
// thread for the goroutines it starts: 7 % of its CPU), the command's own
// GOMAXPROCS, if any, kept under EnvGoMaxProcs for CommandEnv.
func InitEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
			kv = EnvGoMaxProcs + "=" + v
		} else if strings.HasPrefix(kv, EnvGoMaxProcs+"=") {
			continue // only InitEnv sets it
		}
		out = append(out, kv)
	}
	return append(out, "GOMAXPROCS=1")
}

// CommandEnv is the environment a job init gives its command, from its
// own (InitEnv's): the command's own GOMAXPROCS back, or none, and
// EnvContainer left out.
func CommandEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, EnvContainer+"="), strings.HasPrefix(kv, "GOMAXPROCS="):
		case strings.HasPrefix(kv, EnvGoMaxProcs+"="):
			out = append(out, "GOMAXPROCS="+kv[len(EnvGoMaxProcs)+1:])
		default:
			out = append(out, kv)
		}
	}
	return out
}

// jobUserName names the job user inside its jobs when the machine has no
// name for its uid (the name is free there; else cumulus-job-<uid>).
const jobUserName = "cumulus-job"

// identityDir is the folder, in the masking tmpfs, of the passwd and group
// files bind-mounted over /etc/passwd and /etc/group.
const identityDir = ".cumulus-identity"

func init() {
	switch base(os.Args[0]) {
	case Name:
		os.Exit(Main())
	case KillAllName:
		_ = syscall.Kill(-1, syscall.SIGKILL) // not this process itself
		os.Exit(0)
	}
}

// base is the last element of a path (filepath.Base for what argv[0]
// may be: this package stays off path/filepath, whose package init would
// come late in the program's order and hold this one's back).
func base(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}

// KillAllOf kills every process of the job user cred (one node's jobs
// have a user of their own, and a node runs one job at a time).
func KillAllOf(cred *syscall.Credential) error {
	p, err := os.StartProcess("/proc/self/exe", []string{KillAllName}, &os.ProcAttr{Sys: &syscall.SysProcAttr{Credential: cred}})
	if err == nil {
		var st *os.ProcessState
		if st, err = p.Wait(); err == nil && !st.Success() {
			err = errors.New(st.String())
		}
	}
	if err != nil {
		return fmt.Errorf("kill the job user's processes: %w", err)
	}
	return nil
}

// killAllAsJobUser ends every process of the job user but this one: the
// init, its command ended, becomes that user for good (it exits next)
// and kills them all (kill(-1)), rather than starting a process of that
// user to do it. Real, effective and saved ids all change, so that the
// signal reaches nothing else (a process whose real uid is root may
// signal every process of root). Only the calling thread changes (the
// raw system calls, not syscall.Setresuid, which stops every thread of
// the runtime to change them all): the kernel checks the permission to
// signal against the credentials of the thread that calls kill, and the
// caller is locked to its thread (Main), so kill runs on the thread whose
// ids changed. The init exits right after; nothing else runs as root in
// it meanwhile but the runtime.
func killAllAsJobUser(cred *syscall.Credential) {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(cred.Gid), uintptr(cred.Gid), uintptr(cred.Gid)); errno != 0 {
		fmt.Fprintf(os.Stderr, "cumulus: job init: become the job user to end its processes: %v\n", errno)
		return
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(cred.Uid), uintptr(cred.Uid), uintptr(cred.Uid)); errno != 0 {
		fmt.Fprintf(os.Stderr, "cumulus: job init: become the job user to end its processes: %v\n", errno)
		return
	}
	_ = syscall.Kill(-1, syscall.SIGKILL) // not this process itself
}

// The job init starts processes with os.StartProcess, not os/exec: that
// package needs path/filepath, whose package init comes late in the
// program's order and would hold this package's back (see the package
// comment).

// lookPath finds a command without a slash in the directories of PATH,
// as a shell does.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in $PATH", file)
}

// devNull is the standard input of a command that reads nothing.
func devNull() (*os.File, error) { return os.Open(os.DevNull) }

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// drainNotice is how long the init waits, when the command has ended and
// other processes of the job are left, for a stop signal that is on its
// way (the group gets SIGTERM at once; the shell may die first).
const drainNotice = 200 * time.Millisecond

// Main is the job init's main. It reads its spec (Spec) on SpecFD,
// isolates the job (with a job user), starts the command as the job user
// in the init's process group, says so on ReadyFD, passes the command's
// exit status on, and kills the whole process group when its parent, the
// agent, dies.
func Main() int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "cumulus: %v\n", err)
		return 127
	}
	specFile := os.NewFile(SpecFD, "spec")
	b, err := io.ReadAll(io.LimitReader(specFile, 64<<20))
	specFile.Close()
	var spec Spec
	if err == nil {
		spec, err = DecodeSpec(b)
	}
	if err != nil || spec.Path == "" {
		return fail(fmt.Errorf("job init: no spec on descriptor %d (%v)", SpecFD, err))
	}
	var ready *os.File
	if spec.Ready {
		syscall.CloseOnExec(ReadyFD)                  // not the command's
		ready = os.NewFile(uintptr(ReadyFD), "ready") // closed when the command runs, or with this process
	}
	// Orphans of the command (its shell exited, a child lives on) become
	// the init's children, so that a stop can wait for them (drain).
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "cumulus: job init: not a subreaper (%v); a stopped job's orphans get no grace period\n", errno)
	}
	sigs := make(chan os.Signal, 4)
	// SIGTERM and SIGINT reach the whole group; the command decides what
	// to do with them and the init waits for it (it must not die first).
	signal.Notify(sigs, DeathSignal, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	runtime.LockOSThread() // the command's parent-death signal follows this thread
	ppid := os.Getppid()
	if ppid == 1 {
		return 137 // the agent is gone already
	}
	env := CommandEnv(os.Environ())
	if spec.User != nil {
		name, err := isolateJob(spec)
		if err != nil {
			return fail(fmt.Errorf("isolate the job: %w", err))
		}
		env = withEnv(env, "USER", name)
		env = withEnv(env, "LOGNAME", name)
	}
	name := os.Getenv(EnvContainer)
	path, argv := spec.Path, append([]string{spec.Path}, spec.Args...)
	stdin := os.Stdin
	if !spec.Stdin {
		if stdin, err = devNull(); err != nil {
			return fail(err)
		}
	}
	files := []*os.File{stdin, os.Stdout, os.Stderr}
	var launcher *os.File
	if spec.Path == ContainerExecName {
		// The client of a prepared container: this executable, with the
		// connection to the launcher as its descriptor 3, held by it alone
		// (the launcher ends the job when the client is gone).
		launcher = os.NewFile(LauncherFD, "launcher")
		syscall.CloseOnExec(LauncherFD)
		path, files = "/proc/self/exe", append(files, launcher)
	} else if path, err = lookPath(path, envValue(env, "PATH")); err != nil {
		return fail(err)
	}
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if u := spec.User; u != nil {
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
	}
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{Dir: spec.Dir, Env: env, Files: files, Sys: sys})
	if launcher != nil {
		launcher.Close()
	}
	if !spec.Stdin {
		stdin.Close()
	}
	if err != nil {
		return fail(err)
	}
	if ready != nil {
		_, _ = ready.Write([]byte{1})
		ready.Close()
	}
	// The signals are watched beside; this thread, the one that started
	// the command, waits for it (a wait on this locked thread hands
	// nothing over to another thread, where a channel receive would).
	var stopping atomic.Bool
	go watch(sigs, &stopping, ppid, sys.Credential, name, spec.Path)
	code := reap(proc.Pid, &stopping)
	if spec.KillAll && sys.Credential != nil {
		killAllAsJobUser(sys.Credential)
	}
	return code
}

// watch follows the signals a job init gets: a stop (SIGTERM, SIGINT) is
// noted for reap; the agent's death (DeathSignal, or a new parent) ends
// the job's every process and the init itself.
func watch(sigs <-chan os.Signal, stopping *atomic.Bool, ppid int, cred *syscall.Credential, container, docker string) {
	for s := range sigs {
		if s == syscall.SIGTERM || s == syscall.SIGINT {
			stopping.Store(true)
		}
		if s == DeathSignal || os.Getppid() != ppid {
			if cred != nil {
				_ = KillAllOf(cred) // those that left the group too
			}
			if container != "" {
				RemoveContainer(docker, container) // the docker client's container lives in the engine
			}
			_ = syscall.Kill(0, syscall.SIGKILL) // the job's whole process group, this init included
			os.Exit(137)
		}
	}
}

// reap waits for the init's children: the command (main) and orphans
// handed to the init as their subreaper. It returns the command's exit
// code when the command has ended and, if the job is being stopped
// (SIGTERM), every other process too: a job whose shell dies at SIGTERM
// while its program saves a checkpoint gets the whole grace period (the
// agent kills the group when the grace ends). Without a stop it returns
// when the command ends; the agent ends what is left of the group.
func reap(main int, stopping *atomic.Bool) int {
	code := -1
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: nothing left
			return code
		}
		if pid == main {
			code = WaitCode(ws)
			if !stopping.Load() && !othersLeft(stopping) {
				return code
			}
		}
		if code >= 0 && !stopping.Load() {
			return code
		}
	}
}

// othersLeft reports whether the init still has children once the command
// has ended, after giving a stop signal on its way time to arrive; false
// when there are none or no stop came.
func othersLeft(stopping *atomic.Bool) bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err != nil {
			return false // ECHILD: none left
		}
		if pid == 0 {
			break // some live on
		}
	}
	deadline := time.Now().Add(drainNotice)
	for time.Now().Before(deadline) {
		if stopping.Load() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// WaitCode is an exit status as exitCode reports it.
func WaitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// envValue is key's value in env ("" when unset).
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// withEnv is env with key set to value (replacing any earlier value).
func withEnv(env []string, key, value string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
	return append(env, key+"="+value)
}

// maskAround covers mask with an empty tmpfs in this process's (new)
// mount namespace and mounts the job's folder (dir, under mask, open as
// keep) back at its path.
func maskAround(mask, dir string, keep *os.File) error {
	if dir != mask && !strings.HasPrefix(dir, mask+"/") {
		return fmt.Errorf("%s is not under %s", dir, mask)
	}
	// The mask's path may lie in the private /tmp now: make it there.
	if err := os.MkdirAll(mask, 0o711); err != nil {
		return err
	}
	if err := syscall.Mount("cumulus-mask", mask, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0711,size=4m"); err != nil {
		return fmt.Errorf("mask %s: %w", mask, err)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(keep.Fd()))
	if err := syscall.Mount(src, dir, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("mount the job's folder back: %w", err)
	}
	return nil
}

// RemoveContainer removes a job's container with the docker client at
// docker, within a bound.
func RemoveContainer(docker, name string) {
	path, err := lookPath(docker, os.Getenv("PATH"))
	if err != nil {
		return
	}
	null, err := devNull()
	if err != nil {
		return
	}
	defer null.Close()
	p, err := os.StartProcess(path, []string{docker, "rm", "-f", name}, &os.ProcAttr{Env: os.Environ(), Files: []*os.File{null, null, null}})
	if err != nil {
		return
	}
	t := time.AfterFunc(20*time.Second, func() { _ = p.Kill() })
	_, _ = p.Wait()
	t.Stop()
}

// IdentityFiles are the passwd and group files of a job's namespace: the
// machine's, with an entry for uid and gid when they have none; name is
// the user's name there.
func IdentityFiles(passwd, group []byte, u User) (newPasswd, newGroup []byte, name string) {
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
func isolateJob(spec Spec) (string, error) {
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
	size := spec.ShmSize
	if size <= 0 { // a tmpfs of size 0 would be unbounded
		return "", errors.New("no size for the job's /dev/shm")
	}
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
	pw, gr, name := IdentityFiles(passwd, group, *spec.User)
	dir := spec.Mask + "/" + identityDir
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"passwd", pw}, {"group", gr}} {
		p := dir + "/" + f.name
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return "", err
		}
		target := "/etc/" + f.name
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
