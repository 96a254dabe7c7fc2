package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const computeYAML = `$schema: https://azuremlschemas.azureedge.net/latest/amlCompute.schema.json
name: cpu-cluster
type: amlcompute
size: Standard_DS3_v2
min_instances: 0
max_instances: 2
idle_time_before_scale_down: 300
tier: dedicated
description: E2E cluster
tags:
  team: ml
  env: test
`

type computeOut struct {
	Name              string            `json:"name" yaml:"name"`
	Type              string            `json:"type" yaml:"type"`
	Size              string            `json:"size" yaml:"size"`
	Tier              string            `json:"tier" yaml:"tier"`
	MinInstances      int               `json:"min_instances" yaml:"min_instances"`
	MaxInstances      int               `json:"max_instances" yaml:"max_instances"`
	Idle              int               `json:"idle_time_before_scale_down" yaml:"idle_time_before_scale_down"`
	Description       string            `json:"description" yaml:"description"`
	Tags              map[string]string `json:"tags" yaml:"tags"`
	ProvisioningState string            `json:"provisioning_state" yaml:"provisioning_state"`
	ID                string            `json:"id" yaml:"id"`
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return v
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.standInGPUs(1) // the gpu cluster's size needs a GPU on the local provider's machine
	c.serve()
	file := writeFile(t, t.TempDir(), "compute.yml", computeYAML)

	// create from the az ml YAML; JSON by default, state after waiting.
	r := c.ok("compute", "create", "--file", file)
	out := decodeJSON[computeOut](t, r.stdout)
	if out.Name != "cpu-cluster" || out.Type != "amlcompute" || out.Size != "Standard_DS3_v2" || out.Tier != "dedicated" ||
		out.MinInstances != 0 || out.MaxInstances != 2 || out.Idle != 300 || out.Description != "E2E cluster" ||
		out.Tags["team"] != "ml" || out.Tags["env"] != "test" || out.ProvisioningState != "Succeeded" {
		t.Errorf("create output %+v", out)
	}
	if !strings.HasSuffix(out.ID, "/workspaces/default/computes/cpu-cluster") {
		t.Errorf("id %q", out.ID)
	}

	out = decodeJSON[computeOut](t, c.ok("compute", "show", "-n", "cpu-cluster").stdout)
	if out.Name != "cpu-cluster" || out.MaxInstances != 2 || out.ProvisioningState != "Succeeded" || out.Idle != 300 {
		t.Errorf("show %+v", out)
	}
	var y computeOut
	if err := yaml.Unmarshal([]byte(c.ok("compute", "show", "-n", "cpu-cluster", "-o", "yaml").stdout), &y); err != nil || y.Name != "cpu-cluster" || y.Size != "Standard_DS3_v2" {
		t.Errorf("show -o yaml: %+v %v", y, err)
	}
	// The server stores what the YAML said, in REST form.
	st, comp := c.getCompute("cpu-cluster")
	if st != 200 || comp.Aml().ScaleSettings.NodeIdleTimeBeforeScaleDown != "PT300S" || comp.Aml().VMPriority != "Dedicated" {
		t.Errorf("REST view %d %+v", st, comp.Aml())
	}

	// A second one from flags only.
	c.ok("compute", "create", "-n", "gpu-cluster", "--size", "standard_nc6s_v3", "--tier", "low_priority", "--max-instances", "3")
	table := c.ok("compute", "list").stdout
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "STATE") {
		t.Fatalf("compute list table:\n%s", table)
	}
	if !strings.Contains(table, "cpu-cluster") || !strings.Contains(table, "gpu-cluster") || !strings.Contains(table, "Succeeded") || !strings.Contains(table, "Standard_NC6s_v3") {
		t.Errorf("compute list table:\n%s", table)
	}
	list := decodeJSON[[]computeOut](t, c.ok("compute", "list", "-o", "json").stdout)
	if len(list) != 2 || list[1].Tier != "low_priority" {
		t.Errorf("compute list -o json: %+v", list)
	}
	var ylist []computeOut
	if err := yaml.Unmarshal([]byte(c.ok("compute", "list", "-o", "yaml").stdout), &ylist); err != nil || len(ylist) != 2 {
		t.Errorf("compute list -o yaml: %v %v", ylist, err)
	}

	// update: PATCH of the scale settings.
	out = decodeJSON[computeOut](t, c.ok("compute", "update", "-n", "cpu-cluster", "--max-instances", "5").stdout)
	if out.MaxInstances != 5 || out.MinInstances != 0 || out.Idle != 300 {
		t.Errorf("update output %+v", out)
	}
	out = decodeJSON[computeOut](t, c.ok("compute", "show", "-n", "cpu-cluster").stdout)
	if out.MaxInstances != 5 || out.Description != "E2E cluster" {
		t.Errorf("show after update %+v", out)
	}
	// update of tags/description: a full PUT guarded by the ETag.
	out = decodeJSON[computeOut](t, c.ok("compute", "update", "-n", "cpu-cluster", "--description", "changed", "--tags", "owner=e2e").stdout)
	if out.Description != "changed" || out.Tags["owner"] != "e2e" || out.Tags["team"] != "" || out.MaxInstances != 5 {
		t.Errorf("update tags/description %+v", out)
	}

	nodes := c.ok("compute", "list-nodes", "-n", "cpu-cluster").stdout
	if !strings.HasPrefix(nodes, "NODE ID") || strings.Count(strings.TrimSpace(nodes), "\n") != 0 {
		t.Errorf("list-nodes table:\n%s", nodes)
	}
	if s := strings.TrimSpace(c.ok("compute", "list-nodes", "-n", "cpu-cluster", "-o", "json").stdout); s != "[]" {
		t.Errorf("list-nodes -o json: %s", s)
	}

	sizes := c.ok("compute", "list-sizes").stdout
	if !strings.HasPrefix(sizes, "NAME") || !strings.Contains(sizes, "Standard_DS3_v2") || !strings.Contains(sizes, "USD/HOUR") {
		t.Errorf("list-sizes:\n%s", sizes)
	}
	var sizeList []map[string]any
	if err := json.Unmarshal([]byte(c.ok("compute", "list-sizes", "-o", "json").stdout), &sizeList); err != nil || len(sizeList) < 20 {
		t.Errorf("list-sizes -o json: %d sizes, %v", len(sizeList), err)
	}
	gpus := c.ok("compute", "list-sizes", "--gpu").stdout
	if strings.Contains(gpus, "Standard_DS3_v2") || !strings.Contains(gpus, "Standard_NC6s_v3") {
		t.Errorf("list-sizes --gpu:\n%s", gpus)
	}

	usage := c.ok("compute", "list-usage").stdout
	if !strings.HasPrefix(usage, "NAME") || !strings.Contains(usage, "Total Cluster Dedicated Regional vCPUs") {
		t.Errorf("list-usage:\n%s", usage)
	}
	var usageList []map[string]any
	if err := json.Unmarshal([]byte(c.ok("compute", "list-usage", "-o", "json").stdout), &usageList); err != nil || len(usageList) < 3 {
		t.Errorf("list-usage -o json: %v %v", usageList, err)
	}

	// workspaces
	var ws map[string]any
	ws = decodeJSON[map[string]any](t, c.ok("workspace", "create", "-n", "team-ws", "--description", "team space").stdout)
	if ws["name"] != "team-ws" {
		t.Errorf("workspace create: %v", ws)
	}
	ws = decodeJSON[map[string]any](t, c.ok("workspace", "show", "-n", "team-ws").stdout)
	if props, _ := ws["properties"].(map[string]any); ws["name"] != "team-ws" || props["description"] != "team space" {
		t.Errorf("workspace show: %v", ws)
	}
	wl := c.ok("workspace", "list").stdout
	if !strings.HasPrefix(wl, "NAME") || !strings.Contains(wl, "team-ws") || !strings.Contains(wl, "default") {
		t.Errorf("workspace list:\n%s", wl)
	}
	c.ok("compute", "create", "-w", "team-ws", "-n", "team-cluster")
	c.fails([]string{"Conflict"}, "workspace", "delete", "-n", "team-ws", "--yes")
	c.ok("compute", "show", "-w", "team-ws", "-n", "team-cluster")
	c.ok("workspace", "delete", "-n", "team-ws", "--yes", "--force")
	c.fails([]string{"NotFound"}, "workspace", "show", "-n", "team-ws")
	c.ok("workspace", "create", "-n", "empty-ws")
	c.ok("workspace", "delete", "-n", "empty-ws", "--yes")

	// delete
	c.fails([]string{"--yes"}, "compute", "delete", "-n", "gpu-cluster")
	c.fails([]string{"--yes"}, "workspace", "delete", "-n", "default")
	devNullConfirm(t, c)
	c.ok("compute", "delete", "-n", "gpu-cluster", "--yes")
	c.fails([]string{"ResourceNotFound"}, "compute", "show", "-n", "gpu-cluster")
	c.fails([]string{"gpu-cluster"}, "compute", "delete", "-n", "gpu-cluster", "--yes")
	if n := len(decodeJSON[[]computeOut](t, c.ok("compute", "list", "-o", "json").stdout)); n != 1 {
		t.Errorf("%d computes after delete", n)
	}

	// errors: one line, "error:", non-zero exit, nothing created.
	c.fails([]string{"InvalidResourceName"}, "compute", "create", "-n", "cluster-1")
	c.fails([]string{"InvalidResourceName"}, "compute", "create", "-n", "x")
	c.fails([]string{"ValidationError", "Standard_DS3_v2"}, "compute", "create", "-n", "bad-size", "--size", "Standard_DS3")
	c.fails([]string{"ValidationError"}, "compute", "create", "-n", "bad-scale", "--min-instances", "3", "--max-instances", "2")
	c.fails([]string{"ValidationError"}, "compute", "create", "-n", "bad-h100", "--size", "Standard_NC40ads_H100_v5", "--tier", "low_priority")
	c.fails([]string{"ValidationError", "needs 4 GPUs a node; this machine has at most 1"}, "compute", "create", "-n", "bad-gpus", "--size", "Standard_NC24s_v3")
	bad := writeFile(t, t.TempDir(), "bad.yml", computeYAML+"colour: blue\n")
	c.fails([]string{"colour"}, "compute", "create", "--file", bad)
	c.fails([]string{"tier"}, "compute", "create", "-n", "bad-tier", "--tier", "spot")
	c.fails(nil, "compute", "create", "--file", filepath.Join(t.TempDir(), "missing.yml"))
	c.fails([]string{"output"}, "compute", "list", "-o", "xml")
	c.fails([]string{"nothing to update"}, "compute", "update", "-n", "cpu-cluster")
	c.fails([]string{"ValidationError"}, "compute", "update", "-n", "cpu-cluster", "--max-instances", "0")
	for _, n := range []string{"cluster-1", "x", "bad-size", "bad-scale", "bad-h100", "bad-gpus", "bad-tier"} {
		if st, _ := c.getCompute(n); st != 404 {
			t.Errorf("%s: GET %d after a failed create", n, st)
		}
	}

	// Graceful shutdown exits 0; the state survives the restart.
	if err := c.term(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, c.out.String())
	}
	c.fails([]string{"cannot reach"}, "compute", "list")
	c.serve()
	out = decodeJSON[computeOut](t, c.ok("compute", "show", "-n", "cpu-cluster").stdout)
	if out.MaxInstances != 5 || out.Description != "changed" || out.ProvisioningState != "Succeeded" {
		t.Errorf("after restart %+v", out)
	}
	c.ok("compute", "delete", "-n", "cpu-cluster", "--yes")
	if s := strings.TrimSpace(c.ok("compute", "list", "-o", "json").stdout); s != "[]" {
		t.Errorf("list after deleting everything: %s", s)
	}
	if err := c.term(); err != nil {
		t.Fatalf("second SIGTERM: %v", err)
	}
}

func TestCLIWithoutServer(t *testing.T) {
	c := newCluster(t)
	// No config at all.
	c.fails([]string{"cumulus serve"}, "compute", "list")
	// A config, but nothing listening.
	c.serve()
	if err := c.term(); err != nil {
		t.Fatal(err)
	}
	c.fails([]string{"cannot reach"}, "compute", "show", "-n", "cpu-cluster")
	c.fails([]string{"cannot reach"}, "compute", "create", "-n", "cpu-cluster")
	c.fails([]string{"cannot reach"}, "workspace", "list")
}

// devNullConfirm: with stdin from /dev/null (cron, CI, `< /dev/null`) a
// delete without --yes must refuse with one error line. /dev/null is a
// character device, so a ModeCharDevice check takes it for a terminal.
func devNullConfirm(t *testing.T, c *cluster) {
	t.Helper()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r := c.cliStdin(null, "compute", "delete", "-n", "gpu-cluster")
	if r.code == 0 {
		t.Fatalf("delete without --yes and stdin /dev/null succeeded")
	}
	if st, _ := c.getCompute("gpu-cluster"); st != 200 {
		t.Fatalf("delete without --yes deleted the compute")
	}
	if !strings.HasPrefix(r.stderr, "error: ") {
		t.Fatalf("with stdin /dev/null, 'compute delete' without --yes printed %q, want one error line", r.stderr)
	}
}
