package agent

import (
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
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/distrib"
)

// Prepared containers: starting a container costs more than a job that
// names an image may wait (docker run is ~120 ms, most of it runc), so
// after a node has run a job in image I, the agent starts in the
// background the container the next job of I would get — same network,
// CPU and memory flags, same --init, no GPUs — with a launcher as its main
// process (launch.go) instead of the job's command. A job that fits it
// exactly (same image and flags, one process on this node, not MPI, no
// GPUs) takes it and runs through the launcher; any other job, or one that
// comes while none is ready or after it died, gets `docker run` as before.
//
// A prepared container serves one job and is never reused: the launcher
// exits with the job's process, and the container (--rm) with it. One not
// taken goes away when the agent stops, after preparedIdle, when a job of
// another image comes (that image is prepared instead), and when the agent
// dies: the agent holds the launcher's connection until a job takes it,
// and the launcher exits when that connection drops.
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
	claimed chan struct{} // closed when a job takes it or the agent drops it

	file *os.File // the connection, handed to the job's client (taken)
}

// containerFlags are the flags of a job's container that do not depend on
// the job: its network, CPUs and memory.
func (a *agent) containerFlags() []string {
	args := []string{"--network", cmp.Or(a.cfg.JobNetwork, "host")}
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
	return strings.Join(append([]string{image}, a.containerFlags()...), "\x00")
}

// fitsPrepared reports whether asg may run in a prepared container: it
// names an image other than the node's, gets no GPUs, and runs one process
// on this node that is not an MPI launch.
func (a *agent) fitsPrepared(asg agentapi.Assignment) bool {
	if asg.Image == "" || asg.Image == a.cfg.Image || len(asg.GPUs) > 0 {
		return false
	}
	if d := asg.Distribution; d != nil && d.Type == distrib.MPI {
		return false
	}
	procs, err := distrib.Processes(asg.Distribution, asg.InstanceIndex, asg.NodeIPs)
	return err == nil && len(procs) == 1
}

// takePrepared gives asg the prepared container when it fits one that is
// alive, waiting for one on its way (until stop closes); nil when the job
// must start a container of its own.
func (a *agent) takePrepared(asg agentapi.Assignment, stop <-chan struct{}) *preparedContainer {
	if !a.fitsPrepared(asg) {
		return nil
	}
	key := a.containerKey(asg.Image)
	a.prepMu.Lock()
	pc := a.prep
	if pc == nil || pc.key != key {
		a.prepMu.Unlock()
		return nil
	}
	a.prep = nil
	close(pc.claimed)
	a.prepMu.Unlock()
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

// prepare starts, in the background, the container the next job of image
// would get, unless one is there already; a prepared container of another
// image is dropped.
func (a *agent) prepare(image string) {
	key := a.containerKey(image)
	a.prepMu.Lock()
	if a.prepStopped || (a.prep != nil && a.prep.key == key) {
		a.prepMu.Unlock()
		return
	}
	old := a.prep
	pc := &preparedContainer{key: key, ready: make(chan struct{}), claimed: make(chan struct{})}
	a.prep = pc
	a.prepWG.Add(1)
	a.prepMu.Unlock()
	if old != nil {
		close(old.claimed)
		a.dropPrepared(old)
	}
	go func() {
		defer a.prepWG.Done()
		pc.err = a.startPrepared(pc, image)
		close(pc.ready)
		if pc.err != nil {
			a.logger().Info("could not prepare a container for the next job; it starts its own", "image", image, "err", pc.err)
			a.prepMu.Lock()
			if a.prep == pc {
				a.prep = nil
				close(pc.claimed)
			}
			a.prepMu.Unlock()
			a.removePrepared(pc)
			return
		}
		select {
		case <-pc.claimed:
		case <-a.clk.After(preparedIdle):
			a.prepMu.Lock()
			idle := a.prep == pc
			if idle {
				a.prep = nil
				close(pc.claimed)
			}
			a.prepMu.Unlock()
			if idle {
				a.removePrepared(pc)
			}
		}
	}()
}

// startPrepared starts pc's container and connects to its launcher.
func (a *agent) startPrepared(pc *preparedContainer, image string) error {
	bin, err := a.launchBinary()
	if err != nil {
		return err
	}
	pc.entrypoint, err = a.entrypoint(image)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Join(a.cfg.WorkDir, "jobs"), preparedPrefix)
	if err != nil {
		return err
	}
	pc.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	n := strings.TrimPrefix(filepath.Base(dir), preparedPrefix)
	pc.sockDir = filepath.Join(a.cfg.WorkDir, launchDir, n)
	if err := os.Mkdir(pc.sockDir, 0o700); err != nil {
		return err
	}
	if strings.ContainsAny(dir+pc.sockDir, ":,") {
		return fmt.Errorf("the work dir %s has a ':' or ',' in its path", a.cfg.WorkDir)
	}
	pc.name = "cumulus-prepared-" + a.node() + "-" + n
	args := append([]string{"run", "-d", "--rm", "--name", pc.name, "--init",
		"--label", preparedLabel + "=" + a.cfg.WorkDir, "--label", labelJobNode + "=" + a.node()},
		a.containerFlags()...)
	args = append(args, "-v", dir+":"+dir, "-w", dir,
		"-v", bin+":"+inContainer+"/"+launcherName+":ro", "-v", pc.sockDir+":"+inContainer+"/launch",
		"--entrypoint", inContainer+"/"+launcherName,
		image, launcherKillAll, inContainer+"/launch/s")
	ctx, cancel := context.WithTimeout(a.life, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.cfg.Docker, args...)
	cmd.Env = agentEnvWithoutSecrets()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker run: %v: %s", err, lastLine(string(out)))
	}
	// The launcher listens a few milliseconds after the container starts,
	// for launcherAcceptTimeout.
	sock := filepath.Join(pc.sockDir, "s")
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
		removeContainer(a.cfg.Docker, pc.name)
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
	pc := a.prep
	a.prep = nil
	if pc != nil {
		close(pc.claimed)
	}
	a.prepMu.Unlock()
	if pc != nil {
		a.dropPrepared(pc)
	}
	a.prepWG.Wait()
}

// removeLeftoverPrepared removes what a previous agent process with this
// work dir left of its prepared containers: directories no job took
// (no state.json) and containers labelled with the work dir.
func (a *agent) removeLeftoverPrepared(ctx context.Context) {
	dirs, _ := filepath.Glob(filepath.Join(a.cfg.WorkDir, "jobs", preparedPrefix+"*"))
	var left []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, stateFile)); errors.Is(err, fs.ErrNotExist) {
			left = append(left, d)
		}
	}
	socks, _ := os.ReadDir(filepath.Join(a.cfg.WorkDir, launchDir))
	if len(left) == 0 && len(socks) == 0 {
		return
	}
	if a.cfg.Docker != "" && a.cfg.Docker != "none" {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, a.cfg.Docker, "ps", "-aq", "--filter", "label="+preparedLabel+"="+a.cfg.WorkDir).Output()
		if ids := strings.Fields(string(out)); err == nil && len(ids) > 0 {
			_ = exec.CommandContext(ctx, a.cfg.Docker, append([]string{"rm", "-f"}, ids...)...).Run()
		}
	}
	for _, d := range left {
		os.RemoveAll(d)
	}
	os.RemoveAll(filepath.Join(a.cfg.WorkDir, launchDir))
}

// launchBinary is the launcher's executable: a copy of this one in the
// work dir, made once per agent process (the file the agent started from
// may be replaced while it runs; the work dir is where the container
// engine finds the job's files). It must be static: it runs in any image.
func (a *agent) launchBinary() (string, error) {
	a.launchOnce.Do(func() {
		a.launchBin, a.launchErr = copyExecutable(filepath.Join(a.cfg.WorkDir, launchDir))
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

// entrypoint is the image's entrypoint, which `docker run IMAGE COMMAND`
// would put before the command (the prepared container's own is the
// launcher).
func (a *agent) entrypoint(image string) ([]string, error) {
	ctx, cancel := context.WithTimeout(a.life, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, a.cfg.Docker, "image", "inspect", "--format", "{{json .Config.Entrypoint}}", image).Output()
	if err != nil {
		return nil, fmt.Errorf("docker image inspect: %w", err)
	}
	var ep []string
	if err := json.Unmarshal(out, &ep); err != nil {
		return nil, fmt.Errorf("the image's entrypoint: %w", err)
	}
	return ep, nil
}
