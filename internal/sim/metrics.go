package sim

import (
	"math"
	"slices"
)

// Result is what one simulated setting gave.
type Result struct {
	Label    string    `json:"label"`
	Settings Settings  `json:"settings"`
	Total    Metrics   `json:"total"`
	Clusters []Metrics `json:"clusters"` // one per cluster, in order of first job
	// Timeline is nodes and demand over time (Config.Timeline only).
	Timeline []Point `json:"timeline,omitempty"`
	// Price is the hourly price of one node, in USD.
	Price float64 `json:"priceUsdPerNodeHour"`
}

// Settings is the Config that produced a Result, as JSON shows it.
type Settings struct {
	Size           string  `json:"size"`
	Tier           string  `json:"tier"`
	Min            int     `json:"minNodeCount"`
	Max            int     `json:"maxNodeCount"`
	IdleTimeout    float64 `json:"idleTimeoutSeconds"`
	Policy         string  `json:"policy"`
	DelayWeight    float64 `json:"delayWeight,omitempty"`
	ProvisionDelay string  `json:"provisionDelay"`
	DeletionDelay  string  `json:"deletionDelay"`
	EvictionRate   float64 `json:"evictionRate,omitempty"`
	QuotaCores     int     `json:"quotaCores,omitempty"`
	Clusters       string  `json:"clusters"`
	Seed           uint64  `json:"seed"`
}

// Metrics are the figures of one cluster or of all of them. Node-hours
// split billed time by what the nodes did: billed = provisioning + busy +
// idle + deleting. Queue delay is the time a completed job spent queued
// (over all its attempts), in seconds.
type Metrics struct {
	Cluster   string `json:"cluster"`
	Jobs      int    `json:"jobs"`      // jobs submitted
	Completed int    `json:"completed"` // jobs that ran to the end
	Failed    int    `json:"failed"`    // preempted too many times
	Rejected  int    `json:"rejected"`  // need more nodes than maxNodeCount (refused at submit)

	BilledNodeHours       float64 `json:"billedNodeHours"`
	BusyNodeHours         float64 `json:"busyNodeHours"`
	IdleNodeHours         float64 `json:"idleNodeHours"`
	ProvisioningNodeHours float64 `json:"provisioningNodeHours"`
	DeletingNodeHours     float64 `json:"deletingNodeHours"`
	LostNodeHours         float64 `json:"lostNodeHours"` // busy time of attempts cut by eviction
	Cost                  float64 `json:"costUsd"`

	QueueDelay Delays `json:"queueDelaySeconds"`
	ColdStarts int    `json:"coldStarts"` // jobs that started on a node created after they were queued

	PeakNodes    int `json:"peakNodes"`
	ScaleUps     int `json:"scaleUps"`   // plans that created nodes
	ScaleDowns   int `json:"scaleDowns"` // plans that removed live nodes
	NodesCreated int `json:"nodesCreated"`
	NodesRemoved int `json:"nodesRemoved"`
	Evictions    int `json:"evictions"`

	// Hours is the simulated time: from the trace start to the last event.
	Hours float64 `json:"hours"`
}

// Delays summarizes queue delays: mean and nearest-rank percentiles.
type Delays struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Point is the state of all clusters from time T (seconds since the trace
// start) until the next point.
type Point struct {
	T      float64 `json:"t"`
	Nodes  int     `json:"nodes"`  // nodes that exist (preparing, idle, running)
	Demand int     `json:"demand"` // nodes the queued and running jobs need
}

// summarize computes Delays from delays in seconds; it sorts them.
func summarize(delays []float64) Delays {
	if len(delays) == 0 {
		return Delays{}
	}
	slices.Sort(delays)
	var sum float64
	for _, d := range delays {
		sum += d
	}
	return Delays{
		Mean: sum / float64(len(delays)),
		P50:  percentile(delays, 50),
		P90:  percentile(delays, 90),
		P99:  percentile(delays, 99),
		Max:  delays[len(delays)-1],
	}
}

// percentile is the nearest-rank percentile of sorted values: the smallest
// value that at least p % of the values do not exceed.
func percentile(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// usage is the node time of one cluster, by what the nodes did, in
// seconds (float64: a sum of node-nanoseconds would overflow int64 on a
// large trace; whole seconds stay exact).
type usage struct {
	prep, idle, busy, deleting, lost float64
}

// add sums other clusters' metrics into m: counts and hours add up; peak
// and delays are set by the caller.
func (m *Metrics) add(o Metrics) {
	m.Jobs += o.Jobs
	m.Completed += o.Completed
	m.Failed += o.Failed
	m.Rejected += o.Rejected
	m.BilledNodeHours += o.BilledNodeHours
	m.BusyNodeHours += o.BusyNodeHours
	m.IdleNodeHours += o.IdleNodeHours
	m.ProvisioningNodeHours += o.ProvisioningNodeHours
	m.DeletingNodeHours += o.DeletingNodeHours
	m.LostNodeHours += o.LostNodeHours
	m.Cost += o.Cost
	m.ColdStarts += o.ColdStarts
	m.ScaleUps += o.ScaleUps
	m.ScaleDowns += o.ScaleDowns
	m.NodesCreated += o.NodesCreated
	m.NodesRemoved += o.NodesRemoved
	m.Evictions += o.Evictions
}
