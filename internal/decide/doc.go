// Package decide holds the scheduling and autoscaling policy of a Cumulus
// compute cluster as pure functions: a snapshot of one cluster and the time
// go in, a Plan comes out. Nothing here does I/O, starts goroutines or reads
// the clock, so the server, the simulator and the tests run the same code.
//
// # Node states
//
// Nodes carry Azure's states. A node is live when its state is preparing,
// idle or running (or any state this package does not know, which it treats
// as busy). Nodes that are leaving, preempted or unusable are on their way out
// and count toward no capacity. A node is:
//
//   - idle (usable by the scheduler) when its state is idle, it has no job
//     and nobody is logged in to it (SSHOpen: such a node is busy, neither
//     given work nor scaled down);
//   - preparing when its state is preparing and it has no job, or when it is
//     running a job that is back in the queue (another of its nodes was
//     lost, or it was preempted): it is idle once its agent has stopped the
//     old attempt, so it is capacity on its way and no node is created for it;
//   - busy otherwise: running, or holding a job whatever its state.
//
// # Scheduling (Schedule)
//
//   - The queue is ordered by Priority, highest first, then by Seq (FIFO),
//     then by job ID so that the order is total. Under fair share
//     (Cluster.Queue) the order is fair share's instead (fairshare.go);
//     every rule below holds over it.
//   - A job needs InstanceCount idle nodes at the same time (a count below 1
//     counts as 1). It is placed whole or not at all, one job per node.
//   - A job that needs more than maxNodeCount nodes can never run: it is
//     skipped and reserves nothing (the API rejects such jobs at submit time).
//   - Head-of-line with safe backfill: a job that does not fit reserves the
//     idle nodes it would need; later jobs may use only idle nodes beyond
//     those reserved (backfill never delays an earlier job). Nodes are
//     interchangeable, so a job that does not fit needs more nodes than are
//     free and reserves all of them: in practice nothing behind it starts
//     until it does.
//   - Idle nodes are taken most recently idle first (IdleSince descending,
//     then node ID). Packing work onto the warmest nodes lets the others reach
//     their idle timeout, so a lightly loaded cluster shrinks instead of
//     rotating jobs over every node and keeping them all alive; it is also
//     the mirror of scale-down, which removes the longest idle first.
//   - When maxNodeCount has been lowered to or below the number of busy
//     nodes, no job starts: idle nodes are capped at maxNodeCount minus the
//     busy nodes, so the scheduler never starts work on a node that the
//     autoscaler must remove or drain in the same pass.
//
// # Autoscaling (Autoscale)
//
// Autoscale looks at the cluster as it is after assignments (Decide applies
// them first).
//
//   - Demand is the sum of InstanceCount over queued jobs that can ever run
//     (InstanceCount <= maxNodeCount).
//   - The wanted size is clamp(busy + demand, minNodeCount, maxNodeCount).
//     Preparing nodes are capacity on its way: Create is wanted minus live
//     nodes, never negative, and at most Headroom when Headroom >= 0.
//   - Unusable and preempted nodes are always removed, even when they still
//     name a job (the controller requeues or fails that job); leaving nodes
//     are removed once their job is gone. None of them counts as live, so
//     they are replaced if demand remains.
//   - Over maxNodeCount (it was lowered): remove idle nodes first, longest
//     idle first and whether or not their timer has run out; then preparing
//     nodes, newest first; then mark busy nodes Drain, newest first, until
//     the live nodes left number maxNodeCount. A node with a job is never
//     removed; a drained node is removed when its job ends.
//   - Devices (Cluster.GPUs, set for a GPU size whose nodes share one
//     machine's devices with other clusters): after quota's cut, Create is
//     at most Free/PerNode; GPUShort is the nodes cut, Blocked holds the
//     reason (BlockGPUs: the devices a node needs, the free and total
//     counts, who holds the others — "needs 2 GPUs; 1 of 4 free: 3 held
//     by nodes of gpu-a"), and GPUWait names the queued jobs that wait for
//     those nodes as QuotaWait does for quota (the jobs past them wait for
//     quota). Nothing is created half: a node holds all its devices or is
//     not created.
//   - Early release: when nodes of other clusters wait for Wanted devices,
//     idle nodes that idle scale-down could take (above the floor, not
//     needed by this cluster's own queue) go now, longest idle first,
//     whatever their idle time, until they free Wanted devices (a node's
//     own expired timer counts toward that).
//   - Idle scale-down: an idle node whose IdleSince+IdleTimeout is not after
//     now is removable (with Cluster.IdlePolicy set, the policy's
//     RemovableAt replaces IdleSince+IdleTimeout; see IdlePolicy).
//     Removable nodes go, longest idle first, while the live nodes left
//     exceed max(minNodeCount, wanted). Idle nodes that the
//     queue would use are never removed for idleness: the min(idle, demand)
//     most recently idle nodes are kept, which covers idle nodes reserved by
//     a gang job that waits while the cluster grows for it.
//   - Target is where the cluster is heading: live nodes + Create - removed
//     live nodes - drained nodes. It never exceeds maxNodeCount, and idle
//     scale-down never takes it below minNodeCount.
//   - WakeAt is the earliest IdleSince+IdleTimeout of an idle node kept now
//     that would be removed at that time if nothing else happened (nodes
//     above the floor only); zero when there is none. Between now and WakeAt
//     the same snapshot gives the same Plan.
//   - Remove lists the exiting nodes first (by ID), then live nodes in the
//     order they were chosen; Drain is newest first.
//   - Blocked says why demand is not met, as values (api.Block) that the API,
//     the CLI and the studio word: a job that needs more than maxNodeCount
//     (BlockTooBig), busy + demand above the maximum (BlockAtMax, naming the
//     schedule entry that set it, MaxSetBy), Create cut by Headroom
//     (BlockQuota), Create cut by the machine's free devices (BlockGPUs).
//   - When Headroom cuts Create, QuotaShort is the number of nodes cut and
//     QuotaWait names the queued jobs that wait for quota, in queue order:
//     the nodes that are ready after the plan (live and not busy, new ones
//     included) serve the queue in order; a job that would fit within
//     maxNodeCount beside the busy nodes but lies past the ready nodes
//     waits for quota, for the nodes beyond them (Wait.Nodes). Jobs from
//     the first one past maxNodeCount on wait for maxNodeCount, not quota.
//
// # Deciding (Decide)
//
// Decide runs Schedule, applies its assignments to a copy of the snapshot
// (assigned nodes become running with their job, assigned jobs leave the
// queue) and runs Autoscale on that copy. Because assignment comes first, a
// node whose idle timer runs out in the very pass that gives it a job is kept:
// the idle-boundary race cannot delete a node under a job. Then the holds on
// growth that are not the cluster's own size apply:
//
//   - A provider backing off after failures (Backoff, until Until): no node
//     is created (Target drops by as many), Blocked gains BlockBackoff, and
//     the plan wakes when the backoff ends.
//   - Budgets whose action is in force (Budgets): no node is created; when a
//     job that did not start waits, Blocked is the budgets (BlockBudget) and
//     quota's shortfall is dropped (quota is not what holds the queue); with
//     a scale-to-minimum budget, idle nodes above minNodeCount go now.
//   - A schedule's next change of the bounds (BoundsChange) wakes the plan.
//   - The queue policy (Cluster.Queue, fairshare.go): preemptions
//     (Plan.Preempt) and, under fair share, where each waiting group
//     stands (BlockShare).
//
// ForCompute gives the snapshot of a compute as the API stores it (the
// bounds its schedules put in force at now); the controller and the
// simulator both start from it.
//
// Inputs are never modified. Node and job IDs are expected to be unique. For
// bad bounds the maximum wins: a negative maxNodeCount counts as 0 and a
// minNodeCount above maxNodeCount counts as maxNodeCount; a negative
// IdleTimeout counts as 0. Every function is O((jobs + nodes) log(jobs +
// nodes)) and deterministic: the order of Nodes and Queued in the input does
// not change the Plan.
package decide
