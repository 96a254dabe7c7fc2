package dispatch

import (
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// job is a job of the given status whose attempt runs on nodes.
func job(uid, status string, attempt int, nodes ...string) store.Job {
	j := store.Job{UID: uid, Attempt: attempt, Nodes: nodes, Seq: 7,
		Doc: api.Job{Name: uid, Properties: api.JobProperties{Command: "python train.py", ExperimentName: "exp"}}}
	j.Doc.SetStatus(status, t0, "")
	return j
}

func failed(j store.Job, msg string) store.Job {
	j.Doc.Properties.StatusMessage = msg
	return j
}

func running(uid string, attempt int) agentapi.JobState {
	return agentapi.JobState{UID: uid, Attempt: attempt, Phase: agentapi.PhaseRunning}
}

func exited(uid string, attempt int) agentapi.JobState {
	return agentapi.JobState{UID: uid, Attempt: attempt, Phase: agentapi.PhaseExited}
}

// view is a known node n1 in state with job (its JobID) and these jobs in
// the store.
func view(state, jobID string, jobs ...store.Job) View {
	v := View{Known: true, Node: store.Node{ID: "n1", State: state, JobID: jobID, Address: "10.0.0.1"}, Jobs: map[string]store.Job{},
		Work: Work{NodeIPs: []string{"10.0.0.1"}}}
	for _, j := range jobs {
		v.Jobs[j.UID] = j
	}
	return v
}

// ended marks the parts of a job's attempt on nodes as ended with 0.
func ended(j store.Job, nodes ...string) store.Job {
	j.Exits = map[string]int{}
	for _, n := range nodes {
		j.Exits[n] = 0
	}
	return j
}

// mpiDone is an MPI job whose node 0 ("n0") ran mpirun, which ended.
func mpiDone(j store.Job) store.Job {
	j = ended(j, "n0")
	j.MPIDone = true
	return j
}

func evicted(v View) View {
	v.Node.Evicted, v.Grace = t0, 45*time.Second
	return v
}

// reclaimedJob is j with its last attempt stopped by the queue policy.
func reclaimedJob(j store.Job, why string) store.Job {
	j.Reclaimed, j.Reclaims = j.Attempt, 1
	j.Doc.Properties.Attempts = []api.Attempt{{Number: j.Attempt, Ended: &t0, Reason: why}}
	return j
}

func graced(v View) View {
	v.Grace = 45 * time.Second
	return v
}

func TestInstructions(t *testing.T) {
	assigned := func(uid string, attempt int) *agentapi.Assignment {
		a := Assignment(job(uid, api.JobPreparing, attempt, "n1"), store.Node{ID: "n1"}, Work{NodeIPs: []string{"10.0.0.1"}})
		return &a
	}
	cases := []struct {
		name     string
		view     View
		reported []agentapi.JobState
		want     Plan
	}{
		{name: "a node the store does not know exits",
			view: View{}, want: Plan{Response: agentapi.PollResponse{Unknown: true}}},
		{name: "an idle node without a job carries on",
			view: view(api.NodeIdle, "")},
		{name: "the node's new job is assigned",
			view: view(api.NodeRunning, "j1", job("j1", api.JobPreparing, 1, "n1")),
			want: Plan{Response: agentapi.PollResponse{Assign: assigned("j1", 1)}}},
		{name: "a job the agent already runs is not assigned again",
			view:     view(api.NodeRunning, "j1", job("j1", api.JobRunning, 1, "n1")),
			reported: []agentapi.JobState{running("j1", 1)}},
		{name: "a job the agent just reported ended is not assigned again",
			view:     view(api.NodeRunning, "j1", job("j1", api.JobRunning, 1, "n1")),
			reported: []agentapi.JobState{exited("j1", 1)}},
		{name: "a job the store no longer has is stopped",
			view:     view(api.NodeIdle, ""),
			reported: []agentapi.JobState{running("gone", 1)},
			want:     Plan{Response: agentapi.PollResponse{Cancel: []string{"gone"}, StopReasons: map[string]string{"gone": "the job no longer exists"}}}},
		{name: "a job requeued away from the node is stopped (its exit report releases the node)",
			view:     view(api.NodeRunning, "j1", job("j1", api.JobQueued, 1)),
			reported: []agentapi.JobState{running("j1", 1)},
			want:     Plan{Response: agentapi.PollResponse{Cancel: []string{"j1"}, StopReasons: map[string]string{"j1": "the job no longer runs on this node"}}}},
		{name: "a stale attempt is stopped and the new one assigned",
			view:     view(api.NodeRunning, "j1", job("j1", api.JobPreparing, 2, "n1")),
			reported: []agentapi.JobState{running("j1", 1)},
			want: Plan{Response: agentapi.PollResponse{Cancel: []string{"j1"}, Assign: assigned("j1", 2),
				StopReasons: map[string]string{"j1": "attempt 1 was replaced by attempt 2"}}}},
		{name: "a job of another node's is stopped",
			view:     view(api.NodeIdle, "", job("j2", api.JobRunning, 1, "n2")),
			reported: []agentapi.JobState{running("j2", 1)},
			want:     Plan{Response: agentapi.PollResponse{Cancel: []string{"j2"}, StopReasons: map[string]string{"j2": "the job no longer runs on this node"}}}},
		{name: "the surviving rank of a failed job is stopped for the failure, not as canceled",
			view:     view(api.NodeRunning, "j1", failed(job("j1", api.JobFailed, 1, "n1", "n2"), "exit code 2 on node n2 (node rank 1 of 2)")),
			reported: []agentapi.JobState{running("j1", 1)},
			want: Plan{Response: agentapi.PollResponse{Cancel: []string{"j1"},
				StopReasons: map[string]string{"j1": "stopped because the job failed: exit code 2 on node n2 (node rank 1 of 2)"}}}},
		{name: "a canceled job the agent runs is stopped",
			view:     view(api.NodeRunning, "j1", job("j1", api.JobCancelRequested, 1, "n1")),
			reported: []agentapi.JobState{running("j1", 1)},
			want:     Plan{Response: agentapi.PollResponse{Cancel: []string{"j1"}}}},
		{name: "a canceled job the agent never started releases the node",
			view: view(api.NodeRunning, "j1", job("j1", api.JobCancelRequested, 1, "n1")),
			want: Plan{Release: "j1"}},
		{name: "an ended job the agent does not run releases the node",
			view: view(api.NodeRunning, "j1", job("j1", api.JobFailed, 1, "n1")),
			want: Plan{Release: "j1"}},
		{name: "a job the store lost releases the node",
			view: view(api.NodeRunning, "gone"),
			want: Plan{Release: "gone"}},
		{name: "an evicted node's job is preempted with the compute's grace",
			view:     evicted(view(api.NodeRunning, "j1", job("j1", api.JobRunning, 1, "n1"))),
			reported: []agentapi.JobState{running("j1", 1)},
			want:     Plan{Response: agentapi.PollResponse{Preempt: []string{"j1"}, PreemptGrace: 45 * time.Second}}},
		{name: "an attempt the queue policy stopped for another job is preempted with the compute's grace and why",
			view:     graced(view(api.NodeRunning, "j1", reclaimedJob(job("j1", api.JobQueued, 1), "preempted for fair share: …"))),
			reported: []agentapi.JobState{running("j1", 1)},
			want: Plan{Response: agentapi.PollResponse{Preempt: []string{"j1"}, PreemptGrace: 45 * time.Second,
				StopReasons: map[string]string{"j1": "preempted for fair share: …"}}}},
		{name: "a stopped attempt the agent no longer runs releases the node",
			view: view(api.NodeRunning, "j1", reclaimedJob(job("j1", api.JobQueued, 1), "preempted for fair share: …")),
			want: Plan{Release: "j1"}},
		{name: "a stopped attempt whose job was then canceled is stopped as canceled",
			view:     view(api.NodeRunning, "j1", reclaimedJob(job("j1", api.JobCanceled, 1), "x")),
			reported: []agentapi.JobState{running("j1", 1)},
			want:     Plan{Response: agentapi.PollResponse{Cancel: []string{"j1"}}}},
		{name: "an evicted node is not given its job",
			view: evicted(view(api.NodeRunning, "j1", job("j1", api.JobPreparing, 1, "n1"))),
			want: Plan{Release: "j1"}},
		{name: "a node whose rank ended stays the job's while other ranks run: not assigned again, not released",
			view: view(api.NodeRunning, "j1", ended(job("j1", api.JobRunning, 1, "n0", "n1"), "n1"))},
		{name: "a node whose rank ended is released once the job ended",
			view: view(api.NodeRunning, "j1", ended(job("j1", api.JobCompleted, 1, "n0", "n1"), "n1")),
			want: Plan{Release: "j1"}},
		{name: "an evicted node whose rank ended is released (a preemption)",
			view: evicted(view(api.NodeRunning, "j1", ended(job("j1", api.JobRunning, 1, "n0", "n1"), "n1"))),
			want: Plan{Release: "j1"}},
		{name: "an MPI launcher is stopped once node 0's mpirun ended",
			view:     view(api.NodeRunning, "j1", mpiDone(job("j1", api.JobRunning, 1, "n0", "n1"))),
			reported: []agentapi.JobState{running("j1", 1)},
			want:     Plan{Response: agentapi.PollResponse{Cancel: []string{"j1"}, StopReasons: map[string]string{"j1": LaunchOver}}}},
		{name: "a leaving node without a job shuts down",
			view: view(api.NodeLeaving, ""),
			want: Plan{Response: agentapi.PollResponse{Shutdown: true}}},
		{name: "a leaving node finishes its job first",
			view:     view(api.NodeLeaving, "j1", job("j1", api.JobRunning, 1, "n1")),
			reported: []agentapi.JobState{running("j1", 1)}},
		{name: "a preempted node shuts down",
			view: evicted(view(api.NodePreempted, "")),
			want: Plan{Response: agentapi.PollResponse{Shutdown: true}}},
		{name: "an unusable node shuts down",
			view: view(api.NodeUnusable, ""),
			want: Plan{Response: agentapi.PollResponse{Shutdown: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Instructions(c.view, c.reported)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Instructions =\n%+v\nwant\n%+v", got, c.want)
			}
			if news(got.Response) != news(c.want.Response) {
				t.Errorf("news = %v", news(got.Response))
			}
		})
	}
}

// TestInstructionsNeedWorkOnlyWhenPending checks the view's promise: the
// work of an assignment is read exactly when Instructions assigns.
func TestInstructionsNeedWorkOnlyWhenPending(t *testing.T) {
	views := []View{
		view(api.NodeIdle, ""),
		view(api.NodeRunning, "j1", job("j1", api.JobPreparing, 1, "n1")),
		view(api.NodeRunning, "j1", job("j1", api.JobQueued, 1)),
		evicted(view(api.NodeRunning, "j1", job("j1", api.JobPreparing, 1, "n1"))),
	}
	reports := [][]agentapi.JobState{nil, {running("j1", 1)}, {exited("j1", 1)}, {running("j1", 0)}}
	for i, v := range views {
		for _, rep := range reports {
			_, ok := pending(v, rep)
			if assigns := Instructions(v, rep).Response.Assign != nil; assigns != ok {
				t.Errorf("view %d, reports %v: assigns %v, pending %v", i, rep, assigns, ok)
			}
		}
	}
}
