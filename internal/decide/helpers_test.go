package decide

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// t0 is the start of every test's timeline; tests never read the wall clock.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func idleNode(id string, since time.Time) Node {
	return Node{ID: id, State: NodeIdle, IdleSince: since, Created: since.Add(-time.Hour)}
}

func runningNode(id, job string, created time.Time) Node {
	return Node{ID: id, State: NodeRunning, JobID: job, Created: created}
}

func preparingNode(id string, created time.Time) Node {
	return Node{ID: id, State: NodePreparing, Created: created}
}

func nodeIn(id, state string) Node {
	return Node{ID: id, State: state, Created: t0.Add(-time.Hour)}
}

// jobs returns one-node jobs with the given IDs, submitted in that order.
func jobs(ids ...string) []Job {
	out := make([]Job, len(ids))
	for i, id := range ids {
		out[i] = Job{ID: id, InstanceCount: 1, Seq: int64(i + 1)}
	}
	return out
}

// gang returns a job needing n nodes.
func gang(id string, n int, seq int64) Job {
	return Job{ID: id, InstanceCount: n, Seq: seq}
}

// normalized makes empty slices nil so that plans compare by content.
func normalized(p Plan) Plan {
	if len(p.Assign) == 0 {
		p.Assign = nil
	}
	if len(p.Remove) == 0 {
		p.Remove = nil
	}
	if len(p.Drain) == 0 {
		p.Drain = nil
	}
	if len(p.QuotaWait) == 0 {
		p.QuotaWait = nil
	}
	if len(p.Blocked) == 0 {
		p.Blocked = nil
	}
	return p
}

func samePlan(a, b Plan) bool { return reflect.DeepEqual(normalized(a), normalized(b)) }

func show(p Plan) string {
	wake := "-"
	if !p.WakeAt.IsZero() {
		wake = "t0+" + p.WakeAt.Sub(t0).String()
	}
	return fmt.Sprintf("{Assign:%v Create:%d Remove:%v Drain:%v Target:%d WakeAt:%s Blocked:%v QuotaShort:%d QuotaWait:%v GPUShort:%d GPUWait:%v}",
		p.Assign, p.Create, p.Remove, p.Drain, p.Target, wake, p.Blocked, p.QuotaShort, p.QuotaWait, p.GPUShort, p.GPUWait)
}

func checkPlan(t *testing.T, got, want Plan) {
	t.Helper()
	if !samePlan(got, want) {
		t.Errorf("plan\n got %s\nwant %s", show(got), show(want))
	}
}

// cloneCluster deep-copies c so tests can check that inputs are not modified.
func cloneCluster(c Cluster) Cluster {
	c.Nodes = append([]Node(nil), c.Nodes...)
	c.Queued = append([]Job(nil), c.Queued...)
	return c
}

// The reasons a plan gives, as values.
func atMax(n int) api.Block       { return api.Block{Kind: api.BlockAtMax, Max: n} }
func quotaAllows(n int) api.Block { return api.Block{Kind: api.BlockQuota, Allowed: n} }
func tooBig(job string, need, max int) api.Block {
	return api.Block{Kind: api.BlockTooBig, Job: job, Need: need, Max: max}
}
