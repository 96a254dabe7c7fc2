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
	// Groups are the trace's teams (its vc values) when they share one
	// cluster: what each received against what it was entitled to, and
	// how long its jobs waited; Fairness sums them up.
	Groups   []GroupMetrics `json:"groups,omitempty"`
	Fairness *Fairness      `json:"fairness,omitempty"`
	// Unit is what groups' hours count: "GPU" hours on GPU sizes, else
	// "node" hours.
	Unit string `json:"unit,omitempty"`
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
	// The queue policy: fifo or fair, and preemption.
	Queue      string             `json:"queuePolicy"`
	Preemption string             `json:"preemption"`
	HalfLife   float64            `json:"halfLifeSeconds,omitempty"`
	MinRuntime float64            `json:"minRuntimeSeconds,omitempty"`
	Weights    map[string]float64 `json:"weights,omitempty"`
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
	LostNodeHours         float64 `json:"lostNodeHours"` // busy time of attempts cut by eviction or preemption
	Cost                  float64 `json:"costUsd"`
	// Utilization is busy over billed node-hours; Useful leaves out the
	// busy time that preemptions and evictions lost.
	Utilization       float64 `json:"utilization"`
	UsefulUtilization float64 `json:"usefulUtilization"`
	// Preemptions counts attempts the queue policy stopped for another
	// job (their work is in LostNodeHours: checkpoints are not modelled).
	Preemptions int `json:"preemptions"`

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
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// GroupMetrics are the figures of one team (a vc of the trace) on a
// shared cluster, in Result.Unit hours.
type GroupMetrics struct {
	Name      string  `json:"name"`
	Weight    float64 `json:"weight"`
	Jobs      int     `json:"jobs"`
	Completed int     `json:"completed"`
	// ReceivedHours is the node (GPU) time its jobs held; EntitledHours
	// its share of the cluster while it had work (held or queued): its
	// weighted part of maxNodeCount among the teams with work, no more
	// than it wanted (max-min fair); Ratio is the one over the other.
	ReceivedHours float64 `json:"receivedHours"`
	EntitledHours float64 `json:"entitledHours"`
	Ratio         float64 `json:"ratio"`
	QueueDelay    Delays  `json:"queueDelaySeconds"`
	Preempted     int     `json:"preempted"` // attempts of its jobs the queue policy stopped
	LostHours     float64 `json:"lostHours"` // the work those attempts lost
}

// Fairness sums up the groups: Jain's index over their received/entitled
// ratios (1 when every group got the same fraction of its entitlement;
// 1/n at worst).
type Fairness struct {
	Jain float64 `json:"jain"`
}

// jain is Jain's fairness index of xs.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
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
		P95:  percentile(delays, 95),
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

// utilization sets the utilizations from the node-hours.
func (m *Metrics) utilization() {
	if m.BilledNodeHours > 0 {
		m.Utilization = m.BusyNodeHours / m.BilledNodeHours
		m.UsefulUtilization = (m.BusyNodeHours - m.LostNodeHours) / m.BilledNodeHours
	}
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
	m.Preemptions += o.Preemptions
}
