package ha

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// TestMoveFromSQLiteToPostgres: a server's state made on SQLite (a
// cluster, a finished job, the admin token) is there after `cumulus store
// migrate --to` and a start on PostgreSQL, and the moved server runs new
// jobs.
func TestMoveFromSQLiteToPostgres(t *testing.T) {
	p := newPlane(t, 1)
	// First on SQLite: the same data dir, no --store.
	f, err := os.Create(filepath.Join(p.dataDir, "sqlite.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(binary, "serve", "--listen", strings.TrimPrefix(p.urls[0], "http://"), "--data-dir", p.dataDir)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "CUMULUS_CONFIG="+filepath.Join(p.dataDir, "config.yaml"), "CUMULUS_ISOLATE_JOBS=false")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := p.client(p.urls[0])
	ctx := context.Background()
	waitUntil(t, "the SQLite server", 30*time.Second, func() bool { _, err := c.ListComputes(ctx); return err == nil })
	comp := api.Compute{Name: "moved"}
	comp.Properties.ComputeType = api.ComputeTypeAml
	minN, maxN := int32(0), int32(1)
	comp.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &minN, MaxNodeCount: &maxN, NodeIdleTimeBeforeScaleDown: "PT5S"}
	_, resp, err := c.PutCompute(ctx, comp)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	submitAndWait := func(name string) {
		t.Helper()
		if _, err := c.PutJob(ctx, api.Job{Name: name, Properties: api.JobProperties{ComputeID: "moved", Command: "echo hello"}}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, name+" completed", 2*time.Minute, func() bool {
			j, err := c.GetJob(ctx, name)
			return err == nil && j.Properties.Status == api.JobCompleted
		})
	}
	submitAndWait("before-move")
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()

	out, err := exec.Command(binary, "store", "migrate", "--data-dir", p.dataDir, "--to", p.dsn).CombinedOutput()
	if err != nil {
		t.Fatalf("store migrate: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "jobs") || !strings.Contains(string(out), "Copied into") {
		t.Errorf("store migrate said:\n%s", out)
	}
	if strings.Contains(string(out), "@") && !strings.Contains(string(out), "cumulus@") {
		t.Errorf("store migrate printed the URL unredacted:\n%s", out)
	}
	// Again: refused, the database is no longer empty.
	if out, err := exec.Command(binary, "store", "migrate", "--data-dir", p.dataDir, "--to", p.dsn).CombinedOutput(); err == nil {
		t.Errorf("a second migrate into the same database succeeded:\n%s", out)
	}

	p.start(0) // on PostgreSQL now, the same admin token
	j, err := c.GetJob(ctx, "before-move")
	if err != nil || j.Properties.Status != api.JobCompleted {
		t.Fatalf("the job from SQLite: %+v %v", j.Properties.Status, err)
	}
	if _, err := c.GetCompute(ctx, "moved"); err != nil {
		t.Fatal(err)
	}
	submitAndWait("after-move")
}
