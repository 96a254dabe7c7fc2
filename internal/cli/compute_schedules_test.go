package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/server"
)

const schedulesYAML = `name: nightly
max_instances: 4
schedules:
  - name: nights
    cron: "0 20 * * 1-5"
    time_zone: Europe/Berlin
    max_instances: 0
  - name: mornings
    cron: "0 7 * * 1-5"
    time_zone: Europe/Berlin
    restore: true
`

func TestComputeSpecSchedules(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yml")
	os.WriteFile(p, []byte(schedulesYAML), 0o600)
	s, err := loadYAML[ComputeSpec](p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.toARM(specScope)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Aml().Schedules
	if len(got) != 2 || got[0].Name != "nights" || got[0].Cron != "0 20 * * 1-5" || got[0].TimeZone != "Europe/Berlin" ||
		got[0].MaxNodeCount == nil || *got[0].MaxNodeCount != 0 || got[0].MinNodeCount != nil || got[0].Restore || !got[1].Restore {
		t.Fatalf("schedules = %+v", got)
	}
	if err := api.PrepareCompute(&c, c.Name, nil, "westus2"); err != nil {
		t.Fatalf("the YAML's compute does not validate: %v", err)
	}
	// What show prints is the same YAML again.
	back := fromARM(c).ComputeSpec.Schedules
	if len(back) != 2 || back[0].TimeZone != "Europe/Berlin" || *back[0].MaxInstances != 0 || !back[1].Restore {
		t.Fatalf("shown schedules = %+v", back)
	}

	// Keys are checked inside entries too.
	typo := filepath.Join(dir, "typo.yml")
	os.WriteFile(typo, []byte("name: c1x\nschedules:\n  - name: n\n    cron: '@daily'\n    timezone: UTC\n    max_instances: 0\n"), 0o600)
	if _, err := loadYAML[ComputeSpec](typo); err == nil || !strings.Contains(err.Error(), "timezone") {
		t.Fatalf("a misspelt key in a schedule: %v", err)
	}
}

func TestComputeUpdateFileReplacesSchedules(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Defaults = server.Defaults{Subscription: "s1", ResourceGroup: "rg1", Location: "westus2", Workspace: "ws1"}
	})
	dir := t.TempDir()
	spec := filepath.Join(dir, "c.yml")
	os.WriteFile(spec, []byte(schedulesYAML), 0o600)
	out, errOut, code := run(t, "--config", cfg, "compute", "create", "-f", spec)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var v ComputeView
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Schedules) != 2 || v.Schedules[1].Name != "mornings" {
		t.Fatalf("create shows schedules %+v (%v)", v.Schedules, err)
	}

	// The file's schedules replace the cluster's.
	one := filepath.Join(dir, "one.yml")
	os.WriteFile(one, []byte("name: nightly\nschedules:\n  - {name: weekend, cron: '0 0 * * 6', min_instances: 0, max_instances: 1}\n"), 0o600)
	out, errOut, code = run(t, "--config", cfg, "compute", "update", "--file", one)
	if code != 0 {
		t.Fatalf("update --file: %d %s", code, errOut)
	}
	v = ComputeView{}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Schedules) != 1 || v.Schedules[0].Name != "weekend" || v.Schedules[0].TimeZone != "UTC" ||
		v.MaxInstances == nil || *v.MaxInstances != 4 {
		t.Fatalf("after update --file: schedules %+v max %v (%v)", v.Schedules, v.MaxInstances, err)
	}

	// A bad entry is refused, naming what is wrong.
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("name: nightly\nschedules:\n  - {name: n, cron: '0 20 * * *', time_zone: Mars/Olympus, max_instances: 0}\n"), 0o600)
	_, errOut, code = run(t, "--config", cfg, "compute", "update", "--file", bad)
	if code == 0 || !strings.Contains(errOut, "Mars/Olympus") {
		t.Fatalf("update with an unknown zone: %d %q", code, errOut)
	}

	// A file without schedules removes them.
	none := filepath.Join(dir, "none.yml")
	os.WriteFile(none, []byte("name: nightly\n"), 0o600)
	out, errOut, code = run(t, "--config", cfg, "compute", "update", "-f", none)
	if code != 0 || strings.Contains(out, `"schedules"`) {
		t.Fatalf("update with no schedules: %d %s %s", code, out, errOut)
	}
}
