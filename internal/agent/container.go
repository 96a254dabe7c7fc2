package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent/jobinit"
	"github.com/cumulus-ml/cumulus/internal/distrib"
)

// Container runtime: a job whose assignment names an image runs each of
// its processes in a container of that image (docker), with the job's
// directory mounted at the same path, the node's network (the host's, or
// that of the node's own container: ranks reach each other as with plain
// processes), the node's CPU and memory limits and the
// GPUs the job was given. Without a runtime the job runs as plain
// processes, and its log says so.

// dockerAvailable reports whether a docker engine answers (cached).
func (a *agent) dockerAvailable(ctx context.Context) bool {
	a.dockerOnce.Do(func() {
		if a.cfg.Docker == "" || a.cfg.Docker == "none" {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, a.cfg.Docker, "version", "--format", "{{.Server.Version}}").Output()
		a.docker = err == nil && len(strings.TrimSpace(string(out))) > 0
		if !a.docker {
			a.logger().Info("no container runtime: jobs that name an image run as plain processes", "docker", a.cfg.Docker)
		}
	})
	return a.docker
}

// chooseRuntime decides how the job runs: in its image when it names one
// and the node has a runtime (the image must be there or pullable), else as
// processes.
func (j *job) chooseRuntime(ctx context.Context, logf io.Writer) error {
	img := j.asg.Image
	if img == "" {
		return nil
	}
	if img == j.a.cfg.Image {
		fmt.Fprintf(logf, "[cumulus] running in image %s: this node runs in it\n", img)
		return nil
	}
	if j.prep != nil {
		j.image = img // its prepared container shows the image is here
		return nil
	}
	if !j.a.dockerAvailable(ctx) {
		fmt.Fprintf(logf, "[cumulus] this node has no container runtime; running without image %s\n", img)
		return nil
	}
	docker := j.a.cfg.Docker
	ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := exec.CommandContext(ictx, docker, "image", "inspect", "--format", "{{.Id}}", img).Run()
	cancel()
	if err != nil {
		pctx, cancel := context.WithTimeout(ctx, j.a.cfg.PullTimeout)
		out, perr := exec.CommandContext(pctx, docker, "pull", "--quiet", img).CombinedOutput()
		cancel()
		if perr != nil {
			msg := strings.TrimSpace(string(out))
			if msg == "" {
				msg = perr.Error()
			}
			return fmt.Errorf("image %s not found locally and could not be pulled: %s", img, lastLine(msg))
		}
	}
	j.image = img
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// labelJobNode marks the containers of a node's jobs (the docker
// provider removes them with the node).
const labelJobNode = "cumulus.job-node"

// containerCommand is `docker run` for one process of the job, or, when the
// job took a prepared container (prepared.go), the launcher's client. The
// job's variables are passed by name (-e NAME) with their values in the
// docker client's environment, or sent over the launcher's socket: they
// are on no command line.
func (j *job) containerCommand(p distrib.Process, env []string) *exec.Cmd {
	if pc := j.prep; pc != nil {
		// The container is the job's (j.containers names it); when the
		// agent dies the init kills the client and the launcher ends the
		// container, so the init has no container to remove.
		args := append([]string{containerExecName, "3"}, pc.entrypoint...)
		return &exec.Cmd{Path: containerExecName, Args: append(args, "/bin/sh", "-c", j.asg.Command),
			Env: slices.Clone(env[j.hostEnv:]), ExtraFiles: []*os.File{pc.file}}
	}
	name := fmt.Sprintf("cumulus-job-%s-%d-%d", j.asg.UID, j.asg.Attempt, p.Rank)
	j.containers = append(j.containers, name)
	args := []string{"run", "--rm", "--name", name, "--init",
		"--label", "cumulus.job=" + j.asg.UID, "--label", labelJobNode + "=" + j.a.node()}
	args = append(args, j.a.containerFlags(j.asg.ShmSize)...)
	args = append(args, "-v", j.dir+":"+j.dir, "-w", j.dir)
	gpuArgs, own := containerGPUArgs(j.jobGPUs(), env[j.hostEnv:], j.a.machineGPUs)
	args = append(args, gpuArgs...)
	for _, kv := range own {
		k, _, _ := strings.Cut(kv, "=")
		args = append(args, "-e", k)
	}
	args = append(args, j.image, "/bin/sh", "-c", j.asg.Command)
	cmd := exec.Command(j.a.cfg.Docker, args...)
	// The docker client needs the agent's environment (DOCKER_HOST, …);
	// the container gets only the job's variables named above.
	cmd.Env = append(append(agentEnvWithoutSecrets(), own...), jobinit.EnvContainer+"="+name)
	return cmd
}

// removeContainers removes the job's containers (they are normally gone
// with --rm; this catches a killed client or an agent stopping).
//
// A prepared container is removed in the background: its launcher killed
// every process in it before the job's client ended (or when the client
// was killed), so nothing of the job runs on while it goes.
func (j *job) removeContainers() {
	if len(j.containers) == 0 {
		return
	}
	if pc := j.prep; pc != nil {
		a := j.a
		a.prepWG.Add(1)
		go func() {
			defer a.prepWG.Done()
			jobinit.RemoveContainer(a.cfg.Docker, pc.name)
		}()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"rm", "-f"}, j.containers...)
	_ = exec.CommandContext(ctx, j.a.cfg.Docker, args...).Run()
}

func hostCPUs() int { return runtime.NumCPU() }

// hostMemoryMB is the machine's memory (MemTotal), or a large number when
// it cannot be read.
func hostMemoryMB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 1 << 30
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			if kb, err := strconv.Atoi(f[1]); err == nil {
				return kb / 1024
			}
		}
	}
	return 1 << 30
}
