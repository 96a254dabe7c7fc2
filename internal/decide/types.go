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
}

// Job is one queued job.
type Job struct {
	ID            string
	InstanceCount int    // nodes it needs at once (>= 1); placed whole or not at all
	Priority      int    // higher first; equal priority: FIFO by Seq
	Seq           int64  // submission order
	Image         string // the job's image (ImageBound clusters); "" runs on the node image
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
	// GPUs, when set, is what the accelerators of the machine the
	// provider's nodes share allow this cluster (see GPUs); nil: no such
	// limit (a CPU size, or a provider whose nodes have machines of their
	// own).
	GPUs *GPUs
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
	// Blocked is why demand is not met ("at maxNodeCount 2", "quota allows
	// 0 more nodes"), "" if it is.
	Blocked string
	// QuotaShort is how many nodes quota kept this plan from creating: the
	// cluster wanted Create+QuotaShort. It is > 0 exactly when quota binds.
	QuotaShort int
	// QuotaWait lists, in queue order, the queued jobs that wait because of
	// quota rather than maxNodeCount; nil when quota does not bind.
	QuotaWait []Wait
	// GPUShort is how many nodes the machine's free devices kept this
	// plan from creating (after quota's cut); GPUBlock says why, and
	// GPUWait lists the queued jobs that wait for those nodes, in queue
	// order. Zero and nil when devices do not bind.
	GPUShort int
	GPUBlock *api.GPUBlock
	GPUWait  []Wait
}

// Wait is a queued job held back by quota.
type Wait struct {
	JobID string
	// Nodes is how many more nodes the job needs beyond those the cluster
	// has or is creating for it and the jobs ahead of it (1..InstanceCount).
	Nodes int
}
