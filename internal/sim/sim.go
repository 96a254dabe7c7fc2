// Package sim replays job traces through the scheduler and autoscaler that
// `cumulus serve` runs (decide.Decide), on a virtual clock with a simulated
// provider, and measures what a cluster setting costs and how long jobs
// wait. Nothing sleeps: a year of trace runs in seconds.
//
// The simulator is a discrete-event loop. Events are job arrivals, nodes
// becoming ready (after the provisioning delay), job ends, node deletions
// (billed until done), low-priority evictions, and the WakeAt of the last
// plan. At each event time it applies every event due, then for each
// cluster touched builds the decide.Cluster snapshot (nodes with their
// state, IdleSince and job; queued jobs; quota headroom), calls
// decide.Decide and applies the plan with actuate.Apply, as the controller
// does, through an in-memory actuator (actuator.go): assignments start
// jobs, creates add preparing nodes that become idle after the
// provisioning delay, removes take nodes out (billed until the deletion
// delay has passed), drains mark nodes leaving. The adaptive idle policy
// learns from arrivals, job ends and ready nodes through actuate.Demand,
// as in the controller.
//
// Queue snapshots are cut short: the queue is in submission order (trace
// jobs have one priority), and no job needs more than maxNodeCount (those
// are refused at submit, as the API does), so the shortest prefix of the
// queue that needs more than maxNodeCount nodes gives the same Plan as the
// whole queue (the scheduler, the demand clamp and the quota walk all stop
// within it). A run is O(events · (nodes + maxNodeCount) + events · log
// events).
package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/actuate"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/quota"
)

// Idle policies.
const (
	PolicyFixed    = "fixed"    // nodeIdleTimeBeforeScaleDown, as Azure does
	PolicyAdaptive = "adaptive" // decide.AdaptiveIdle
)

// Epoch is the virtual time of the trace's second 0.
var Epoch = time.Date(2017, 10, 3, 0, 0, 0, 0, time.UTC)

// Config is one simulated setting, applied to every cluster of the trace.
type Config struct {
	Label       string
	Size        string // VM size from the catalog
	LowPriority bool
	Min, Max    int
	IdleTimeout time.Duration
	Policy      string // PolicyFixed or PolicyAdaptive
	Adaptive    decide.AdaptiveOptions
	Provision   Delay // node requested → ready
	Deletion    Delay // node removed → gone (billed until then)
	// EvictionRate is low-priority evictions per node-hour (Poisson).
	EvictionRate float64
	// MaxPreemptions fails a job preempted that many times (10, as the
	// server).
	MaxPreemptions int
	// QuotaCores is the cores that all clusters share (dedicated: the
	// family and total dedicated limits; low priority: the low-priority
	// pool); 0: unlimited.
	QuotaCores int
	// OneCluster puts every job in one cluster; otherwise each vc value of
	// the trace is a cluster of its own.
	OneCluster bool
	Seed       uint64
	// Timeline records nodes and demand over time in the Result.
	Timeline bool
	// Provider, when set, replaces the random provider drawn from
	// Provision, Deletion, EvictionRate and Seed.
	Provider Provider

	// Queue is the queue policy: QueueFifo (Azure's) or QueueFair (fair
	// share between the trace's vc values, its teams, on one cluster).
	Queue string
	// Weights of the teams under fair share (a team not named weighs 1).
	Weights map[string]float64
	// HalfLife of fair share's decayed usage (default 24 h).
	HalfLife time.Duration
	// Preemption: PreemptNone, PreemptLowerPriority or PreemptOverShare
	// (fair share), with MinRuntime (default 10 min).
	Preemption string
	MinRuntime time.Duration
}

// Queue policies and preemption modes, as the CLI spells them.
const (
	QueueFifo            = "fifo"
	QueueFair            = "fair"
	PreemptNone          = "none"
	PreemptLowerPriority = "lower_priority"
	PreemptOverShare     = "over_share"
)

// preemptionModes maps the CLI's preemption modes to the API's.
var preemptionModes = map[string]string{PreemptNone: api.PreemptNone, PreemptLowerPriority: api.PreemptLowerPriority,
	PreemptOverShare: api.PreemptOverShare}

// DefaultConfig is the setting `cumulus sim` starts from: Azure's defaults
// for a cluster (0 to 100 nodes of Standard_DS3_v2, 120 s idle), nodes
// ready in 3 minutes ± 1, gone in 30 s.
func DefaultConfig() Config {
	return Config{
		Size:           api.DefaultVMSize,
		Max:            100,
		IdleTimeout:    120 * time.Second,
		Policy:         PolicyFixed,
		Adaptive:       decide.DefaultAdaptive(),
		Provision:      Delay{3 * time.Minute, time.Minute},
		Deletion:       Delay{Mean: 30 * time.Second},
		MaxPreemptions: 10,
		Seed:           1,
		Queue:          QueueFifo,
		HalfLife:       api.DefaultUsageHalfLife,
		Preemption:     PreemptNone,
		MinRuntime:     api.DefaultMinRuntime,
	}
}

// Validate checks the setting.
func (c Config) Validate() error {
	var errs []error
	size, ok := catalog.Lookup(c.Size)
	if !ok {
		errs = append(errs, fmt.Errorf("unknown VM size %q (see cumulus compute list-sizes)", c.Size))
	} else if c.LowPriority && !size.LowPriority {
		errs = append(errs, fmt.Errorf("VM size %s has no low-priority tier", size.Name))
	}
	if c.Min < 0 || c.Max < 1 || c.Min > c.Max || c.Max > api.MaxClusterNodes {
		errs = append(errs, fmt.Errorf("want 0 <= min (%d) <= max (%d), 1 <= max <= %d", c.Min, c.Max, api.MaxClusterNodes))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v is negative", c.IdleTimeout))
	}
	if c.Policy != PolicyFixed && c.Policy != PolicyAdaptive {
		errs = append(errs, fmt.Errorf("policy %q is not %s or %s", c.Policy, PolicyFixed, PolicyAdaptive))
	}
	if c.EvictionRate < 0 {
		errs = append(errs, fmt.Errorf("eviction rate %v is negative", c.EvictionRate))
	}
	if c.EvictionRate > 0 && !c.LowPriority {
		errs = append(errs, errors.New("evictions happen to low-priority nodes only: add --tier low_priority"))
	}
	if c.QuotaCores < 0 {
		errs = append(errs, fmt.Errorf("quota of %d cores is negative", c.QuotaCores))
	}
	if c.Adaptive.DelayWeight < 0 {
		errs = append(errs, fmt.Errorf("delay weight %v is negative", c.Adaptive.DelayWeight))
	}
	errs = append(errs, c.validateQueue()...)
	return errors.Join(errs...)
}

// validateQueue checks the queue policy's settings.
func (c Config) validateQueue() []error {
	var errs []error
	if c.Queue != QueueFifo && c.Queue != QueueFair {
		errs = append(errs, fmt.Errorf("queue policy %q is not %s or %s", c.Queue, QueueFifo, QueueFair))
	}
	if _, ok := preemptionModes[c.Preemption]; !ok {
		errs = append(errs, fmt.Errorf("preemption %q is not %s, %s or %s", c.Preemption, PreemptNone, PreemptLowerPriority, PreemptOverShare))
	}
	if c.Preemption == PreemptOverShare && c.Queue != QueueFair {
		errs = append(errs, errors.New("preemption over_share needs --queue-policy fair"))
	}
	if c.Queue == QueueFair && (c.HalfLife < api.MinUsageHalfLife || c.HalfLife > api.MaxUsageHalfLife) {
		errs = append(errs, fmt.Errorf("half-life %v is not between 1 minute and 365 days", c.HalfLife))
	}
	if c.Preemption != PreemptNone && c.MinRuntime < 0 {
		errs = append(errs, fmt.Errorf("minimum runtime %v is negative", c.MinRuntime))
	}
	for team, w := range c.Weights {
		if !(w > 0 && w <= api.MaxShareWeight) {
			errs = append(errs, fmt.Errorf("weight of %s %v is not more than 0 and at most %d", team, w, api.MaxShareWeight))
		}
	}
	if len(c.Weights) > 0 && c.Queue != QueueFair {
		errs = append(errs, errors.New("weights need --queue-policy fair"))
	}
	return errs
}

// fair reports whether the jobs of every team share one cluster under
// fair share.
func (c Config) fair() bool { return c.Queue == QueueFair }

// Compute is the compute cluster the Config describes, as the API stores
// one: the simulator decides from it as the controller does.
func (c Config) Compute() api.Compute {
	var comp api.Compute
	a := comp.Aml()
	a.VMSize, a.VMPriority = c.Size, api.PriorityDedicated
	if c.LowPriority {
		a.VMPriority = api.PriorityLowPriority
	}
	lo, hi := int32(c.Min), int32(c.Max)
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &lo, MaxNodeCount: &hi, NodeIdleTimeBeforeScaleDown: api.FormatDuration(c.IdleTimeout)}
	if c.fair() || c.Preemption != PreemptNone {
		q := &api.QueuePolicy{Kind: api.QueuePolicyFifo, Preemption: preemptionModes[c.Preemption]}
		if c.fair() {
			q.Kind, q.FairShareBy, q.Weights, q.UsageHalfLife = api.QueuePolicyFairShare, api.FairShareByTagPrefix+"vc", c.Weights, api.FormatDuration(c.HalfLife)
		}
		if c.Preemption != PreemptNone {
			q.MinRuntime = api.FormatDuration(c.MinRuntime)
		}
		a.QueuePolicy = q
	}
	return comp
}

// Settings describes the Config as a Result shows it.
func (c Config) Settings() Settings {
	s := Settings{
		Size: c.Size, Tier: "dedicated", Min: c.Min, Max: c.Max, IdleTimeout: c.IdleTimeout.Seconds(),
		Policy: c.Policy, ProvisionDelay: c.Provision.String(), DeletionDelay: c.Deletion.String(),
		EvictionRate: c.EvictionRate, QuotaCores: c.QuotaCores, Clusters: "per vc", Seed: c.Seed,
	}
	if c.LowPriority {
		s.Tier = "low_priority"
	}
	if c.Policy == PolicyAdaptive {
		s.DelayWeight = c.Adaptive.DelayWeight
	}
	if c.OneCluster || c.fair() {
		s.Clusters = "one"
	}
	s.Queue, s.Preemption = c.Queue, c.Preemption
	if c.fair() {
		s.HalfLife = c.HalfLife.Seconds()
		s.Weights = c.Weights
	}
	if c.Preemption != PreemptNone {
		s.MinRuntime = c.MinRuntime.Seconds()
	}
	if c.Provider != nil {
		s.ProvisionDelay, s.DeletionDelay = "custom", "custom"
	}
	return s
}

// Run simulates the trace under one setting.
func Run(t *Trace, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	size, _ := catalog.Lookup(cfg.Size)
	if t.HasGPUs && !t.HasNodes && size.GPUs == 0 {
		return nil, fmt.Errorf("the trace counts GPUs but %s has none: pass a GPU size such as Standard_NC6s_v3 (1 GPU per node) or Standard_ND96asr_v4 (8)", size.Name)
	}
	s := newSim(t, cfg, size)
	if err := s.run(); err != nil {
		return nil, err
	}
	return s.result(), nil
}

// Event kinds, in the order they apply at one instant.
const (
	evDeleted uint8 = iota // a removed node is gone: its cores are free
	evEnd                  // a job's attempt ends
	evEvict                // a low-priority node is taken back
	evReady                // a node finished provisioning
	evWake                 // a plan's WakeAt
)

type event struct {
	at   time.Duration // since Epoch
	kind uint8
	gen  uint32 // attempt of a job, or wake generation of a cluster
	seq  uint64 // push order: ties are deterministic
	node *node
	job  *job
	cl   *cluster
}

func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}

// eventHeap is a binary min-heap of events.
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q[i].before(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = event{}
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].before(&q[m]) {
			m = l
		}
		if r < len(q) && q[r].before(&q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// Job states.
const (
	jobPending uint8 = iota // not submitted yet
	jobQueued
	jobRunning
	jobDone
	jobFailed
	jobRejected
)

type job struct {
	id       string
	seq      int64
	cl       *cluster
	team     *team // its vc, when teams are reported
	group    string
	running  int // its place in cl.running while it runs
	nodes    int
	submit   time.Duration
	duration time.Duration
	state    uint8
	enqueued time.Duration // when it last entered the queue
	started  time.Duration // when its current attempt started
	waited   time.Duration // queued time over all attempts
	attempt  uint32
	preempts int
	cold     bool
	on       []*node
}

type node struct {
	id        string
	k         int // the cluster's k-th node
	nth       int // the nth (from 0) the cluster requested at created
	cl        *cluster
	pos       int // index in cl.nodes
	state     string
	job       *job
	created   time.Duration
	idleSince time.Duration
	since     time.Duration // last time its node time was counted
	evicted   bool
}

type cluster struct {
	name  string
	idx   int
	nodes []*node
	byID  map[string]*node
	// queues wait in submission order: one under FIFO, one per team under
	// fair share (in order of the team's first job).
	queues  []*queue
	byGroup map[string]*queue
	// running are the jobs that hold nodes, for the queue policy; usage
	// each team's decayed usage (fair share) and held its nodes.
	running  []*job
	usage    map[string]decide.Usage
	held     map[string]int
	demand   *actuate.Demand // the adaptive policy's history; nil: fixed timeout
	act      actuator
	wakeAt   time.Duration
	wakeGen  uint32
	dirty    bool
	nextNode int
	lastReq  time.Duration // when the last node was requested
	reqNth   int           // nodes requested at lastReq so far
	quotaCut bool          // quota held the last plan back

	use    usage
	m      Metrics
	delays []float64 // queue delays of completed jobs, seconds
}

// queue is one queue of a cluster: jobs[head:] wait, in submission order.
type queue struct {
	group string
	jobs  []*job
	head  int
}

// team is one vc of the trace on a shared cluster, for Result.Groups.
type team struct {
	name               string
	weight             float64
	held, need         int     // nodes its running jobs hold and its queued jobs need
	received, entitled float64 // node-seconds
	share              float64 // its max-min share of maxNodeCount now
	jobs, completed    int
	preempted          int
	lost               float64 // node-seconds
	delays             []float64
}

type sim struct {
	cfg      Config
	comp     api.Compute // every cluster's settings
	size     catalog.Size
	prov     Provider
	events   eventHeap
	seq      uint64
	now      time.Duration
	last     time.Duration // the last event that changed anything
	jobs     []job
	next     int // next job to arrive
	clusters []*cluster
	dirty    []*cluster // touched since the last decisions
	spare    []*cluster

	quotaOn bool
	limits  quota.Limits
	usage   quota.Usage

	nodesNow, peak int
	demand         int
	timeline       []Point

	nodeBuf []decide.Node
	jobBuf  []decide.Job
	runBuf  []decide.Running

	// teams are the trace's vc values when they share a cluster (nil
	// otherwise), in order of first job; accounted is when their
	// received and entitled time was last counted.
	teams     []*team
	accounted time.Duration
}

func newSim(t *Trace, cfg Config, size catalog.Size) *sim {
	s := &sim{cfg: cfg, comp: cfg.Compute(), size: size, prov: cfg.Provider}
	if s.prov == nil {
		s.prov = NewProvider(cfg.Provision, cfg.Deletion, cfg.EvictionRate, cfg.Seed)
	}
	if cfg.QuotaCores > 0 {
		q := int64(cfg.QuotaCores)
		s.quotaOn = true
		s.limits = quota.Limits{DefaultFam: q, Dedicated: q, LowPriority: q}
		s.usage = quota.Usage{Family: map[string]int64{}}
	}
	byName := map[string]*cluster{}
	teams := map[string]*team{}
	shared := cfg.OneCluster || cfg.fair() || !t.HasVC
	s.jobs = make([]job, len(t.Jobs))
	for i, tj := range t.Jobs {
		name := tj.VC
		if shared {
			name = "all"
		}
		c := byName[name]
		if c == nil {
			c = &cluster{name: name, idx: len(s.clusters), byID: map[string]*node{}, byGroup: map[string]*queue{},
				usage: map[string]decide.Usage{}, held: map[string]int{}}
			c.act = actuator{s: s, c: c}
			if cfg.Policy == PolicyAdaptive {
				c.demand = actuate.NewDemand(cfg.Adaptive.Window)
			}
			c.m.Cluster = name
			byName[name] = c
			s.clusters = append(s.clusters, c)
		}
		j := job{id: "job-" + strconv.Itoa(i), seq: int64(i), cl: c, nodes: NodesOf(tj, size.GPUs), submit: tj.Submit, duration: tj.Duration}
		if cfg.fair() {
			j.group = tj.VC
		}
		if shared && t.HasVC {
			if j.team = teams[tj.VC]; j.team == nil {
				j.team = &team{name: tj.VC, weight: 1}
				if w, ok := cfg.Weights[tj.VC]; ok && cfg.fair() {
					j.team.weight = w
				}
				teams[tj.VC] = j.team
				s.teams = append(s.teams, j.team)
			}
		}
		s.jobs[i] = j
	}
	return s
}

// job returns the job of id ("job-N").
func (s *sim) job(id string) *job {
	i, err := strconv.Atoi(strings.TrimPrefix(id, "job-"))
	if err != nil || i < 0 || i >= len(s.jobs) {
		return nil
	}
	return &s.jobs[i]
}

// at is the virtual time of d since Epoch.
func at(d time.Duration) time.Time { return Epoch.Add(d) }

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.events.push(e)
}

func (s *sim) run() error {
	// Every cluster exists from the trace's second 0: the first pass
	// creates the nodes that minNodeCount asks for.
	for _, c := range s.clusters {
		s.touch(c)
	}
	for first := true; ; first = false {
		t, ok := s.nextTime()
		if first {
			t, ok = 0, true
		}
		if !ok {
			break
		}
		s.account(t)
		s.now = t
		for len(s.events) > 0 && s.events[0].at == t {
			if s.handle(s.events.pop()) {
				s.last = t
			}
		}
		for s.next < len(s.jobs) && s.jobs[s.next].submit == t {
			s.arrive(&s.jobs[s.next])
			s.next++
			s.last = t
		}
		// Reconciling may touch clusters again (an evicted node removed
		// frees cores for a cluster that waits for quota): repeat until
		// none is left, in cluster order.
		for len(s.dirty) > 0 {
			batch := s.dirty
			s.dirty = s.spare[:0]
			slices.SortFunc(batch, func(a, b *cluster) int { return a.idx - b.idx })
			for _, c := range batch {
				c.dirty = false
				if err := s.reconcile(c); err != nil {
					return fmt.Errorf("cluster %s at %v: %w", c.name, t, err)
				}
			}
			s.spare = batch[:0]
		}
		s.reshare()
		s.record()
	}
	// The run ends with the last event that changed anything (stale ones,
	// such as the end of an attempt cut by eviction, do not count).
	s.account(s.last)
	s.now = s.last
	for _, c := range s.clusters {
		for _, n := range c.nodes {
			s.count(n)
		}
	}
	return nil
}

// nextTime is the time of the next event or arrival.
func (s *sim) nextTime() (time.Duration, bool) {
	switch {
	case len(s.events) > 0 && s.next < len(s.jobs):
		return min(s.events[0].at, s.jobs[s.next].submit), true
	case len(s.events) > 0:
		return s.events[0].at, true
	case s.next < len(s.jobs):
		return s.jobs[s.next].submit, true
	}
	return 0, false
}

func (s *sim) touch(c *cluster) {
	if !c.dirty {
		c.dirty = true
		s.dirty = append(s.dirty, c)
	}
}

func (s *sim) record() {
	if !s.cfg.Timeline {
		return
	}
	p := Point{T: s.now.Seconds(), Nodes: s.nodesNow, Demand: s.demand}
	if k := len(s.timeline); k > 0 {
		last := &s.timeline[k-1]
		if last.Nodes == p.Nodes && last.Demand == p.Demand {
			return
		}
		if last.T == p.T {
			*last = p
			return
		}
	}
	s.timeline = append(s.timeline, p)
}

func (s *sim) arrive(j *job) {
	c := j.cl
	c.m.Jobs++
	if j.team != nil {
		j.team.jobs++
	}
	if j.nodes > s.cfg.Max {
		j.state = jobRejected
		c.m.Rejected++
		return
	}
	s.demand += j.nodes
	if c.demand != nil {
		c.demand.Arrive(at(s.now), j.nodes, c.idleFor())
	}
	s.enqueue(j)
}

// enqueue puts j in its queue in submission order.
func (s *sim) enqueue(j *job) {
	c := j.cl
	j.state, j.enqueued = jobQueued, s.now
	gq := c.queueOf(j)
	q := gq.jobs
	if n := len(q); n == gq.head || q[n-1].seq < j.seq {
		gq.jobs = append(q, j)
	} else {
		i, _ := slices.BinarySearchFunc(q[gq.head:], j.seq, func(x *job, seq int64) int { return int(x.seq - seq) })
		gq.jobs = slices.Insert(q, gq.head+i, j)
	}
	if j.team != nil {
		j.team.need += j.nodes
	}
	s.touch(c)
}

// queueOf is the queue j waits in: its group's.
func (c *cluster) queueOf(j *job) *queue {
	q := c.byGroup[j.group]
	if q == nil {
		q = &queue{group: j.group}
		c.byGroup[j.group] = q
		c.queues = append(c.queues, q)
	}
	return q
}

// dequeue takes j, the head of its queue, out of it to run.
func (c *cluster) dequeue(j *job) error {
	q := c.queueOf(j)
	if q.head >= len(q.jobs) || q.jobs[q.head] != j {
		return fmt.Errorf("job %s is assigned, but it is not the next of its queue", j.id)
	}
	q.head++
	if q.head > 1024 && q.head > len(q.jobs)/2 {
		q.jobs = append(q.jobs[:0], q.jobs[q.head:]...)
		q.head = 0
	}
	if j.team != nil {
		j.team.need -= j.nodes
	}
	return nil
}

// hold counts n more nodes (fewer when negative) held by j's group and
// team; under fair share the group's usage changes from now on.
func (s *sim) hold(j *job, n int) {
	c := j.cl
	if j.team != nil {
		j.team.held += n
	}
	if !s.cfg.fair() {
		return
	}
	c.held[j.group] += n
	c.usage[j.group] = c.usage[j.group].Advance(at(s.now), s.cfg.HalfLife, c.held[j.group])
}

// account counts the teams' received and entitled node time up to t.
func (s *sim) account(t time.Duration) {
	dt := (t - s.accounted).Seconds()
	s.accounted = t
	if dt <= 0 {
		return
	}
	for _, tm := range s.teams {
		tm.received += float64(tm.held) * dt
		tm.entitled += tm.share * dt
	}
}

// reshare sets each team's share of maxNodeCount for what it wants now.
func (s *sim) reshare() {
	if len(s.teams) == 0 {
		return
	}
	demands := make([]int, len(s.teams))
	weights := make([]float64, len(s.teams))
	for i, tm := range s.teams {
		demands[i], weights[i] = tm.held+tm.need, tm.weight
	}
	for i, share := range decide.MaxMinShares(s.cfg.Max, demands, weights) {
		s.teams[i].share = share
	}
}

// count adds n's node time since it was last counted to its cluster.
func (s *sim) count(n *node) {
	d := (s.now - n.since).Seconds()
	n.since = s.now
	u := &n.cl.use
	switch {
	case n.evicted:
	case n.job != nil:
		u.busy += d
	case n.state == decide.NodePreparing:
		u.prep += d
	default:
		u.idle += d
	}
}

// handle applies an event; it reports false for a stale one.
func (s *sim) handle(e event) bool {
	switch e.kind {
	case evDeleted:
		s.quotaAdd(-1)
		s.freeQuota()
	case evEnd:
		j := e.job
		if j.state != jobRunning || e.gen != j.attempt {
			return false // an attempt cut by eviction
		}
		j.state = jobDone
		c := j.cl
		c.m.Completed++
		if j.cold {
			c.m.ColdStarts++
		}
		c.delays = append(c.delays, j.waited.Seconds())
		if j.team != nil {
			j.team.completed++
			j.team.delays = append(j.team.delays, j.waited.Seconds())
		}
		s.demand -= j.nodes
		s.release(j)
		s.touch(c)
	case evEvict:
		return s.evict(e.node)
	case evReady:
		n := e.node
		if n.pos < 0 || n.state != decide.NodePreparing {
			return false // removed while it was being created
		}
		s.count(n)
		n.state, n.idleSince = decide.NodeIdle, s.now
		c := n.cl
		if c.demand != nil {
			c.demand.Ready(at(s.now), s.now-n.created)
		}
		if s.cfg.LowPriority {
			if d := s.prov.EvictAfter(n.ref()); d >= 0 {
				s.push(event{at: s.now + d, kind: evEvict, node: n})
			}
		}
		s.touch(c)
	case evWake:
		if e.gen != e.cl.wakeGen {
			return false // a later plan moved it
		}
		s.touch(e.cl)
	}
	return true
}

// release frees the nodes of a job that stopped: running nodes become idle.
func (s *sim) release(j *job) {
	c := j.cl
	last := len(c.running) - 1
	c.running[j.running] = c.running[last]
	c.running[j.running].running = j.running
	c.running = c.running[:last]
	s.hold(j, -j.nodes)
	freed := 0
	for _, n := range j.on {
		if n.job != j {
			continue
		}
		s.count(n)
		n.job = nil
		if n.state == decide.NodeRunning {
			n.state, n.idleSince = decide.NodeIdle, s.now
			freed++
		}
	}
	j.on = nil
	if freed > 0 && c.demand != nil {
		c.demand.Release(at(s.now), freed)
	}
}

// reclaim stops running job j for another, as the queue policy decided:
// its attempt's work is lost (checkpoints are not modelled), its nodes are
// idle at once (nor is the grace period), and it waits again in its place.
func (s *sim) reclaim(j *job) error {
	if j.state != jobRunning {
		return fmt.Errorf("plan preempts job %s, which does not run", j.id)
	}
	c := j.cl
	lost := float64(j.nodes) * (s.now - j.started).Seconds()
	c.use.lost += lost
	c.m.Preemptions++
	if j.team != nil {
		j.team.preempted++
		j.team.lost += lost
	}
	s.release(j)
	s.enqueue(j)
	return nil
}

// evict takes a low-priority node back: its job (every rank) is queued
// again, or fails after MaxPreemptions; the node is preempted and no longer
// billed, and the next plan removes it.
func (s *sim) evict(n *node) bool {
	if n.pos < 0 || n.evicted || (n.state != decide.NodeIdle && n.state != decide.NodeRunning) {
		return false // gone already
	}
	c := n.cl
	s.count(n)
	c.m.Evictions++
	j := n.job
	n.state, n.job, n.evicted = decide.NodePreempted, nil, true
	if j != nil {
		c.use.lost += float64(j.nodes) * (s.now - j.started).Seconds()
		s.release(j) // its other nodes are idle again
		j.preempts++
		if s.cfg.MaxPreemptions > 0 && j.preempts >= s.cfg.MaxPreemptions {
			j.state = jobFailed
			c.m.Failed++
			s.demand -= j.nodes
		} else {
			s.enqueue(j)
		}
	}
	s.touch(c)
	return true
}

func (s *sim) freeQuota() {
	for _, c := range s.clusters {
		if c.quotaCut {
			s.touch(c)
		}
	}
}

// reconcile runs one decision for a cluster and applies it.
func (s *sim) reconcile(c *cluster) error {
	snap := decide.ForCompute(s.comp, at(s.now))
	snap.ID, snap.Nodes, snap.Queued, snap.Running = c.name, s.nodeBuf[:0], s.jobBuf[:0], s.runBuf[:0]
	for _, n := range c.nodes {
		dn := decide.Node{ID: n.id, State: n.state, IdleSince: at(n.idleSince), Created: at(n.created)}
		if n.job != nil {
			dn.JobID = n.job.id
		}
		snap.Nodes = append(snap.Nodes, dn)
	}
	for _, q := range c.queues {
		need := 0
		for _, j := range q.jobs[q.head:] {
			snap.Queued = append(snap.Queued, decide.Job{ID: j.id, InstanceCount: j.nodes, Seq: j.seq, Group: j.group})
			if need += j.nodes; need > snap.Max {
				break // the rest of the queue cannot change the plan
			}
		}
	}
	if snap.Queue.FairShare || snap.Queue.Preemption != api.PreemptNone {
		for _, j := range c.running {
			snap.Running = append(snap.Running, decide.Running{ID: j.id, Group: j.group, Seq: j.seq, Started: at(j.started)})
		}
		snap.Usage = c.usage
	}
	if s.quotaOn {
		snap.Headroom, _ = quota.Headroom(s.limits, s.usage, s.size.Name, s.cfg.LowPriority)
	}
	if c.demand != nil {
		// The policy reads the history as it is; it does its work only
		// when the decision asks about an idle node.
		snap.IdlePolicy = c.demand.Policy(s.cfg.IdleTimeout, s.cfg.Adaptive)
	}
	p := decide.Decide(snap, at(s.now))
	s.nodeBuf, s.jobBuf, s.runBuf = snap.Nodes[:0], snap.Queued[:0], snap.Running[:0]
	// Before the plan is applied: removing an evicted node frees its cores
	// at once, and a cluster that quota holds back (this one included)
	// gets another decision.
	c.quotaCut = p.QuotaShort > 0
	_, err := actuate.Apply(context.Background(), &c.act, p)
	return err
}

// idleFor is how many idle nodes a job arriving now finds free: the
// cluster's idle nodes less those the jobs already waiting will take.
func (c *cluster) idleFor() int {
	k := 0
	for _, n := range c.nodes {
		if n.state == decide.NodeIdle {
			k++
		}
	}
	for _, q := range c.queues {
		for _, j := range q.jobs[q.head:] {
			if k <= 0 {
				return 0
			}
			k -= j.nodes
		}
	}
	return max(k, 0)
}

func (n *node) ref() NodeRef {
	return NodeRef{Cluster: n.cl.name, K: n.k, Requested: n.created, Nth: n.nth}
}

func (s *sim) quotaAdd(n int) {
	if s.quotaOn {
		s.usage.Add(s.size.Name, s.cfg.LowPriority, n)
	}
}

// wake schedules the cluster's next decision at the plan's WakeAt.
func (s *sim) wake(c *cluster, w time.Time) error {
	if w.IsZero() {
		if c.wakeAt != 0 {
			c.wakeAt = 0
			c.wakeGen++
		}
		return nil
	}
	d := w.Sub(Epoch)
	if d <= s.now {
		return fmt.Errorf("plan asks to be woken at %v, not after now", d)
	}
	if d != c.wakeAt {
		c.wakeAt = d
		c.wakeGen++
		s.push(event{at: d, kind: evWake, gen: c.wakeGen, cl: c})
	}
	return nil
}

func (s *sim) result() *Result {
	price := s.size.HourlyPrice(s.cfg.LowPriority)
	r := &Result{Label: s.cfg.Label, Settings: s.cfg.Settings(), Price: price, Timeline: s.timeline}
	r.Total.Cluster = "all"
	var all []float64
	for _, c := range s.clusters {
		m := c.m
		u := c.use
		m.BusyNodeHours = u.busy / 3600
		m.IdleNodeHours = u.idle / 3600
		m.ProvisioningNodeHours = u.prep / 3600
		m.DeletingNodeHours = u.deleting / 3600
		m.LostNodeHours = u.lost / 3600
		m.BilledNodeHours = (u.busy + u.idle + u.prep + u.deleting) / 3600
		m.Cost = m.BilledNodeHours * price
		m.utilization()
		m.Hours = s.last.Hours()
		all = append(all, c.delays...)
		m.QueueDelay = summarize(c.delays)
		r.Total.add(m)
		r.Clusters = append(r.Clusters, m)
	}
	r.Total.QueueDelay = summarize(all)
	r.Total.PeakNodes = s.peak
	r.Total.Hours = s.last.Hours()
	r.Total.utilization()
	s.groups(r)
	return r
}

// groups fills the teams' figures and their fairness into r.
func (s *sim) groups(r *Result) {
	if len(s.teams) == 0 {
		return
	}
	unit, per := "node", 1.0
	if s.size.GPUs > 0 {
		unit, per = "GPU", float64(s.size.GPUs)
	}
	r.Unit = unit
	var ratios []float64
	for _, tm := range s.teams {
		g := GroupMetrics{Name: tm.name, Weight: tm.weight, Jobs: tm.jobs, Completed: tm.completed,
			ReceivedHours: tm.received / 3600 * per, EntitledHours: tm.entitled / 3600 * per,
			QueueDelay: summarize(tm.delays), Preempted: tm.preempted, LostHours: tm.lost / 3600 * per}
		if g.EntitledHours > 0 {
			g.Ratio = g.ReceivedHours / g.EntitledHours
			ratios = append(ratios, g.Ratio)
		}
		r.Groups = append(r.Groups, g)
	}
	r.Fairness = &Fairness{Jain: jain(ratios)}
}
