package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/server"
)

// TestQuotaCommandsAgainstDaemon runs `cumulus quota list/update` (and the
// quota errors of `compute create`) in-process against an in-process
// control plane.
func TestQuotaCommandsAgainstDaemon(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Defaults = server.Defaults{Subscription: "s1", ResourceGroup: "rg1", Location: "westus2", Workspace: "ws1"}
		o.Locations = []string{"westus2", "eastus"}
		o.Quotas = server.Quotas{FamilyCores: 40, TotalCores: 100, LowPriorityCores: 20}
		o.AgentCommand = []string{"true"} // nodes never register; no agent processes are left behind
	})
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return run(t, append([]string{"--config", cfg}, args...)...)
	}
	oneError := func(what, errOut string, code int, prefix string) {
		t.Helper()
		if code == 0 || !strings.HasPrefix(errOut, "error: "+prefix) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want one line starting %q", what, code, errOut, "error: "+prefix)
		}
	}

	// The defaults, in a table.
	out, errOut, code := cli("quota", "list")
	if code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	for _, want := range []string{"QUOTA", "IN USE", "LIMIT", "TotalDedicatedCores", "TotalLowPriorityCores", "standardDSv2Family", "Standard DSv2 Family Cluster Dedicated vCPUs"} {
		if !strings.Contains(out, want) {
			t.Errorf("list table lacks %q:\n%s", want, out)
		}
	}

	// Each kind of quota, with the family in both spellings.
	for _, args := range [][]string{
		{"--family", "standardDSv2Family", "--limit", "8"},
		{"--family", "Standard_NCSv3_Family_Cluster_Dedicated_vCPUs", "--limit", "24", "--location", "westus2"},
		{"--total", "--limit", "90"},
		{"-l", "westus2", "--low-priority", "--limit", "12"},
	} {
		out, errOut, code := cli(append([]string{"quota", "update"}, args...)...)
		if code != 0 || !strings.Contains(out, "Success") {
			t.Errorf("update %v: %d %q %q", args, code, out, errOut)
		}
	}
	out, _, code = cli("-o", "json", "quota", "list", "--location", "westus2")
	var quotas []api.Quota
	if err := json.Unmarshal([]byte(out), &quotas); code != 0 || err != nil {
		t.Fatalf("list -o json: %d %v\n%s", code, err, out)
	}
	got := map[string]int64{}
	for _, q := range quotas {
		got[q.Name.Value] = q.Limit
	}
	if got["standardDSv2Family"] != 8 || got["standardNCSv3Family"] != 24 || got["TotalDedicatedCores"] != 90 || got["TotalLowPriorityCores"] != 12 || got["standardDv2Family"] != 40 {
		t.Errorf("limits after the updates: %v", got)
	}
	if out, _, _ := cli("-o", "yaml", "quota", "list"); !strings.Contains(out, "limit: 90") {
		t.Errorf("list -o yaml:\n%s", out)
	}
	if out, _, _ := cli("-o", "json", "quota", "update", "--total", "--limit", "91"); !strings.Contains(out, `"status": "Success"`) || !strings.Contains(out, "/quotas/TotalDedicatedCores") {
		t.Errorf("update -o json: %s", out)
	}
	// Another location keeps the server's defaults; usages show the limits.
	if out, _, _ := cli("-o", "json", "quota", "list", "-l", "eastus"); !strings.Contains(out, `"limit": 40`) || strings.Contains(out, `"limit": 8,`) {
		t.Errorf("eastus quotas: %s", out)
	}
	if out, _, _ := cli("compute", "list-usage"); !strings.Contains(out, "Standard DSv2 Family Cluster Dedicated vCPUs") || !strings.Contains(out, "91") {
		t.Errorf("list-usage:\n%s", out)
	}

	// Refusals: one clear line, non-zero exit, nothing changed.
	_, errOut, code = cli("quota", "update", "--family", "standardBogusFamily", "--limit", "4")
	oneError("unknown family", errOut, code, "InvalidVMFamilyName: ")
	if !strings.Contains(errOut, "standardBogusFamily") || !strings.Contains(errOut, "compute list-sizes") {
		t.Errorf("unknown family error: %q", errOut)
	}
	_, errOut, code = cli("compute", "create", "-n", "too-big", "--size", "Standard_DS3_v2", "--min-instances", "3", "--max-instances", "3")
	oneError("create past quota", errOut, code, "QuotaExceeded: ")
	if !strings.Contains(errOut, "standardDSv2Family needs 12 more cores, 8 of 8 free in location westus2") {
		t.Errorf("create past quota: %q", errOut)
	}
	if _, _, code := cli("compute", "show", "-n", "too-big"); code == 0 {
		t.Error("a refused compute exists")
	}
	if _, errOut, code := cli("compute", "create", "-n", "keeps-one", "--size", "Standard_DS3_v2", "--min-instances", "1", "--max-instances", "1"); code != 0 {
		t.Fatalf("create within quota: %d %s", code, errOut)
	}
	_, errOut, code = cli("quota", "update", "--family", "standardDSv2Family", "--limit", "2")
	oneError("below a cluster's minimum", errOut, code, "InvalidQuotaBelowClusterMinimum: ")
	if !strings.Contains(errOut, "westus2") || !strings.Contains(errOut, "minNodeCount") {
		t.Errorf("below minimum: %q", errOut)
	}
	if out, _, _ := cli("-o", "json", "quota", "list"); !strings.Contains(out, `"limit": 8`) {
		t.Errorf("a refused update changed the limit: %s", out)
	}

	// Usage errors.
	for what, args := range map[string][]string{
		"no quota named":  {"quota", "update", "--limit", "4"},
		"two quotas":      {"quota", "update", "--total", "--low-priority", "--limit", "4"},
		"no limit":        {"quota", "update", "--total"},
		"negative limit":  {"quota", "update", "--total", "--limit", "-1"},
		"bad output":      {"-o", "xml", "quota", "list"},
		"stray arguments": {"quota", "list", "extra"},
	} {
		_, errOut, code := cli(args...)
		oneError(what, errOut, code, "")
	}
}
