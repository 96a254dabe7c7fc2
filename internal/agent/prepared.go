package agent

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/distrib"
)

// Prepared containers: starting a container costs more than a job that
// names an image may wait (docker run is ~120 ms, most of it runc), so
// after a node has run a job in image I, the agent starts in the
// background the containers the next jobs of I would get — same network,
// CPU and memory flags, same --init, no GPUs — with a launcher as their
// main process (launch.go) instead of the job's command. It keeps one
// ready, or more while jobs come faster than a container starts: a job
// that finds none ready deepens the pool (up to maxPreparedDepth), a
// container that waited preparedIdle for a job makes it shallower. A job
// that fits exactly (same image and flags, one process on this node, not
// MPI, no GPUs) takes one and runs through its launcher, waiting for one
// on its way if none is ready; any other job, or one that finds them dead,
// gets `docker run` as before.
//
// A prepared container serves one job and is never reused: the launcher
// exits with the job's process, and the container (--rm) with it. One not
// taken goes away when the agent stops, after preparedIdle, when a job of
// another image comes (that image is prepared instead), and when the agent
// dies: the agent holds the launcher's connection until a job takes it,
// and the launcher exits when that connection drops. (A container the
// engine was still making when the agent was killed is removed by the job
// init that ran its docker client, or by the agent's next start.)
//
// The job's directory must be at the same path in the container as on the
// host (its variables, checkpoint and output paths are host paths), and a
// container's mounts are fixed when it starts, before the job's uid is
// known. So the prepared container mounts a fresh, empty directory
// jobs/prepared-<n>, and the job that takes it uses that directory as its
// own (state.json says which job it is: recovery and pruning read the uid
// there). The alternative, mounting something above the job's directory,
// would show a job more than its own folder.

const (
	// preparedPrefix starts the name of a prepared container's job
	// directory under <WorkDir>/jobs.
	preparedPrefix = "prepared-"
	// preparedLabel marks a prepared container; its value is the agent's
	// work dir, which names this node's agent on the machine.
	preparedLabel = "cumulus.prepared"
	// maxPreparedDepth bounds how many containers are prepared at once.
	maxPreparedDepth = 4
	// preparedIdle is how long a prepared container waits for a job.
	preparedIdle = 10 * time.Minute
	// preparedWait bounds how long a job waits for a container that is
	// being prepared (it is already on its way: waiting beats a new one).
	preparedWait = 10 * time.Second
	// launchDir, under the work dir, holds the launcher's executable and
	// the directories of the launchers' sockets (mode 0700: only the agent's
	// user can connect).
	launchDir = "launch"
	// inContainer is where the launcher and its socket are mounted.
	inContainer = "/.cumulus"
)

// errNoLauncher says that no container can be prepared on this node.
var errNoLauncher = errors.New("no launcher")

// preparedContainer is a container started ahead of the job that takes it.
type preparedContainer struct {
	key        string // the image and flags it was started with (containerKey)
	name       string // the container's name
	dir        string // the job directory it mounts
	sockDir    string
	entrypoint []string // the image's entrypoint: the job's command follows it

	ready   chan struct{} // closed when it is ready (conn) or failed (err)
	conn    *net.UnixConn // the agent's connection to its launcher
	err     error
	claimed chan struct{} // closed when it leaves the pool (taken or dropped)

	file *os.File // the connection, handed to the job's client (taken)
}

// containerFlags are the flags of a job's container: its network, CPUs and
// memory, which do not depend on the job, and its /dev/shm of shm bytes
// (0: api.DefaultShmSize, as Azure ML gives).
func (a *agent) containerFlags(shm int64) []string {
	args := []string{"--network", cmp.Or(a.cfg.JobNetwork, "host"), "--shm-size", strconv.FormatInt(cmp.Or(shm, api.DefaultShmSize), 10)}
	if c := a.cfg.VCPUs; c > 0 {
		args = append(args, "--cpus", fmt.Sprint(min(c, hostCPUs())))
	}
	if m := a.cfg.MemoryMB; m > 0 {
		args = append(args, "--memory", fmt.Sprint(min(m, hostMemoryMB()))+"m")
	}
	return args
}

// containerKey says which jobs a prepared container fits: those of image
// whose container would get the same flags.
func (a *agent) containerKey(image string) string {
	return strings.Join(append([]string{image}, a.containerFlags(0)...), "\x00")
}

// fitsPrepared reports whether asg may run in a prepared container: it
// names an image other than the node's, gets no GPUs and the default
// /dev/shm, and runs one process on this node that is not an MPI launch.
func (a *agent) fitsPrepared(asg agentapi.Assignment) bool {
	if asg.Image == "" || asg.Image == a.cfg.Image || len(asg.GPUs) > 0 || (asg.ShmSize != 0 && asg.ShmSize != api.DefaultShmSize) {
		return false
	}
	if d := asg.Distribution; d != nil && d.Type == distrib.MPI {
		return false
	}
	procs, err := distrib.Processes(asg.Distribution, asg.InstanceIndex, asg.NodeIPs)
	return err == nil && len(procs) == 1
}

// takePrepared gives asg a prepared container when it fits them and one
// is alive: a ready one, else the oldest on its way (waited for until stop
// closes). It returns nil when the job must start a container of its own.
func (a *agent) takePrepared(asg agentapi.Assignment, stop <-chan struct{}) *preparedContainer {
	if !a.fitsPrepared(asg) {
		return nil
	}
	key := a.containerKey(asg.Image)
	a.prepMu.Lock()
	var pc *preparedContainer
	if len(a.prep) > 0 && a.prep[0].key == key {
		i := slices.IndexFunc(a.prep, func(pc *preparedContainer) bool { return isClosed(pc.ready) })
		if i < 0 {
			// None is ready: the jobs come faster than containers start.
			a.prepDepth = min(max(a.prepDepth, 1)+1, maxPreparedDepth)
		}
		pc = a.prep[max(i, 0)]
		a.claimLocked(pc)
	}
	a.prepMu.Unlock()
	if pc == nil {
		return nil
	}
	select {
	case <-pc.ready:
	case <-stop:
	case <-time.After(preparedWait):
	}
	if !isClosed(pc.ready) || pc.err != nil || !pc.alive() {
		a.dropPrepared(pc)
		return nil
	}
	f, err := pc.conn.File()
	pc.conn.Close()
	if err != nil {
		a.dropPrepared(pc)
		return nil
	}
	pc.file = f
	os.RemoveAll(pc.sockDir) // the launcher removed its socket when the agent connected
	return pc
}

// claimLocked takes pc out of the pool (the caller holds prepMu); false
// when it was not there any more.
func (a *agent) claimLocked(pc *preparedContainer) bool {
	i := slices.Index(a.prep, pc)
	if i < 0 {
		return false
	}
	a.prep = slices.Delete(a.prep, i, i+1)
	close(pc.claimed)
	return true
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// alive reports whether the launcher still holds its end of the
// connection (it says nothing until a request comes).
func (pc *preparedContainer) alive() bool {
	if err := pc.conn.SetReadDeadline(time.Now()); err != nil {
		return false
	}
	var b [1]byte
	_, err := pc.conn.Read(b[:])
	_ = pc.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// handedOver closes the agent's copy of a taken container's connection,
// once the job's client holds it (or failed to start): from then on the
// launcher ends the job when the client is gone.
func (pc *preparedContainer) handedOver() {
	if pc.file != nil {
		pc.file.Close()
		pc.file = nil
	}
}

// prepare tops the pool up, in the background, with the containers the
// next jobs of image would get; prepared containers of another image (or
// other flags) are dropped.
func (a *agent) prepare(image string) {
	key := a.containerKey(image)
	a.prepMu.Lock()
	if a.prepStopped {
		a.prepMu.Unlock()
		return
	}
	var old []*preparedContainer
	if len(a.prep) > 0 && a.prep[0].key != key {
		old = slices.Clone(a.prep)
		for _, pc := range old {
			a.claimLocked(pc)
		}
	}
	var add []*preparedContainer
	for len(a.prep) < max(a.prepDepth, 1) {
		pc := &preparedContainer{key: key, ready: make(chan struct{}), claimed: make(chan struct{})}
		a.prep = append(a.prep, pc)
		add = append(add, pc)
	}
	a.prepWG.Add(len(add))
	a.prepMu.Unlock()
	for _, pc := range old {
		a.dropPrepared(pc)
	}
	for _, pc := range add {
		go func() {
			defer a.prepWG.Done()
			a.runPrepared(pc, image)
		}()
	}
}

// runPrepared starts pc and keeps it until a job takes it, the agent drops
// it, or it has waited preparedIdle.
func (a *agent) runPrepared(pc *preparedContainer, image string) {
	start := a.startContainer
	if start == nil {
		start = a.startPrepared
	}
	pc.err = start(pc, image)
	close(pc.ready)
	if errors.Is(pc.err, errNoLauncher) {
		// No launcher for any container: prepare none (and say so once).
		a.prepMu.Lock()
		off := !a.prepStopped
		a.prepStopped = true
		a.prepMu.Unlock()
		if off {
			a.logger().Info("containers are not prepared ahead on this node: every job that names an image starts its own", "err", pc.err)
		}
	} else if pc.err != nil {
		a.logger().Info("could not prepare a container for the next job; it starts its own", "image", image, "err", pc.err)
	}
	if pc.err == nil {
		select {
		case <-pc.claimed:
			return // taken, or dropped by whoever claimed it
		case <-a.clk.After(preparedIdle):
		}
	}
	a.prepMu.Lock()
	mine := a.claimLocked(pc)
	if mine && pc.err == nil {
		a.prepDepth = max(a.prepDepth-1, 1) // it waited for a job in vain
	}
	a.prepMu.Unlock()
	if mine {
		a.removePrepared(pc)
	}
}

// startPrepared starts pc's container and connects to its launcher.
func (a *agent) startPrepared(pc *preparedContainer, image string) error {
	bin, err := a.launchBinary()
	if err != nil {
		return fmt.Errorf("%w: %w", errNoLauncher, err)
	}
	id, err := a.inspectEntrypoint(image, pc)
	if err != nil {
		return err
	}
	work, err := filepath.Abs(a.cfg.WorkDir) // docker takes a relative -v source for a volume's name
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Join(work, "jobs"), preparedPrefix)
	if err != nil {
		return err
	}
	pc.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	n := strings.TrimPrefix(filepath.Base(dir), preparedPrefix)
	pc.sockDir = filepath.Join(work, launchDir, n)
	if err := os.Mkdir(pc.sockDir, 0o700); err != nil {
		return err
	}
	if strings.ContainsAny(dir+pc.sockDir, ":,") {
		return fmt.Errorf("the work dir %s has a ':' or ',' in its path", work)
	}
	pc.name = "cumulus-prepared-" + a.node() + "-" + n
	args := append([]string{"run", "-d", "--rm", "--name", pc.name, "--init",
		"--label", preparedLabel + "=" + work, "--label", labelJobNode + "=" + a.node()},
		a.containerFlags(0)...)
	args = append(args, "-v", dir+":"+dir, "-w", dir,
		"-v", bin+":"+inContainer+"/"+launcherName+":ro", "-v", pc.sockDir+":"+inContainer+"/launch",
		"--entrypoint", inContainer+"/"+launcherName,
		id, launcherKillAll, inContainer+"/launch/s")
	ctx, cancel := context.WithTimeout(a.life, 30*time.Second)
	defer cancel()
	// The docker client runs under a job init (sandbox.go), which removes
	// the container if the agent dies while the engine makes it: nothing
	// else would (a job's own container is its job init's to remove).
	cmd, err := initProcess(ctx, jobinit.Spec{Dir: work, Path: a.cfg.Docker, Args: args})
	if err != nil {
		return err
	}
	defer closeSpec(cmd)
	cmd.Env = append(agentEnvWithoutSecrets(), jobinit.EnvContainer+"="+pc.name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: jobinit.DeathSignal, Setpgid: true}
	runtime.LockOSThread() // the init's parent-death signal follows this thread
	out, err := cmd.CombinedOutput()
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("docker run: %v: %s", err, lastLine(string(out)))
	}
	// The launcher listens a few milliseconds after the container starts,
	// for launcherAcceptTimeout.
	sock, release, err := socketAddr(filepath.Join(pc.sockDir, "s"))
	if err != nil {
		return err
	}
	defer release()
	deadline := time.After(launcherAcceptTimeout)
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		if err == nil {
			pc.conn = c
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the launcher does not answer: %w", ctx.Err())
		case <-deadline:
			return fmt.Errorf("the launcher does not answer: %w", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// dropPrepared removes a container no job will take, in the background.
func (a *agent) dropPrepared(pc *preparedContainer) {
	a.prepWG.Add(1)
	go func() {
		defer a.prepWG.Done()
		<-pc.ready
		a.removePrepared(pc)
	}()
}

// removePrepared removes a ready or failed container that no job took,
// and its directories.
func (a *agent) removePrepared(pc *preparedContainer) {
	if pc.conn != nil {
		pc.conn.Close() // the launcher exits, and the container with it
	}
	if pc.name != "" {
		jobinit.RemoveContainer(a.cfg.Docker, pc.name)
	}
	for _, d := range []string{pc.dir, pc.sockDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
}

// stopPreparing removes the prepared container, if any, and prepares no
// more: the agent is stopping.
func (a *agent) stopPreparing() {
	a.prepMu.Lock()
	a.prepStopped = true
	pool := slices.Clone(a.prep)
	for _, pc := range pool {
		a.claimLocked(pc)
	}
	a.prepMu.Unlock()
	for _, pc := range pool {
		a.dropPrepared(pc)
	}
	a.prepWG.Wait()
}

// removeLeftoverPrepared removes what a previous agent process with this
// work dir left of its prepared containers: directories no job took
// (no state.json) and containers labelled with the work dir.
func (a *agent) removeLeftoverPrepared(ctx context.Context) {
	work, err := filepath.Abs(a.cfg.WorkDir)
	if err != nil {
		a.logger().Warn("could not look for prepared containers a previous agent left", "err", err)
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(work, "jobs", preparedPrefix+"*"))
	var left []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, stateFile)); errors.Is(err, fs.ErrNotExist) {
			left = append(left, d)
		}
	}
	socks, _ := os.ReadDir(filepath.Join(work, launchDir))
	if len(left) == 0 && len(socks) == 0 {
		return
	}
	if a.cfg.Docker != "" && a.cfg.Docker != "none" {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, a.cfg.Docker, "ps", "-aq", "--filter", "label="+preparedLabel+"="+work).Output()
		if ids := strings.Fields(string(out)); err == nil && len(ids) > 0 {
			_ = exec.CommandContext(ctx, a.cfg.Docker, append([]string{"rm", "-f"}, ids...)...).Run()
		}
	}
	for _, d := range left {
		os.RemoveAll(d)
	}
	os.RemoveAll(filepath.Join(work, launchDir))
}

// launchBinary is the launcher's executable: this one, linked or copied
// into the work dir once per agent process (the work dir is where the
// container engine finds the job's files; an upgrade that replaces the
// agent's file leaves the link to the running version). It must be
// static: it runs in any image.
func (a *agent) launchBinary() (string, error) {
	a.launchOnce.Do(func() {
		work, err := filepath.Abs(a.cfg.WorkDir)
		if err != nil {
			a.launchErr = err
			return
		}
		a.launchBin, a.launchErr = copyExecutable(filepath.Join(work, launchDir))
	})
	return a.launchBin, a.launchErr
}

func copyExecutable(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return "", err
	}
	defer src.Close()
	ef, err := elf.NewFile(src)
	if err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New("launcher: this executable is not statically linked (build it with CGO_ENABLED=0)")
		}
	}
	dst := filepath.Join(dir, launcherName)
	os.Remove(dst)
	// A hard link when the executable is on the work dir's file system
	// (no copy of a large file per node); a copy otherwise.
	if exe, err := os.Executable(); err == nil && os.Link(exe, dst) == nil {
		return dst, nil
	}
	tmp, err := os.CreateTemp(dir, launcherName+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, io.NewSectionReader(src, 0, 1<<62))
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	return dst, nil
}

// inspectEntrypoint sets pc's entrypoint to image's, which `docker run
// IMAGE COMMAND` puts before the command (the prepared container's own is
// the launcher), and returns the image's id: the container is made of
// that image, whatever the name points to later.
func (a *agent) inspectEntrypoint(image string, pc *preparedContainer) (string, error) {
	ctx, cancel := context.WithTimeout(a.life, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, a.cfg.Docker, "image", "inspect", "--format", "{{json .Id}} {{json .Config.Entrypoint}}", image).Output()
	if err != nil {
		return "", fmt.Errorf("docker image inspect: %w", err)
	}
	var id string
	d := json.NewDecoder(bytes.NewReader(out))
	if err := d.Decode(&id); err != nil {
		return "", fmt.Errorf("the image's id: %w", err)
	}
	if err := d.Decode(&pc.entrypoint); err != nil {
		return "", fmt.Errorf("the image's entrypoint: %w", err)
	}
	return id, nil
}
