package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/server"
)

// compute apply creates, then changes only what the file changes (and
// says what), leaves a matching compute alone, changes nothing on a dry
// run, and refuses a change of size; apply -f DIR does computes,
// environments and budgets, and a second run changes nothing.
func TestApply(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Defaults = server.Defaults{Subscription: "s1", ResourceGroup: "rg1", Location: "westus2", Workspace: "ws1"}
	})
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	applyJSON := func(args ...string) []applied {
		t.Helper()
		out, errOut, code := run(t, append([]string{"--config", cfg, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
		var rs []applied
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return rs
	}
	spec := write("cpu.yml", "name: applied\ntype: amlcompute\nsize: Standard_DS3_v2\nmax_instances: 2\ntags: {team: a}\n")
	if rs := applyJSON("compute", "apply", "-f", spec); rs[0].Action != "created" {
		t.Fatalf("first apply: %+v", rs)
	}
	if rs := applyJSON("compute", "apply", "-f", spec); rs[0].Action != "unchanged" || len(rs[0].Changes) != 0 {
		t.Fatalf("second apply: %+v, want unchanged", rs)
	}
	write("cpu.yml", "name: applied\ntype: amlcompute\nsize: Standard_DS3_v2\nmax_instances: 4\ntags: {team: b}\n")
	rs := applyJSON("compute", "apply", "-f", spec, "--dry-run")
	if rs[0].Action != "would update" || strings.Join(rs[0].Changes, ";") != "max_instances: 2 → 4;tags.team: \"a\" → \"b\"" {
		t.Fatalf("dry run: %+v", rs)
	}
	out, _, _ := run(t, "--config", cfg, "compute", "show", "-n", "applied")
	if !strings.Contains(out, `"max_instances": 2`) {
		t.Fatalf("a dry run changed the compute:\n%s", out)
	}
	if rs := applyJSON("compute", "apply", "-f", spec); rs[0].Action != "updated" || len(rs[0].Changes) != 2 {
		t.Fatalf("apply of the change: %+v", rs)
	}
	out, _, _ = run(t, "--config", cfg, "compute", "show", "-n", "applied")
	if !strings.Contains(out, `"max_instances": 4`) || !strings.Contains(out, `"team": "b"`) {
		t.Fatalf("after apply:\n%s", out)
	}
	write("cpu.yml", "name: applied\ntype: amlcompute\nsize: Standard_NC6s_v3\nmax_instances: 4\n")
	if _, errOut, code := run(t, "--config", cfg, "compute", "apply", "-f", spec); code == 0 || !strings.Contains(errOut, "cannot change size") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("a change of size: %d %q", code, errOut)
	}

	infra := filepath.Join(dir, "infra")
	os.Mkdir(infra, 0o700)
	os.WriteFile(filepath.Join(infra, "1-compute.yml"), []byte("name: gpu\ntype: amlcompute\nmax_instances: 1\ntags: {team: vision}\n"), 0o600)
	os.WriteFile(filepath.Join(infra, "2-env.yaml"), []byte("$schema: https://azuremlschemas.azureedge.net/latest/environment.schema.json\nname: torch\nversion: \"1\"\nimage: python:3.11\n"), 0o600)
	os.WriteFile(filepath.Join(infra, "3-budget.yml"), []byte("type: budget\nname: vision\namount: 100\ntag: {key: team, value: vision}\naction: stop-scale-up\n"), 0o600)
	os.WriteFile(filepath.Join(infra, "README.md"), []byte("not applied"), 0o600)
	rs = applyJSON("apply", "-f", infra)
	if len(rs) != 3 || rs[0].Action != "created" || rs[1].Action != "created" || rs[2].Action != "created" || rs[2].Kind != "budget" {
		t.Fatalf("apply -f DIR: %+v", rs)
	}
	for _, r := range applyJSON("apply", "-f", infra) {
		if r.Action != "unchanged" {
			t.Errorf("second apply -f DIR: %+v, want unchanged", r)
		}
	}
	os.WriteFile(filepath.Join(infra, "4-odd.yml"), []byte("type: dataset\nname: x\n"), 0o600)
	if _, errOut, code := run(t, "--config", cfg, "apply", "-f", infra); code == 0 || !strings.Contains(errOut, "4-odd.yml") {
		t.Errorf("an unknown type: %d %q", code, errOut)
	}
}
