// Package docker is the provider whose nodes are containers of the node
// image (see internal/nodeimage) on the host's Docker engine, each running
// `cumulus agent` with the VM size's CPU and memory limits, host
// networking, and the host's Docker socket so that the agent can run jobs
// in their images. Containers carry labels (node, compute, owner), so the
// provider finds its nodes again after a control-plane restart. It talks to
// the engine through the docker CLI. It acts, it never decides.
package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/nodeimage"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// Labels on node containers, and on the job containers agents start.
const (
	LabelNode        = "cumulus.node"         // node id
	LabelCompute     = "cumulus.compute"      // compute (cluster) resource id
	LabelOwner       = "cumulus.owner"        // the control plane the node belongs to (Options.Owner)
	LabelVMSize      = "cumulus.vm-size"      // requested VM size
	LabelVCPUs       = "cumulus.vcpus"        // requested vCPUs (the limit may be lower: the host's CPUs)
	LabelMemoryMB    = "cumulus.memory-mb"    // requested memory (the limit may be lower: the host's memory)
	LabelGPUs        = "cumulus.gpus"         // requested GPUs
	LabelGPUDevices  = "cumulus.gpu-devices"  // the host's devices the node holds, by ID ("0,1"; "" none)
	LabelLowPriority = "cumulus.low-priority" // "true" for a low-priority node
	// LabelJobNode marks a job container that the agent of a node started;
	// Delete removes them with the node.
	LabelJobNode = "cumulus.job-node"
)

// NamePrefix starts every node container's name: cumulus-node-<node id>.
const NamePrefix = "cumulus-node-"

// Options configure the provider.
type Options struct {
	// Image is the node image (default nodeimage.DefaultTag). It is never
	// pulled: build it with `cumulus node-image build`.
	Image string
	Log   *slog.Logger
	// BaseDir holds one folder per node on the host (e.g. <data-dir>/nodes);
	// <BaseDir>/<node id> is mounted at the same path in the node, so that
	// bind mounts the agent asks the engine for resolve on the host.
	BaseDir string
	// StopGrace is how long a node's agent has between SIGTERM and SIGKILL:
	// for Delete (`docker stop -t`) and for a `docker stop` from outside
	// (the container's stop timeout). Default 40 s: more than the default
	// preemption grace period of a job (30 s) plus time to report.
	StopGrace time.Duration
	// Docker is the docker CLI (default "docker").
	Docker string
	// Socket is the host's Docker socket, mounted into every node.
	// Default: the path of a unix:// DOCKER_HOST, else /var/run/docker.sock.
	Socket string
	// Owner tells this control plane's nodes from others' on the same
	// engine (label cumulus.owner); List and so Reconcile see only these.
	// Default: BaseDir.
	Owner string
	// ControlPlane, when set, serves the control plane on a subnet
	// network's bridge, for the nodes in it (see network.go); without it,
	// nodes cannot be placed in subnets.
	ControlPlane provider.ControlPlane
	// GPUs reads the machine's accelerators, which the nodes divide (nil:
	// nvidia-smi, gpu.NvidiaSMI).
	GPUs gpu.Inventory
}

// Provider runs nodes as containers.
type Provider struct {
	o Options

	mu    sync.Mutex
	locks map[string]*nodeLock // per node: Create and Delete of one node never overlap
	host  *hostInfo            // cached once read
	// netMu: a subnet's network is not removed while a node joins it.
	netMu sync.Mutex
}

type nodeLock struct {
	sync.Mutex
	users int
}

var (
	_ provider.Provider     = (*Provider)(nil)
	_ provider.Networks     = (*Provider)(nil)
	_ provider.Accelerators = (*Provider)(nil)
)

// New returns a docker provider.
func New(o Options) *Provider {
	if o.Image == "" {
		o.Image = nodeimage.DefaultTag
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 40 * time.Second
	}
	if o.Docker == "" {
		o.Docker = "docker"
	}
	if o.Socket == "" {
		o.Socket = nodeimage.DockerSocket()
	}
	if o.Owner == "" {
		o.Owner = o.BaseDir
		if abs, err := filepath.Abs(o.BaseDir); err == nil && o.BaseDir != "" {
			o.Owner = abs
		}
	}
	return &Provider{o: o, locks: map[string]*nodeLock{}}
}

// Name is "docker".
func (p *Provider) Name() string { return "docker" }

// ContainerName is the name of a node's container.
func ContainerName(nodeID string) string { return NamePrefix + nodeID }

// Timeouts of docker CLI calls.
const (
	shortTimeout  = 30 * time.Second // inspect, ps, info, rm
	createTimeout = 2 * time.Minute  // docker run of a local image
)

func (p *Provider) nodeDir(nodeID string) (string, error) {
	if !provider.ValidNodeID(nodeID) {
		return "", fmt.Errorf("node id %q may hold only letters, digits, '.', '_' and '-'", nodeID)
	}
	if p.o.BaseDir == "" {
		return "", errors.New("docker provider: no base directory")
	}
	base, err := filepath.Abs(p.o.BaseDir)
	if err != nil {
		return "", fmt.Errorf("docker provider: %w", err)
	}
	return filepath.Join(base, nodeID), nil
}

// lock serializes the calls for one node; unlock with the returned func.
func (p *Provider) lock(nodeID string) func() {
	p.mu.Lock()
	l := p.locks[nodeID]
	if l == nil {
		l = &nodeLock{}
		p.locks[nodeID] = l
	}
	l.users++
	p.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		p.mu.Lock()
		if l.users--; l.users == 0 {
			delete(p.locks, nodeID)
		}
		p.mu.Unlock()
	}
}

// Create starts the node's container unless it exists, and returns the
// container id.
func (p *Provider) Create(ctx context.Context, spec provider.NodeSpec) (string, error) {
	dir, err := p.nodeDir(spec.NodeID)
	if err != nil {
		return "", err
	}
	defer p.lock(spec.NodeID)()
	name := ContainerName(spec.NodeID)
	if c, err := p.inspect(ctx, name); err == nil {
		return c.ID, nil
	} else if err = provider.IgnoreNotFound(err); err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	host, err := p.hostInfo(ctx)
	if err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	var nn *nodeNetwork
	if spec.Subnet != "" || spec.NoPublicIP {
		p.netMu.Lock()
		defer p.netMu.Unlock()
		if nn, err = p.joinNetwork(ctx, spec); err != nil {
			return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
		}
	}
	args := p.runArgs(spec, dir, host, nn)
	rctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	// The join token reaches the container through the docker CLI's
	// environment (-e NAME without a value): never on a command line,
	// which any user can read in /proc.
	out, err := p.docker(rctx, []string{"CUMULUS_JOIN_TOKEN=" + spec.JoinToken}, args...)
	if err != nil {
		if strings.Contains(err.Error(), "is already in use") { // created meanwhile, by another process
			if c, ierr := p.inspect(ctx, name); ierr == nil {
				return c.ID, nil
			}
			return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
		}
		if strings.Contains(strings.ToLower(err.Error()), "no such image") {
			return "", provider.Configurationf("create node %s: the node image %s is missing: build it with 'cumulus node-image build --tag %s'",
				spec.NodeID, p.o.Image, p.o.Image)
		}
		// docker run may leave a created container behind when the start
		// fails; remove it, so that a retry starts afresh.
		p.removeContainers(context.WithoutCancel(ctx), name)
		return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
	}
	id := lastLine(out)
	if id == "" {
		return "", fmt.Errorf("create node %s: docker %s printed no container id", spec.NodeID, args[0])
	}
	if nn != nil {
		if err := p.startInNetworks(ctx, nn, id); err != nil {
			return "", fmt.Errorf("create node %s: %w", spec.NodeID, err)
		}
	}
	p.o.Log.Info("node container started", "node", spec.NodeID, "container", shortID(id), "cpus", cpus(spec, host),
		"memory_mb", memoryMB(spec, host), "gpus", strings.Join(gpu.IDs(spec.Devices), ","), "logs", "docker logs "+name)
	return id, nil
}

// runArgs is the docker command line of a node (without secrets): run,
// or, for a node in a subnet (nn not nil), create (startInNetworks starts
// it).
func (p *Provider) runArgs(spec provider.NodeSpec, dir string, host hostInfo, nn *nodeNetwork) []string {
	memMB := int(math.Round(spec.MemoryGB * 1024))
	verb := []string{"run", "--detach"}
	network := []string{"--network", "host"}
	serverURL, address := spec.ServerURL, "127.0.0.1"
	if nn != nil {
		verb, network = []string{"create"}, networkArgs(nn, ContainerName(spec.NodeID))
		serverURL, address = nn.controlPlane.URL, nn.plan.CIDR() // the agent takes its address in the range
	}
	args := append(verb, "--name", ContainerName(spec.NodeID), "--pull", "never",
		"--label", LabelNode+"="+spec.NodeID,
		"--label", LabelCompute+"="+spec.ComputeID,
		"--label", LabelOwner+"="+p.o.Owner,
		"--label", LabelVMSize+"="+spec.VMSize,
		"--label", LabelVCPUs+"="+strconv.Itoa(spec.VCPUs),
		"--label", LabelMemoryMB+"="+strconv.Itoa(memMB),
		"--label", LabelGPUs+"="+strconv.Itoa(spec.GPUs),
		"--label", LabelGPUDevices+"="+strings.Join(gpu.IDs(spec.Devices), ","),
		"--label", LabelLowPriority+"="+strconv.FormatBool(spec.LowPriority),
		"--init", // reaps the job processes the agent leaves orphaned, forwards signals
		"--restart", "no",
		"--stop-timeout", strconv.Itoa(int(math.Ceil(p.o.StopGrace.Seconds()))),
		"--volume", p.o.Socket+":/var/run/docker.sock",
		"--volume", dir+":"+dir,
		"--env", "CUMULUS_JOIN_TOKEN",
		"--env", "CUMULUS_VCPUS="+strconv.Itoa(spec.VCPUs),
		"--env", "CUMULUS_MEMORY_MB="+strconv.Itoa(memMB),
		"--env", "CUMULUS_GPUS="+strconv.Itoa(spec.GPUs),
		"--env", provider.GPUDevicesEnv+"="+provider.GPUDevicesValue(spec.Devices),
		"--env", "CUMULUS_NODE_CONTAINER="+ContainerName(spec.NodeID),
	)
	args = append(args, network...)
	if c := cpus(spec, host); c > 0 {
		args = append(args, "--cpus", strconv.FormatFloat(c, 'f', -1, 64))
	}
	if m := memoryMB(spec, host); m > 0 {
		args = append(args, "--memory", strconv.Itoa(m)+"m")
	}
	if len(spec.Devices) > 0 {
		// Only its own devices, by UUID; the agent inside sees them
		// numbered from 0 and offers them by the same UUIDs.
		args = append(args, "--gpus", strconv.Quote("device="+provider.GPUDevicesValue(spec.Devices)))
	}
	if spec.CAFile != "" {
		ca, err := filepath.Abs(spec.CAFile)
		if err != nil {
			ca = spec.CAFile
		}
		args = append(args, "--volume", ca+":"+ca+":ro")
		spec.CAFile = ca
	}
	args = append(args, p.o.Image,
		"--server", serverURL,
		"--node-id", spec.NodeID,
		"--work-dir", filepath.Join(dir, "work"),
		"--address", address)
	if spec.CAFile != "" {
		args = append(args, "--ca-file", spec.CAFile)
	}
	if nn != nil && nn.controlPlane.TLSServerName != "" {
		args = append(args, "--tls-server-name", nn.controlPlane.TLSServerName)
	}
	return args
}

// cpus is the node's CPU limit: its vCPUs, at most the host's CPUs.
func cpus(spec provider.NodeSpec, host hostInfo) float64 {
	c := float64(spec.VCPUs)
	if host.NCPU > 0 && c > float64(host.NCPU) {
		c = float64(host.NCPU)
	}
	return c
}

// memoryMB is the node's memory limit: its size's memory, at most the
// host's.
func memoryMB(spec provider.NodeSpec, host hostInfo) int {
	m := int(math.Round(spec.MemoryGB * 1024))
	if hm := int(host.MemTotal >> 20); hm > 0 && m > hm {
		m = hm
	}
	return m
}

// Machine reads the accelerators of this machine, whose engine the nodes
// run on, through Options.GPUs: the nodes divide them, each container given
// its own (docker run --gpus "device=…"). An engine that cannot give
// containers GPUs (no NVIDIA container toolkit) offers none, and says so.
// The engine must run on the machine cumulus serve runs on.
func (p *Provider) Machine(ctx context.Context) (gpu.Machine, error) {
	inv := p.o.GPUs
	if inv == nil {
		inv = gpu.NvidiaSMI{}
	}
	ds, err := inv.Devices(ctx)
	if err != nil {
		return gpu.Machine{}, fmt.Errorf("docker provider: %w", err)
	}
	if len(ds) == 0 {
		return gpu.Machine{}, nil
	}
	host, err := p.hostInfo(ctx)
	if err != nil {
		return gpu.Machine{}, err
	}
	if !host.NVIDIA {
		return gpu.Machine{Why: fmt.Sprintf("the Docker engine cannot give containers GPUs (NVIDIA's container toolkit is not installed), though nvidia-smi lists %s", gpu.Summary(ds))}, nil
	}
	return gpu.Machine{Devices: ds}, nil
}

// List reports this control plane's node containers, running or not.
func (p *Provider) List(ctx context.Context) ([]provider.Instance, error) {
	ctx, cancel := context.WithTimeout(ctx, shortTimeout)
	defer cancel()
	cs, err := p.ps(ctx, "label="+LabelNode, "label="+LabelOwner+"="+p.o.Owner)
	if err != nil {
		return nil, fmt.Errorf("list docker nodes: %w", err)
	}
	var ins []provider.Instance
	for _, c := range cs {
		node := labelValue(c.Labels, LabelNode)
		if node == "" {
			continue
		}
		ins = append(ins, provider.Instance{NodeID: node, ProviderID: c.ID, Running: c.State == "running"})
	}
	sort.Slice(ins, func(i, k int) bool { return ins[i].NodeID < ins[k].NodeID })
	return ins, nil
}

// ps lists the containers (running or not) that match every filter.
func (p *Provider) ps(ctx context.Context, filters ...string) ([]psLine, error) {
	args := []string{"ps", "--all", "--no-trunc", "--format", "{{json .}}"}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	out, err := p.docker(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	var cs []psLine
	for _, line := range bytes.Split(out, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var c psLine
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("parse docker ps %q: %w", line, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// psLine is one line of `docker ps --format '{{json .}}'`.
type psLine struct {
	ID     string
	Names  string
	Labels string // "k=v,k=v"
	State  string // created, running, paused, restarting, removing, exited, dead
}

// labelValue finds key in docker ps's "k=v,k=v" labels.
func labelValue(labels, key string) string {
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Delete stops the node's container (the agent gets SIGTERM and stops its
// job; SIGKILL after StopGrace), removes it and the job containers its
// agent started, and the node's folder. A node that is gone is not an
// error.
func (p *Provider) Delete(ctx context.Context, nodeID string) error {
	dir, err := p.nodeDir(nodeID)
	if err != nil {
		return err
	}
	defer p.lock(nodeID)()
	name := ContainerName(nodeID)
	c, err := p.inspect(ctx, name)
	switch {
	case errors.Is(err, provider.ErrNotFound):
	case err != nil:
		return fmt.Errorf("delete node %s: %w", nodeID, err)
	default:
		if c.State.Running {
			sctx, cancel := context.WithTimeout(ctx, p.o.StopGrace+shortTimeout)
			_, err := p.docker(sctx, nil, "stop", "--time", strconv.Itoa(int(math.Ceil(p.o.StopGrace.Seconds()))), name)
			cancel()
			if err != nil && !isNoSuch(err) {
				p.o.Log.Warn("node container did not stop; removing it by force", "node", nodeID, "err", err)
			}
		}
		if err := p.removeContainers(ctx, name); err != nil {
			return fmt.Errorf("delete node %s: %w", nodeID, err)
		}
	}
	jobs, err := p.jobContainers(ctx, nodeID)
	if err != nil {
		return fmt.Errorf("delete node %s: %w", nodeID, err)
	}
	if len(jobs) > 0 {
		if err := p.removeContainers(ctx, jobs...); err != nil {
			return fmt.Errorf("delete node %s: job containers: %w", nodeID, err)
		}
		p.o.Log.Warn("removed job containers the node's agent left behind", "node", nodeID, "containers", len(jobs))
	}
	if err := p.removeDir(ctx, dir); err != nil {
		return fmt.Errorf("delete node %s: %w", nodeID, err)
	}
	if net := c.Config.Labels[LabelSubnet]; net != "" {
		p.netMu.Lock()
		p.leaveNetwork(ctx, net)
		p.netMu.Unlock()
	}
	if c.ID != "" {
		p.o.Log.Info("node container removed", "node", nodeID, "container", shortID(c.ID))
	}
	return nil
}

// jobContainers lists the containers (running or not) labelled as jobs
// of the node.
func (p *Provider) jobContainers(ctx context.Context, nodeID string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, shortTimeout)
	defer cancel()
	cs, err := p.ps(ctx, "label="+LabelJobNode+"="+nodeID)
	if err != nil {
		return nil, fmt.Errorf("list job containers: %w", err)
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids, nil
}

// removeContainers removes containers by force; ones already gone are
// not an error.
func (p *Provider) removeContainers(ctx context.Context, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, shortTimeout+p.o.StopGrace)
	defer cancel()
	_, err := p.docker(ctx, nil, append([]string{"rm", "--force", "--volumes"}, names...)...)
	if err != nil && !isNoSuch(err) && !strings.Contains(err.Error(), "already in progress") {
		return err
	}
	return nil
}

// removeDir removes a node's folder. What the node's containers wrote
// there as root may be out of reach of this process: then a container of
// the node image removes it.
func (p *Provider) removeDir(ctx context.Context, dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	parent := filepath.Dir(dir)
	rctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	if _, rerr := p.docker(rctx, nil, "run", "--rm", "--pull", "never", "--network", "none", "--volume", parent+":"+parent,
		"--entrypoint", "/bin/rm", p.o.Image, "-rf", dir); rerr != nil {
		return fmt.Errorf("remove %s: %w (and through a container: %v)", dir, err, rerr)
	}
	return nil
}

// container is what Create and Delete need from docker inspect.
type container struct {
	ID    string `json:"Id"`
	State struct {
		Status  string
		Running bool
	}
	Config struct {
		Labels map[string]string
	}
}

// inspect finds a container by name; provider.ErrNotFound if none.
func (p *Provider) inspect(ctx context.Context, name string) (container, error) {
	ctx, cancel := context.WithTimeout(ctx, shortTimeout)
	defer cancel()
	out, err := p.docker(ctx, nil, "container", "inspect", "--format", "{{json .}}", name)
	if err != nil {
		if isNoSuch(err) {
			return container{}, fmt.Errorf("container %s: %w", name, provider.ErrNotFound)
		}
		return container{}, fmt.Errorf("inspect %s: %w", name, err)
	}
	var c container
	if err := json.Unmarshal(bytes.TrimSpace(out), &c); err != nil {
		return container{}, fmt.Errorf("inspect %s: %w", name, err)
	}
	return c, nil
}

// hostInfo is what the engine tells about its machine.
type hostInfo struct {
	NCPU     int
	MemTotal int64
	NVIDIA   bool // the engine can give containers GPUs
}

func (p *Provider) hostInfo(ctx context.Context) (hostInfo, error) {
	p.mu.Lock()
	h := p.host
	p.mu.Unlock()
	if h != nil {
		return *h, nil
	}
	ctx, cancel := context.WithTimeout(ctx, shortTimeout)
	defer cancel()
	out, err := p.docker(ctx, nil, "info", "--format", "{{json .}}")
	if err != nil {
		return hostInfo{}, fmt.Errorf("cannot reach the Docker engine (is dockerd running?): %w", err)
	}
	var info struct {
		NCPU     int
		MemTotal int64
		Runtimes map[string]json.RawMessage
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &info); err != nil {
		return hostInfo{}, fmt.Errorf("docker info: %w", err)
	}
	_, nvidia := info.Runtimes["nvidia"]
	if !nvidia {
		// --gpus needs NVIDIA's hook next to the engine, not a runtime.
		_, err := exec.LookPath("nvidia-container-runtime-hook")
		nvidia = err == nil
	}
	h = &hostInfo{NCPU: info.NCPU, MemTotal: info.MemTotal, NVIDIA: nvidia}
	p.mu.Lock()
	p.host = h
	p.mu.Unlock()
	return *h, nil
}

// docker runs the docker CLI and returns its stdout; a failure carries its
// stderr. env is added to the CLI's environment.
func (p *Provider) docker(ctx context.Context, env []string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, p.o.Docker, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return stdout.Bytes(), fmt.Errorf("docker %s: %w: %s", args[0], err, msg)
		}
		return stdout.Bytes(), fmt.Errorf("docker %s: %w", args[0], err)
	}
	return stdout.Bytes(), nil
}

// isNoSuch reports whether the engine said the object does not exist.
func isNoSuch(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "no such")
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
