package api

import "time"

// FairShareStatus is where each group of a fair-share compute stands
// (read-only, a Cumulus extension): computed when the compute is read.
type FairShareStatus struct {
	// Unit is what usage counts: "GPU" hours on GPU sizes, else "node"
	// hours.
	Unit   string       `json:"unit"`
	Groups []GroupShare `json:"groups"`
}

// GroupShare is one fair-share group of a compute.
type GroupShare struct {
	// Name is the principal or the tag's value; "" is the jobs without
	// the grouping tag (Display says so).
	Name    string  `json:"name"`
	Display string  `json:"display"`
	Weight  float64 `json:"weight"`
	// UsageHours is the node time (GPU time on GPU sizes) the group's jobs
	// held, decayed with the policy's half-life; RecentNodes is the same
	// usage as the nodes held on average lately.
	UsageHours  float64 `json:"usageHours"`
	RecentNodes float64 `json:"recentNodes"`
	// Nodes is what its running jobs hold now; Share the nodes it is
	// entitled to (its weighted share of maxNodeCount among the groups
	// with work, no more than it asks for).
	Nodes int     `json:"nodes"`
	Share float64 `json:"share"`
	// QueuedJobs and QueuedNodes are its waiting jobs and the nodes they
	// need.
	QueuedJobs  int `json:"queuedJobs"`
	QueuedNodes int `json:"queuedNodes"`
}

// QueueView is a compute's queue in the order its scheduler will take it
// (GET …/computes/{name}/queue, a Cumulus extension).
type QueueView struct {
	Compute string `json:"compute"`
	// Policy is the compute's queue policy (Fifo when it has none).
	Policy    QueuePolicy      `json:"queuePolicy"`
	FairShare *FairShareStatus `json:"fairShare,omitempty"`
	Jobs      []QueueEntry     `json:"value"`
	// Queued is every queued job of the compute; Jobs is its first Top.
	Queued int `json:"queuedJobs"`
}

// QueueEntry is one queued job in scheduling order.
type QueueEntry struct {
	Position int       `json:"position"` // 1 starts next
	Name     string    `json:"name"`
	Group    *string   `json:"group,omitempty"` // fair share
	Display  string    `json:"groupDisplay,omitempty"`
	Priority int       `json:"priority"`
	Nodes    int       `json:"nodes"`
	Queued   time.Time `json:"queuedAt"`
	// Reason is why it waits, as the job's status message says it.
	Reason string `json:"reason,omitempty"`
}
