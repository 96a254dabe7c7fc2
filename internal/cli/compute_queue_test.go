package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// The queue policy from the CLI: flags and YAML on create, flags on
// update (changing the policy there is), the groups in compute show, the
// scheduler's order in queue show, a job's own minimum runtime; bad input
// is one error line.
func TestQueuePolicyCommands(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider, o.SimJobDuration = "sim", time.Hour })
	cli := mustRun(t, cfg)
	out := cli("compute", "create", "-n", "shared", "--max-instances", "1", "--queue-policy", "fair", "--fair-share-by", "tag:team",
		"--fair-share-weight", "vision=2")
	var v ComputeView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if p := v.QueuePolicy; p == nil || p.Kind != "fair_share" || p.FairShareBy != "tag:team" || p.Weights["vision"] != 2 || p.UsageHalfLife != "24h" {
		t.Fatalf("created with %+v", p)
	}
	for i := range 3 {
		cli("job", "create", "-n", fmt.Sprintf("v%d", i), "--compute", "shared", "--command", "true", "--tags", "team=vision")
		cli("job", "create", "-n", fmt.Sprintf("s%d", i), "--compute", "shared", "--command", "true", "--tags", "team=speech")
	}
	cli("job", "create", "-n", "loose", "--compute", "shared", "--command", "true", "--min-runtime", "30m")
	// The first job holds the only node (for an hour): the queue stays as
	// it is while the test reads it.
	deadline := time.Now().Add(30 * time.Second)
	for cli("job", "show", "-n", "v0", "--query", "status", "-o", "tsv") == "Queued\n" {
		if time.Now().After(deadline) {
			t.Fatal("the first job did not start in 30 s")
		}
		time.Sleep(50 * time.Millisecond) // polling a real server
	}
	out = cli("-o", "table", "compute", "show", "-n", "shared")
	for _, want := range []string{"GROUP", "WEIGHT", "WAITING_JOBS", "vision", "speech", "(no team tag)"} {
		if !strings.Contains(out, want) {
			t.Errorf("compute show -o table lacks %q:\n%s", want, out)
		}
	}
	var q api.QueueView
	if err := json.Unmarshal([]byte(cli("queue", "show", "-n", "shared", "-o", "json")), &q); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range q.Jobs {
		order = append(order, e.Name)
	}
	if q.FairShare == nil || len(order) < 6 || q.Jobs[0].Display == "" {
		t.Fatalf("queue %+v", q)
	}
	table := cli("queue", "show", "-n", "shared")
	for _, want := range []string{"fair share by tag:team", "POS", "WHY", order[0]} {
		if !strings.Contains(table, want) {
			t.Errorf("queue show lacks %q:\n%s", want, table)
		}
	}
	out = cli("compute", "update", "-n", "shared", "--preemption", "over_share", "--min-runtime", "15m")
	v = ComputeView{}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if p := v.QueuePolicy; p == nil || p.Kind != "fair_share" || p.FairShareBy != "tag:team" || p.Preemption != "over_share" || p.MinRuntime != "15m" {
		t.Errorf("after update: %+v", p)
	}
	var j JobView
	json.Unmarshal([]byte(cli("job", "show", "-n", "loose", "-o", "json")), &j)
	if j.MinRuntime != "30m" || j.FairShareGroup == nil || *j.FairShareGroup != "" {
		t.Errorf("job show: min_runtime %q, group %v", j.MinRuntime, j.FairShareGroup)
	}
	json.Unmarshal([]byte(cli("job", "show", "-n", "v0", "-o", "json")), &j)
	if j.FairShareGroup == nil || *j.FairShareGroup != "vision" {
		t.Errorf("job show of a vision job: group %v", j.FairShareGroup)
	}

	v = ComputeView{}
	json.Unmarshal([]byte(cli("compute", "update", "-n", "shared", "--set", "queue_policy.weights.speech=3")), &v)
	if p := v.QueuePolicy; p == nil || p.Weights["speech"] != 3 || p.Weights["vision"] != 2 || p.Preemption != "over_share" {
		t.Errorf("after --set: %+v", p)
	}
	spec := filepath.Join(t.TempDir(), "compute.yml")
	os.WriteFile(spec, []byte("name: teams\nmax_instances: 2\nqueue_policy:\n  kind: fair_share\n  weights: {alice: 3}\n  usage_half_life: 6h\n  preemption: lower_priority\n"), 0o600)
	v = ComputeView{}
	json.Unmarshal([]byte(cli("compute", "create", "-f", spec)), &v)
	if p := v.QueuePolicy; p == nil || p.FairShareBy != "principal" || p.Weights["alice"] != 3 || p.UsageHalfLife != "6h" || p.Preemption != "lower_priority" || p.MinRuntime != "10m" {
		t.Errorf("created from YAML: %+v", p)
	}
	// Applying the file twice changes nothing the second time.
	if out := cli("compute", "apply", "-f", spec); !strings.Contains(out, "unchanged") {
		t.Errorf("apply of the file the compute was created from:\n%s", out)
	}
	os.WriteFile(spec, []byte("name: teams\nmax_instances: 2\nqueue_policy:\n  kind: fair_share\n  weights: {alice: 1}\n"), 0o600)
	if out := cli("compute", "apply", "-f", spec); !strings.Contains(out, "updated") || !strings.Contains(out, "queue_policy.weights.alice") {
		t.Errorf("apply of a new weight:\n%s", out)
	}
	for _, args := range [][]string{
		{"compute", "create", "-n", "bad1", "--queue-policy", "lottery"},
		{"compute", "create", "-n", "bad2", "--queue-policy", "fair", "--fair-share-weight", "vision"},
		{"compute", "create", "-n", "bad3", "--queue-policy", "fifo", "--preemption", "over_share"},
		{"compute", "create", "-n", "bad4", "--queue-policy", "fair", "--usage-half-life", "soon"},
		{"compute", "update", "-n", "teams", "--queue-policy", "fair", "--fair-share-by", "team"},
		{"job", "create", "-n", "greedy", "--compute", "shared", "--command", "true", "--min-runtime", "5h"},
		{"queue", "show", "-n", "shared", "--top", "5000"},
	} {
		_, errOut, code := run(t, append([]string{"--config", cfg}, args...)...)
		if code == 0 || !strings.HasPrefix(errOut, "error: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one error line", args, code, errOut)
		}
	}
	// The roles operations.md gives a team: submit jobs, read the queue,
	// not change the policy.
	cli("auth", "principal", "create", "-n", "member")
	var tok struct {
		Token string `json:"token"`
	}
	json.Unmarshal([]byte(cli("auth", "token", "create", "--principal", "member", "-o", "json")), &tok)
	cli("auth", "role", "assign", "--principal", "member", "--role", "Reader", "--scope", "workspace")
	ws := v.ID[:strings.Index(v.ID, "/computes/")]
	cli("auth", "role", "assign", "--principal", "member", "--role", "Contributor", "--scope", ws+"/jobs")
	t.Setenv("CUMULUS_TOKEN", tok.Token)
	cli("job", "create", "-n", "member-job", "--compute", "shared", "--command", "true", "--tags", "team=nlp")
	cli("queue", "show", "-n", "shared")
	if _, errOut, code := run(t, "--config", cfg, "compute", "update", "-n", "shared", "--set", "queue_policy.weights.nlp=100"); code == 0 || !strings.Contains(errOut, "AuthorizationFailed") {
		t.Errorf("a team member changed the weights: exit %d, %q", code, errOut)
	}
	t.Setenv("CUMULUS_TOKEN", "")
	if out := cli("compute", "list"); strings.Contains(out, "bad") {
		t.Errorf("a refused compute was stored:\n%s", out)
	}
}
