package decide

import (
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Node states, spelled as Azure spells them in listNodes.
const (
	NodePreparing = api.NodePreparing
	NodeIdle      = api.NodeIdle
	NodeRunning   = api.NodeRunning
	NodeLeaving   = api.NodeLeaving
	NodePreempted = api.NodePreempted
	NodeUnusable  = api.NodeUnusable
)

// Node is one node of a cluster as the decisions see it.
type Node struct {
	ID        string
	State     string
	JobID     string    // job running on it, "" if none
	IdleSince time.Time // when it last became idle (valid when State == NodeIdle)
	Created   time.Time
	Image     string // what the node runs (ImageBound clusters); "" is the node image
	// SSHOpen: someone is logged in to the node. An idle node with an SSH
	// session counts as busy: it is neither given a job nor scaled down.
	SSHOpen bool
}

// Job is one queued job.
type Job struct {
	ID            string
	Name          string // what a reason about the job calls it (its ARM name); ID when ""
	InstanceCount int    // nodes it needs at once (>= 1); placed whole or not at all
	Priority      int    // higher first; equal priority: FIFO by Seq
	Seq           int64  // submission order
	Image         string // the job's image (ImageBound clusters); "" runs on the node image
	Group         string // its fair-share group (Queue.FairShare)
}

// Cluster is the snapshot of one cluster that the decisions read.
type Cluster struct {
	ID          string
	Min, Max    int
	IdleTimeout time.Duration // nodeIdleTimeBeforeScaleDown
	Nodes       []Node
	Queued      []Job // jobs waiting for nodes, in any order
	// Headroom is how many more nodes quota allows this cluster to add now;
	// < 0 means unlimited.
	Headroom int
	// IdlePolicy, when set, says when each idle node may be removed instead
	// of IdleSince+IdleTimeout (see IdlePolicy); nil keeps the fixed timeout.
	IdlePolicy IdlePolicy
	// ImageBound: each node runs one image, fixed when it is created, and a
	// job runs only on nodes of its image (the kubernetes provider makes a
	// node pod from the job's image). See DecideImages.
	ImageBound bool

	// MaxSetBy names the schedule entry that set Max and Min ("" when they
	// are the cluster's own); BoundsChange is when a schedule next changes
	// them (zero: never). Reasons name the entry; the plan wakes then.
	MaxSetBy     string
	BoundsChange time.Time
	// Backoff, when Until is after now, holds node creation: the provider
	// failed to create nodes and is retried at Until.
	Backoff Backoff
	// Budgets whose action is in force on the cluster: no new nodes, and
	// with ToMin every idle node above the minimum goes now.
	Budgets []api.BudgetHold
	// GPUs, when set, is what the accelerators of the machine the
	// provider's nodes share allow this cluster (see GPUs); nil: no such
	// limit (a CPU size, or a provider whose nodes have machines of their
	// own).
	GPUs *GPUs

	// Queue is the compute's queue policy: FIFO or fair share, and
	// preemption (see fairshare.go). The zero value is FIFO without
	// preemption.
	Queue api.Queue
	// Running are the jobs that hold nodes (their nodes name them): fair
	// share counts what each group holds, preemption chooses among them.
	// Read only under fair share or with preemption.
	Running []Running
	// Usage is each fair-share group's decayed usage, by group.
	Usage map[string]Usage
}

// GPUs is the supply of devices for a cluster whose every node holds
// PerNode devices of one machine that other clusters' nodes share.
type GPUs struct {
	PerNode int
	// Free and Total are the machine's devices a node of the cluster may
	// hold: those no node holds, and all of them.
	Free, Total int
	// Held says which clusters' nodes hold the others, for the reason.
	Held []api.GPUHolder
	// Wanted is how many devices nodes of other clusters wait for: idle
	// nodes of this cluster that its own queue does not need, above its
	// minimum, are released for them before their idle time runs out.
	Wanted int
}

// Backoff is a provider's failure to create nodes, retried at Until.
type Backoff struct {
	Until   time.Time
	Message string // the provider's words
}

// Assignment starts one job on the nodes named.
type Assignment struct {
	JobID   string
	NodeIDs []string
}

// Plan is what should happen to a cluster now.
type Plan struct {
	Assign []Assignment // jobs to start now on idle nodes
	Create int          // new nodes to request from the provider
	// CreateImages, for ImageBound clusters, is the image of each new node
	// (len Create); nil otherwise.
	CreateImages []string
	Remove       []string // idle, unusable, preempted or finished leaving nodes to delete now
	Drain        []string // busy nodes to mark leaving: removed when their job ends
	Target       int      // targetNodeCount after this plan
	// WakeAt is the earliest future time at which the decision could change
	// with no other event (an idle node reaching its timeout); zero if none.
	WakeAt time.Time
	// Blocked says why demand is not met, as values (api.Block: a job
	// larger than maxNodeCount, maxNodeCount, quota, the provider's
	// backoff, a budget, the machine's GPUs); empty when it is met. The
	// edges word them.
	Blocked api.Blocks
	// QuotaShort is how many nodes quota kept this plan from creating: the
	// cluster wanted Create+QuotaShort. It is > 0 exactly when quota binds.
	QuotaShort int
	// QuotaWait lists, in queue order, the queued jobs that wait because of
	// quota rather than maxNodeCount; nil when quota does not bind.
	QuotaWait []Wait
	// Preempt lists the running jobs to stop and queue again for waiting
	// ones (Queue.Preemption), each with why; their nodes become idle when
	// their agents have stopped them.
	Preempt []api.Preemption
	// GPUShort is how many nodes the machine's free devices kept this
	// plan from creating (after quota's cut; Blocked then holds an
	// api.BlockGPUs saying why), and GPUWait lists the queued jobs that
	// wait for those nodes, in queue order. Zero and nil when devices do
	// not bind.
	GPUShort int
	GPUWait  []Wait
}

// Wait is a queued job held back by quota.
type Wait struct {
	JobID string
	// Nodes is how many more nodes the job needs beyond those the cluster
	// has or is creating for it and the jobs ahead of it (1..InstanceCount).
	Nodes int
}

// ForCompute is the decision's view of compute c at now before its nodes
// and queue are added: the bounds in force (a schedule entry's, naming it
// when it changed maxNodeCount, and when the next one fires), the idle time,
// unlimited headroom, its queue policy. The controller and the simulator
// both start from it, so that a replay decides as the product does.
func ForCompute(c api.Compute, now time.Time) Cluster {
	_, own, idle := c.Scale()
	lo, hi, active, next := c.ScaleAt(now)
	cl := Cluster{ID: c.ID, Min: lo, Max: hi, IdleTimeout: idle, Headroom: -1, BoundsChange: next, Queue: c.Queue()}
	if active != nil && hi != own {
		cl.MaxSetBy = active.Name
	}
	return cl
}
