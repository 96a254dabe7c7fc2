package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/actuate"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/decide"
	"github.com/cumulus-ml/cumulus/internal/fairshare"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/metrics"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/quota"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Defaults of the cluster controller's timeouts.
const (
	// DefaultHeartbeatTimeout marks a node unusable that has not been heard
	// from for that long.
	DefaultHeartbeatTimeout = 60 * time.Second
	// DefaultProvisionTimeout gives up on a node that has not registered
	// that long after it was requested.
	DefaultProvisionTimeout = 15 * time.Minute
)

// Clusters is the cluster controller: each pass it reads every cluster,
// checks node health, asks decide.Decide what to do, and applies the plan
// with actuate.Apply, as the simulator does (passActuator: assignments in
// the store, node creation and deletion through the provider), writing
// intent to the store before calling the provider.
type Clusters struct {
	DB       *store.DB
	Clock    clock.Clock
	Log      *slog.Logger
	Provider provider.Provider
	Hub      *hub.Hub
	// Limits returns the quota limits of a subscription's location.
	Limits func(ctx context.Context, q store.Querier, sub, loc string) (quota.Limits, error)
	// NewJoinToken makes a node's one-time join token and its hash.
	NewJoinToken func(nodeID string) (token, hash string)
	// NewNodeID names a new node of a compute.
	NewNodeID func(compute string, now time.Time) string

	ServerURL        string
	CAFile           string
	HeartbeatTimeout time.Duration // default DefaultHeartbeatTimeout
	ProvisionTimeout time.Duration // default DefaultProvisionTimeout
	MaxAttempts      int           // default lifecycle.DefaultMaxAttempts
	MaxPreemptions   int           // default lifecycle.DefaultMaxPreemptions
	Resync           time.Duration // default 5 s
	// EvictionRate preempts low-priority nodes at random, this many times
	// per node-hour (chaos testing); 0 never. Rand draws in [0,1).
	EvictionRate float64
	Rand         func() float64
	// Metrics records passes, scaling and provisioning failures (nil:
	// nothing is recorded).
	Metrics *metrics.Metrics

	wake      chan struct{}
	mu        sync.Mutex
	firstSeen map[string]time.Time // when this process first saw each node
	failures  map[string]backoff   // provider failures per compute
	lastRoll  map[string]time.Time // last random-eviction roll per node
	gangCheck map[string]time.Time // last check of each compute's jobs for lost nodes (checkGangs)
	nodeCache *store.NodeCache     // decoded node documents between passes
	// idle is each adaptive compute's demand history, by compute key;
	// only the pass touches it.
	idle map[string]*idleTrack

	// GPUs, when set, are the devices of the one machine the provider's
	// nodes share (provider.Accelerators): each node of a GPU size gets
	// devices of its own, and a node that cannot get them waits. See
	// gpus.go.
	GPUs     *gpu.Machine
	gpuWants map[string]gpuWant // by compute id, under mu: what each waited for at its last decision
}

type backoff struct {
	n     int
	until time.Time
	msg   string
	// config: the provider refused the compute's configuration; the hold
	// ends early when the compute is updated after modified.
	config   bool
	modified time.Time
}

// maxBackoff is the longest a compute waits between provider failures,
// and what a configuration error waits at once.
const maxBackoff = 5 * time.Minute

// Init sets defaults; call before Run/Notify are used concurrently.
func (c *Clusters) Init() {
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ProvisionTimeout <= 0 {
		c.ProvisionTimeout = DefaultProvisionTimeout
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = lifecycle.DefaultMaxAttempts
	}
	if c.Resync <= 0 {
		c.Resync = 5 * time.Second
	}
	if c.MaxPreemptions <= 0 {
		c.MaxPreemptions = lifecycle.DefaultMaxPreemptions
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	c.lastRoll = map[string]time.Time{}
	c.gangCheck = map[string]time.Time{}
	c.firstSeen = map[string]time.Time{}
	c.failures = map[string]backoff{}
	c.nodeCache = store.NewNodeCache()
	c.idle = map[string]*idleTrack{}
	c.gpuWants = map[string]gpuWant{}
}

// Notify wakes the loop (non-blocking).
func (c *Clusters) Notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run loops until ctx ends: a pass on every event and at least every
// Resync, or earlier when a plan asks to be woken (an idle timeout).
func (c *Clusters) Run(ctx context.Context) {
	for {
		start := time.Now()
		wakeAt, err := c.RunOnce(ctx)
		took := time.Since(start)
		if err != nil && ctx.Err() == nil {
			c.Log.Error("cluster pass failed", "err", err)
		}
		wait := c.Resync
		if !wakeAt.IsZero() {
			if d := wakeAt.Sub(c.Clock.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-c.Clock.After(wait):
		}
		rest(ctx, min(took, maxRest)-time.Since(start.Add(took)))
	}
}

// maxRest bounds the loop's rest after a pass: a long pass (thousands of
// nodes registering, a first wave of placements) must not hold back the
// next one by as long.
const maxRest = 25 * time.Millisecond

// rest waits d (nothing when d ≤ 0) or until ctx ends. The loop rests
// after a pass as long as the pass took (at most maxRest), whatever woke
// it: under a stream of changes (submits, agents' reports) short passes
// take at most half of the time, and each acts on everything that arrived
// meanwhile, rather than one pass after another, each for a few changes,
// taking the CPU the API and the agents need. A change after a quiet
// spell is acted on at once. It is wall time, not the Clock: it shares
// out the machine.
func rest(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// clusterState is one compute as a pass sees it.
type clusterState struct {
	doc   store.Doc[api.Compute]
	sc    api.Scope
	nodes []store.Node
	scale scaleNow // the bounds in force (schedules)
}

// RunOnce makes one pass over every cluster and returns when the next pass
// is due at the latest.
func (c *Clusters) RunOnce(ctx context.Context) (time.Time, error) {
	start := time.Now() // the pass's own duration: wall time, whatever the clock
	defer func() { c.Metrics.Pass(time.Since(start)) }()
	now := c.Clock.Now().UTC()
	docs, err := store.List[api.Compute](ctx, c.DB.Q(), store.KindCompute, "/subscriptions", false, "", 1<<30)
	if err != nil {
		return time.Time{}, err
	}
	states := make([]clusterState, 0, len(docs))
	usage := map[string]*quota.Usage{} // by subscription/location
	for _, d := range docs {
		sc, _, err := api.ParseComputeID(d.Value.ID, api.Scope{})
		if err != nil {
			return time.Time{}, err
		}
		nodes, err := store.NodesOfCached(ctx, c.DB.Q(), d.Value.ID, c.nodeCache)
		if err != nil {
			return time.Time{}, err
		}
		states = append(states, clusterState{doc: d, sc: sc, nodes: nodes})
		u := usageFor(usage, sc.Subscription, d.Value.Properties.ComputeLocation)
		for _, n := range nodes {
			u.Add(n.VMSize, n.Priority == api.PriorityLowPriority, 1)
		}
	}
	c.dropIdleHistories(docs)
	c.forgetGPUWants(docs)
	pool := c.gpuPool(states)
	gpuWaiting := false // a cluster before this one waits for devices
	var wakeAt time.Time
	var errs []error
	// Quota is shared by the clusters of a location: cores that a cluster
	// frees count for the clusters after it in this pass (usage is kept up
	// to date), and a cluster before it that waited for quota gets another
	// pass at once.
	waiting := map[string]bool{} // locations where a cluster waited for quota
	for _, st := range states {
		if st.doc.Value.Properties.ProvisioningState != api.StateSucceeded {
			continue
		}
		loc := usageKey(st.sc.Subscription, st.doc.Value.Properties.ComputeLocation)
		out, err := c.reconcileCluster(ctx, st, usageFor(usage, st.sc.Subscription, st.doc.Value.Properties.ComputeLocation), pool, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("compute %s: %w", st.doc.Value.Name, err))
		}
		wakeAt = earliest(wakeAt, out.wakeAt)
		if out.freed && (waiting[loc] || gpuWaiting) {
			wakeAt = now // a cluster before this one may grow into what it freed
		}
		gpuWaiting = gpuWaiting || out.gpuWaits
		if out.quotaBound {
			waiting[loc] = true
		}
	}
	return wakeAt, errors.Join(errs...)
}

func usageKey(sub, loc string) string { return strings.ToLower(sub + "/" + loc) }

func usageFor(m map[string]*quota.Usage, sub, loc string) *quota.Usage {
	k := usageKey(sub, loc)
	if m[k] == nil {
		m[k] = &quota.Usage{Family: map[string]int64{}}
	}
	return m[k]
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// outcome is what one cluster's reconciliation tells the pass.
type outcome struct {
	wakeAt     time.Time // when this cluster needs a pass at the latest; zero if never
	freed      bool      // nodes were deleted: their cores are free for other clusters
	quotaBound bool      // quota kept the cluster from its target
	gpuWaits   bool      // the machine's free devices kept the cluster from its target
}

func (c *Clusters) reconcileCluster(ctx context.Context, st clusterState, u *quota.Usage, pool *gpu.Pool, now time.Time) (outcome, error) {
	var out outcome
	comp := st.doc.Value
	wakeAt, lost, err := c.checkHealth(ctx, st.nodes, now)
	out.wakeAt = wakeAt
	if err != nil {
		return out, err
	}
	w, evicted, err := c.checkEvictions(ctx, comp, st.nodes, now)
	out.wakeAt = earliest(out.wakeAt, w)
	if err != nil {
		return out, err
	}
	if lost || evicted {
		if err = c.reload(ctx, &st); err != nil {
			return out, err
		}
	}
	broken, err := c.checkGangsDue(ctx, comp.ID, st.nodes, now)
	if err != nil {
		return out, err
	}
	if broken {
		if err = c.reload(ctx, &st); err != nil {
			return out, err
		}
	}
	c.retryIfUpdated(comp)
	// Only the head of the queue can matter this pass: each job needs at
	// least one node and the cluster has at most maxNodeCount, so the
	// first max+1 jobs decide what starts, what is created and whether the
	// cluster is blocked at its maximum.
	// The bounds are those a schedule puts in force, if any; the pass
	// runs again when the next entry fires.
	// Under fair share any group's head may come first: the head of
	// each group's queue, with the running jobs and the groups' usage,
	// whose records change only when a group's holding did.
	st.scale = scaleOf(comp, now)
	queue, err := fairshare.Read(ctx, c.DB.Q(), comp, st.nodes, st.scale.max+1, now)
	if err != nil {
		return out, err
	}
	if err := queue.Save(ctx, c.DB); err != nil {
		return out, err
	}
	queued := queue.Queued
	budgets, err := budgetHolds(ctx, c.DB.Q(), comp)
	if err != nil {
		return out, err
	}
	snap, qv := c.snapshot(ctx, st, queue, u, budgets, now)
	snap.GPUs = c.gpuSupply(pool, comp)
	plan := decide.Decide(snap, now)
	out.wakeAt = earliest(out.wakeAt, plan.WakeAt)

	act := &passActuator{c: c, st: st, queued: queued, qv: qv, u: u, now: now, pool: pool}
	done, err := actuate.Apply(ctx, act, plan)
	out.freed = done.Removed > 0
	out.quotaBound = act.quotaBound
	out.gpuWaits = c.noteGPUWant(comp, snap.GPUs, plan)
	if done.CreateErr != nil {
		// Recorded on the compute and backed off; not a failure of the pass.
		c.Log.Warn("node creation failed", "compute", comp.Name, "err", done.CreateErr)
	}
	if b, ok := c.backoffOf(comp.ID); ok && now.Before(b.until) {
		out.wakeAt = earliest(out.wakeAt, b.until)
	}
	return out, err
}

// reload re-reads the nodes after the health pass changed some.
func (c *Clusters) reload(ctx context.Context, st *clusterState) error {
	nodes, err := store.NodesOfCached(ctx, c.DB.Q(), st.doc.Value.ID, c.nodeCache)
	st.nodes = nodes
	return err
}

// snapshot turns stored state into the decision's input: the compute's
// view at now (decide.ForCompute: the bounds in force, the queue policy),
// its nodes and the head of its queue as they are, the jobs that hold its
// nodes and its groups' usage (for the queue policy), and what holds its
// growth (quota, the provider's backoff, budgets). The rules that read
// them are decide's. It also says what quota alone allowed.
func (c *Clusters) snapshot(ctx context.Context, st clusterState, queue *fairshare.State, u *quota.Usage, budgets []api.BudgetHold, now time.Time) (decide.Cluster, quotaView) {
	comp := st.doc.Value
	snap := queue.Cluster(comp, st.nodes, c.imageBound(), now)
	snap.IdlePolicy = c.idlePolicy(ctx, comp, st.nodes)
	qv := quotaView{location: comp.Properties.ComputeLocation, headroom: -1}
	if c.Limits != nil {
		if l, err := c.Limits(ctx, c.DB.Q(), st.sc.Subscription, comp.Properties.ComputeLocation); err == nil {
			qv.limits, qv.known = l, true
			qv.headroom, _ = quota.Headroom(l, *u, comp.Aml().VMSize, comp.Aml().VMPriority == api.PriorityLowPriority)
			snap.Headroom = qv.headroom
		} else {
			// Never past quota: with the limits unknown, no new nodes
			// this pass.
			snap.Headroom = 0
			c.Log.Error("quota limits", "compute", comp.Name, "err", err)
		}
	}
	if b, ok := c.backoffOf(comp.ID); ok {
		snap.Backoff = decide.Backoff{Until: b.until, Message: b.msg}
	}
	snap.Budgets = budgets
	return snap, qv
}

// assignAll writes a pass's assignments in one transaction; one that the
// world has overtaken (a job canceled, a node gone) is skipped, not fatal.
// The nodes' held polls are woken once it is committed.
func (c *Clusters) assignAll(ctx context.Context, as []decide.Assignment, now time.Time) error {
	if len(as) == 0 {
		return nil
	}
	var woken []string
	err := c.DB.Tx(ctx, func(q store.Querier) error {
		woken = woken[:0]
		for _, a := range as {
			_, err := lifecycle.Assign(ctx, q, a.JobID, a.NodeIDs, now)
			if errors.Is(err, lifecycle.ErrStale) || errors.Is(err, store.ErrNotFound) { // found before anything was written
				continue // the next pass decides again
			}
			if err != nil {
				return fmt.Errorf("assign job %s: %w", a.JobID, err)
			}
			woken = append(woken, a.NodeIDs...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.Hub.WakeAll(woken)
	return nil
}

func (c *Clusters) drain(ctx context.Context, id string) error {
	return c.DB.Tx(ctx, func(q store.Querier) error {
		n, err := store.GetNode(ctx, q, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil || n.State == api.NodeLeaving {
			return err
		}
		n.State, n.Reason, n.Changed = api.NodeLeaving, "cluster shrinking (maxNodeCount lowered): removed when its job ends", c.Clock.Now().UTC()
		return store.PutNode(ctx, q, n)
	})
}

// remove deletes a node the plan gave up: it is marked leaving first
// (re-checked against the state the decision saw), then the provider
// deletes the machine, then the record goes. It returns the node when its
// record is gone, nil when the node was kept (or was already gone).
func (c *Clusters) remove(ctx context.Context, id string, seen []store.Node) (*store.Node, error) {
	var was store.Node
	for _, n := range seen {
		if n.ID == id {
			was = n
		}
	}
	proceed := false
	err := c.DB.Tx(ctx, func(q store.Querier) error {
		n, err := store.GetNode(ctx, q, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if n.JobID != "" || n.State != was.State || !n.IdleSince.Equal(was.IdleSince) {
			return nil // it got work (or changed) since the decision: keep it
		}
		proceed = true
		if n.State != api.NodeLeaving {
			n.State, n.Reason, n.Changed = api.NodeLeaving, scaleDownReason(n), c.Clock.Now().UTC()
			return store.PutNode(ctx, q, n)
		}
		return nil
	})
	if err != nil || !proceed {
		return nil, err
	}
	if err := c.deleteNode(ctx, was); err != nil {
		return nil, err
	}
	return &was, nil
}

// deleteNode asks the provider to delete a leaving node, then drops it.
func (c *Clusters) deleteNode(ctx context.Context, n store.Node) error {
	if n.Provider == c.Provider.Name() {
		if err := c.Provider.Delete(ctx, n.ID); err != nil {
			return fmt.Errorf("delete node %s: %w", n.ID, err)
		}
	}
	at := c.Clock.Now().UTC()
	if err := c.DB.Tx(ctx, func(q store.Querier) error { return store.DeleteNode(ctx, q, n.ID, at) }); err != nil {
		return err
	}
	c.Hub.Forget(n.ID)
	c.mu.Lock()
	delete(c.firstSeen, n.ID)
	c.mu.Unlock()
	c.Log.Info("node removed", "node", n.ID, "compute", n.Compute, "was", n.State)
	return nil
}

// create records count new nodes and asks the provider for them; it stops
// at the first provider failure and backs off exponentially.
func (c *Clusters) create(ctx context.Context, comp api.Compute, count int, images []string, pool *gpu.Pool, now time.Time) (int, error) {
	a := comp.Aml()
	size, ok := catalog.Lookup(a.VMSize)
	if !ok {
		return 0, fmt.Errorf("unknown vm size %s", a.VMSize)
	}
	made := 0
	for i := 0; i < count; i++ {
		id := c.NewNodeID(comp.Name, now)
		tok, hash := c.NewJoinToken(id)
		image := ""
		if i < len(images) {
			image = images[i]
		}
		n := store.Node{ID: id, Compute: comp.ID, State: api.NodePreparing, Priority: a.VMPriority, VMSize: size.Name,
			Provider: c.Provider.Name(), Created: now, JoinHash: hash, Image: image}
		devices, ok := takeGPUs(pool, size, n)
		if !ok {
			return made, fmt.Errorf("node of %s: %d GPUs are no longer free", size.Name, size.GPUs)
		}
		n.GPUDevices = gpu.IDs(devices)
		if err := c.DB.Tx(ctx, func(q store.Querier) error { return store.PutNode(ctx, q, n) }); err != nil { // with its event
			if pool != nil {
				pool.Release(id)
			}
			return made, err
		}
		made++
		spec := provider.NodeSpec{NodeID: id, ComputeID: comp.ID, VMSize: size.Name, VCPUs: size.VCPUs, MemoryGB: size.MemoryGB,
			GPUs: size.GPUs, Devices: devices, LowPriority: a.VMPriority == api.PriorityLowPriority, ServerURL: c.ServerURL, CAFile: c.CAFile, JoinToken: tok,
			GracePeriod: comp.PreemptionGrace() + ReportMargin, Kubernetes: a.Kubernetes, Slurm: a.Slurm, Image: image}
		if a.Subnet != nil {
			spec.Subnet = a.Subnet.ID
		}
		spec.NoPublicIP = a.EnableNodePublicIP != nil && !*a.EnableNodePublicIP
		pid, err := c.Provider.Create(ctx, spec)
		if err != nil {
			reason := c.createFailed(comp, err, now)
			lerr := c.DB.Tx(ctx, func(q store.Querier) error {
				return lifecycle.NodeLost(ctx, q, n, api.NodeUnusable, reason, c.MaxAttempts, now)
			})
			return made, errors.Join(errors.New(reason), lerr)
		}
		c.succeed(comp.ID)
		if err := c.DB.Tx(ctx, func(q store.Querier) error {
			cur, err := store.GetNode(ctx, q, id)
			if err != nil {
				return err
			}
			cur.ProviderID, cur.Allocated = pid, c.Clock.Now().UTC()
			return store.PutNode(ctx, q, cur)
		}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return made, err
		}
		c.Log.Info("node requested", "node", id, "compute", comp.Name, "size", size.Name, "provider_id", pid)
	}
	return made, nil
}

// imageBound reports whether the provider makes each node from its job's
// image.
func (c *Clusters) imageBound() bool {
	b, ok := c.Provider.(provider.ImageBound)
	return ok && b.ImageBound()
}

// ReportMargin is what a node's machine gets beyond the job's preemption
// grace when it is stopped: time for the agent to report and exit.
const ReportMargin = 10 * time.Second

// createFailed records the provider's refusal to create a node of comp,
// by its kind, and returns the reason the compute and the node show. A
// want of capacity, like any other failure, backs off exponentially (1 s,
// 2 s, … up to maxBackoff). A configuration error fails the same way
// until a setting changes: the compute waits maxBackoff at once, or less
// if it is updated meanwhile (retryIfUpdated), and shows the provider's
// words.
func (c *Clusters) createFailed(comp api.Compute, err error, now time.Time) string {
	name := c.Provider.Name()
	var reason, metric string
	switch {
	case provider.IsConfiguration(err):
		reason = fmt.Sprintf("provider %s cannot create the compute's nodes as configured: %v (tried again when the compute is updated, or in %s)", name, err, maxBackoff)
		metric = metrics.ReasonConfiguration
	case provider.IsInsufficientCapacity(err):
		reason = fmt.Sprintf("provider %s has no capacity for another node now: %v (tried again after a backoff)", name, err)
		metric = metrics.ReasonCapacity
	default:
		reason = fmt.Sprintf("provider %s could not create node: %v", name, err)
		metric = metrics.ReasonCreate
	}
	c.fail(comp.ID, reason, now)
	if provider.IsConfiguration(err) {
		c.mu.Lock()
		b := c.failures[comp.ID]
		b.until, b.config, b.modified = now.Add(maxBackoff), true, modifiedOn(comp)
		c.failures[comp.ID] = b
		c.mu.Unlock()
	}
	c.Metrics.ProvisionFailed(comp.ID, metric)
	return reason
}

// retryIfUpdated ends the hold of a configuration error once the compute
// was updated (PUT or PATCH) since: its new settings get a node at once.
func (c *Clusters) retryIfUpdated(comp api.Compute) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.failures[comp.ID]; ok && b.config && !modifiedOn(comp).Equal(b.modified) {
		delete(c.failures, comp.ID)
	}
}

// modifiedOn is when the compute's settings last changed (zero if never
// recorded); the controller's status writes leave it alone.
func modifiedOn(comp api.Compute) time.Time {
	if t := comp.Properties.ModifiedOn; t != nil {
		return *t
	}
	return time.Time{}
}

// fail backs a compute off after a provider failure: 1 s, doubling with
// each failure in a row, up to maxBackoff.
func (c *Clusters) fail(compute, msg string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.failures[compute]
	b.n++
	b.msg, b.config = msg, false
	b.until = now.Add(min(time.Second<<min(b.n-1, 16), maxBackoff))
	c.failures[compute] = b
}

func (c *Clusters) succeed(compute string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.failures, compute)
}

func (c *Clusters) backoffOf(compute string) (backoff, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.failures[compute]
	return b, ok
}

// recordStatus writes the read-only status a plan implies onto the compute
// (target, allocation transition time, errors) when it changed.
func (c *Clusters) recordStatus(ctx context.Context, st clusterState, plan decide.Plan, short *shortfall, now time.Time) error {
	// Counts from the index; only nodes with something to say are read.
	byState, err := store.NodeCounts(ctx, c.DB.Q(), st.doc.Value.ID)
	if err != nil {
		return err
	}
	troubled, err := store.NodesIn(ctx, c.DB.Q(), st.doc.Value.ID, api.NodePreparing, api.NodeUnusable)
	if err != nil {
		return err
	}
	counts, total := api.CountNodes(byState)
	state := api.AllocationStateOf(total, int32(plan.Target), counts)
	blocked := append(slices.Clone(plan.Blocked), queueBlocks(troubled)...)
	// Most passes change nothing: the compute as this pass read it says
	// so without a write transaction.
	if c.sameStatus(st.doc.Value, st.scale.active, plan, state, blocked, short, troubled) {
		return nil
	}
	return c.DB.Tx(ctx, func(q store.Querier) error {
		d, err := store.Get[api.Compute](ctx, q, store.KindCompute, st.sc.WorkspaceID(), st.doc.Value.Name)
		if err != nil {
			return err
		}
		comp := d.Value
		if c.sameStatus(comp, st.scale.active, plan, state, blocked, short, troubled) {
			return nil
		}
		a := comp.Aml()
		was := *a
		before := api.AllocationStateOf(int32(len(st.nodes)), a.TargetNodeCount, counts)
		a.ActiveSchedule = st.scale.active // the reasons word the entry in force now
		errs := c.statusErrors(&comp, plan, blocked, short, troubled)
		events := append(scheduleEvents(comp.ID, was.ActiveSchedule, st.scale, now),
			statusEvents(comp.ID, &was, state, plan.Target, int(total), errs, now)...)
		if state != a.AllocationState || before != state {
			a.AllocationStateTransitionTime = &now
		}
		a.TargetNodeCount, a.AllocationState, a.Errors, a.Blocked = int32(plan.Target), state, errs, blocked
		_, err = store.Put(ctx, q, store.KindCompute, st.sc.WorkspaceID(), comp.Name, comp, d.Version, now)
		if errors.Is(err, store.ErrETagMismatch) {
			return nil // the user changed it meanwhile; the next pass writes again
		}
		if err != nil {
			return err
		}
		for _, e := range events {
			if err := store.AddEvent(ctx, q, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// sameStatus reports whether comp already has the status the plan
// implies: its target, allocation state (state), errors, schedule in
// force (active) and blocks.
func (c *Clusters) sameStatus(comp api.Compute, active *api.ActiveSchedule, plan decide.Plan, state string, blocked api.Blocks, short *shortfall, troubled []store.Node) bool {
	a := *comp.Aml() // a copy: the properties are shared with whoever read comp
	if int32(plan.Target) != a.TargetNodeCount || state != a.AllocationState || !sameActive(active, a.ActiveSchedule) || !reflect.DeepEqual(blocked, a.Blocked) {
		return false
	}
	a.ActiveSchedule = active // the reasons word the entry in force now
	comp.Properties.Properties = &a
	return sameErrors(c.statusErrors(&comp, plan, blocked, short, troubled), a.Errors)
}

// statusErrors explains why a cluster is not where its jobs want it, in
// the words Azure's clients read. A quota shortfall gets its own
// QuotaExceeded entry and the provider's failures NodeProvisioningFailed;
// ScaleUpBlocked words the other reasons: the plan's, and the provider's
// scheduler's for nodes that wait in its queue.
func (c *Clusters) statusErrors(comp *api.Compute, plan decide.Plan, blocked api.Blocks, short *shortfall, nodes []store.Node) []api.ErrorResponse {
	var out []api.ErrorResponse
	if b, ok := c.backoffOf(comp.ID); ok {
		out = append(out, api.ErrorResponse{Error: &api.Error{Code: api.CodeNodeProvisioningFailed, Message: b.msg}})
	}
	if blocked := blocked.Without(api.BlockQuota, api.BlockBackoff, api.BlockShare); len(blocked) > 0 {
		out = append(out, api.ErrorResponse{Error: &api.Error{Code: api.CodeScaleUpBlocked, Message: "queued jobs wait: " + blocked.ForCompute(comp)}})
	}
	if short != nil {
		out = append(out, api.ErrorResponse{Error: &api.Error{Code: api.CodeQuotaExceeded, Message: quotaError(plan, *short)}})
	}
	for _, n := range nodes {
		if n.State == api.NodePreparing && n.Reason != "" {
			out = append(out, api.ErrorResponse{Error: &api.Error{Code: api.CodeNodeNotReady, Message: n.ID + ": " + n.Reason}})
		}
		if n.State == api.NodeUnusable && n.Reason != "" {
			out = append(out, api.ErrorResponse{Error: &api.Error{Code: api.CodeNodeUnusable, Message: n.ID + ": " + n.Reason}})
		}
	}
	return out
}

func sameErrors(a, b []api.ErrorResponse) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i].Error, b[i].Error
		if (x == nil) != (y == nil) || (x != nil && (x.Code != y.Code || x.Message != y.Message)) {
			return false
		}
	}
	return true
}

// scaleDownReason says why the plan removes a node, for its history.
func scaleDownReason(n store.Node) string {
	switch {
	case n.State == api.NodeIdle || n.State == api.NodePreparing:
		return "scaled down: no queued job needs it"
	case n.Reason != "":
		return "was " + n.State + ": " + n.Reason
	}
	return "was " + n.State
}
