// Package provider defines where nodes come from. A provider acts, it
// never decides: the controllers record intent in the store first, then
// call Create/Delete, and reconcile with List after a restart.
package provider

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/gpu"
)

// NodeSpec is everything a provider needs to start one node's agent.
type NodeSpec struct {
	NodeID    string
	ComputeID string
	VMSize    string
	VCPUs     int
	MemoryGB  float64
	GPUs      int
	// Devices are the devices of the machine the node holds, on a
	// provider whose nodes divide one machine's (Accelerators); the node
	// must offer those and no others. Empty: none (a CPU size), or the
	// provider's nodes have machines of their own.
	Devices     []agentapi.GPU
	LowPriority bool
	ServerURL   string // where the agent reaches the control plane: one URL or a comma-separated list of replicas (parse with endpoints.Parse)
	CAFile      string // CA the agent trusts for ServerURL ("" for plain HTTP or system roots)
	JoinToken   string // one-time token the agent registers with
	// GracePeriod is how long the node's agent has between SIGTERM and
	// SIGKILL when its machine goes away (the cluster's preemption grace
	// plus time to report); 0: the provider's default.
	GracePeriod time.Duration
	// Kubernetes places the node's pod (kubernetes provider only).
	Kubernetes *api.KubernetesPlacement
	// Slurm places the node's Slurm job (slurm provider only).
	Slurm *api.SlurmPlacement
	// Image is the job image the node is made from, for providers that
	// are ImageBound; "" is the provider's node image.
	Image string
	// Subnet is the compute's subnet ARM id ("" for none); NoPublicIP is
	// enableNodePublicIp false. Only providers whose server enforces them
	// (server.NetworkEnforcement) get them set.
	Subnet     string
	NoPublicIP bool
}

// ImageBound is a provider whose nodes each run one image, chosen at
// creation: the image of the job the node is made for (see
// decide.Cluster.ImageBound). The scheduler then places a job only on
// nodes of its image.
type ImageBound interface {
	ImageBound() bool
}

// Accelerators is a provider whose nodes all run on one machine and divide
// its accelerators: the controller gives each node devices of its own
// (NodeSpec.Devices), which no other node holds while it lives, and
// refuses a size that needs more than the machine has. Machine reads the
// devices there are; the server reads them once, at start.
type Accelerators interface {
	Machine(ctx context.Context) (gpu.Machine, error)
}

// GPUDevicesEnv is the agent's variable naming the devices it offers (see
// agent.Config.GPUDevices); GPUDevicesValue is its value for a node that
// holds ds, named by the stable name of each (a UUID: inside a container
// its devices are numbered from 0), "none" for none.
const GPUDevicesEnv = "CUMULUS_GPU_DEVICES"

// GPUDevicesValue is GPUDevicesEnv's value for a node holding ds.
func GPUDevicesValue(ds []agentapi.GPU) string {
	if len(ds) == 0 {
		return "none"
	}
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = gpu.Stable(d)
	}
	return strings.Join(names, ",")
}

// Instance is a node as the provider sees it.
type Instance struct {
	NodeID     string
	ProviderID string
	Running    bool
	// Starting: not running yet but on its way (e.g. a pod waiting for a
	// machine); a restarted control plane keeps such nodes.
	Starting bool
}

// EventKind is what a provider saw happen to a node.
type EventKind string

const (
	// EventPending: the node still waits for a machine, and Reason says
	// why (e.g. the Kubernetes scheduler's "Unschedulable: 0/3 nodes are
	// available: 3 Insufficient nvidia.com/gpu").
	EventPending EventKind = "Pending"
	// EventTerminating: the node's machine was told to stop from outside
	// (a pod deleted or evicted); its agent has the grace period to finish.
	EventTerminating EventKind = "Terminating"
	// EventGone: the node's machine is gone or failed.
	EventGone EventKind = "Gone"
	// EventRunning: the node's machine is there (its agent starts); it no
	// longer waits in the provider's queue.
	EventRunning EventKind = "Running"
)

// Event is something a provider saw happen to one of its nodes. Events may
// repeat and may be about nodes the controller already removed.
type Event struct {
	NodeID string
	Kind   EventKind
	Reason string
	// Wait, on a Pending event of a provider whose scheduler says why as a
	// value (Slurm's reason code), is that value; Reason is then "".
	Wait *api.NodeWait
}

// Watcher is a provider that reports node events as they happen, instead
// of leaving them to heartbeat timeouts. Watch calls fn for each event
// until ctx ends; fn must not block for long.
type Watcher interface {
	Watch(ctx context.Context, fn func(Event)) error
}

// Checker is a provider that can tell, before any node is made, that it
// could never make a node of a spec (no machine it may use is that large,
// a partition that does not exist): the server refuses a compute whose
// nodes CheckNode refuses. It returns a *Refusal (wrapping ErrNeverFits),
// with the provider's words, for such a spec; any other error means it
// could not tell.
type Checker interface {
	CheckNode(ctx context.Context, spec NodeSpec) error
}

// ErrNeverFits is wrapped by Checker.CheckNode's refusals.
var ErrNeverFits = errors.New("the provider can never make such a node")

// Refusal is a Checker's refusal of a node spec: the compute setting it is
// about (vmSize, preemptionGracePeriod, slurm: as ARM names them under
// properties.properties) and why, in the provider's words. It wraps
// ErrNeverFits.
type Refusal struct {
	Setting string
	Reason  string
}

func (r *Refusal) Error() string { return r.Reason }
func (r *Refusal) Unwrap() error { return ErrNeverFits }

// Provider creates and deletes nodes. Its methods are safe for concurrent
// use; providertest.Run checks the contract below against a live one.
type Provider interface {
	// Name names the provider ("local", "docker", …); it never changes,
	// and the store records it with each node.
	Name() string
	// Create starts the node that spec describes and returns its provider
	// id, without waiting for its agent to register. It is idempotent by
	// spec.NodeID: a node that exists, starting or running, keeps its id
	// and is not started twice. A refusal is an InsufficientCapacityError
	// (no room now: try later), a ConfigurationError (fails until someone
	// changes a setting: the provider's words say which) or any other
	// error (transient: try again).
	Create(ctx context.Context, spec NodeSpec) (providerID string, err error)
	// Delete stops the node (its agent gets the grace period) and returns
	// once List no longer shows it; a node that is unknown or already
	// deleted returns nil.
	Delete(ctx context.Context, nodeID string) error
	// List returns every node this provider created and has not deleted:
	// running, still starting (Starting) or stopped (neither). It never
	// returns another control plane's nodes.
	List(ctx context.Context) ([]Instance, error)
}

// ValidNodeID reports whether a node id is safe as a folder, process
// argument and container name.
func ValidNodeID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
