package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// inFlight opens the dead server's database and says how many operations
// the kill left pending (whether the kill hit the window it aims at).
func (c *cluster) inFlight(what string) {
	c.t.Helper()
	db, err := store.OpenSQLite(context.Background(), filepath.Join(c.dataDir, "cumulus.db"))
	if err != nil {
		c.t.Fatalf("open the database after kill -9: %v", err)
	}
	defer db.Close()
	ops, err := store.PendingOperations(context.Background(), db.Q())
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("%s: %d operation(s) left pending by kill -9", what, len(ops))
}

const restBody = `{"properties":{"computeType":"AmlCompute","properties":{"vmSize":"Standard_DS2_v2","scaleSettings":{"minNodeCount":0,"maxNodeCount":2}}}}`

// opStatus reads an Azure-AsyncOperation URL handed out before a restart
// (same port, so the URL still points at the server).
func (c *cluster) opStatus(link string) string {
	c.t.Helper()
	st, _, b := c.http("GET", link, "")
	if st != 200 {
		return "HTTP " + string(b)
	}
	var s api.OperationStatus
	if err := json.Unmarshal(b, &s); err != nil {
		c.t.Fatalf("operation status %s: %v", b, err)
	}
	return s.Status
}

// consistent asserts that every compute listed is Succeeded and readable
// on its own, and that the list holds exactly want.
func (c *cluster) consistent(want ...string) {
	c.t.Helper()
	st, _, b := c.http("GET", c.wsPath("default")+"/computes", "")
	if st != 200 {
		c.t.Fatalf("list: %d %s", st, b)
	}
	var page api.Page[api.Compute]
	if err := json.Unmarshal(b, &page); err != nil {
		c.t.Fatal(err)
	}
	var got []string
	for _, comp := range page.Value {
		got = append(got, comp.Name)
		if comp.Properties.ProvisioningState != "Succeeded" {
			c.t.Errorf("compute %s listed as %s", comp.Name, comp.Properties.ProvisioningState)
		}
		if st, one := c.getCompute(comp.Name); st != 200 || one.Properties.ProvisioningState != comp.Properties.ProvisioningState {
			c.t.Errorf("compute %s: list says %s, GET %d %s", comp.Name, comp.Properties.ProvisioningState, st, one.Properties.ProvisioningState)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		c.t.Errorf("computes %v, want %v", got, want)
	}
	// The CLI sees the same.
	var cli []map[string]any
	if err := json.Unmarshal([]byte(c.ok("compute", "list", "-o", "json").stdout), &cli); err != nil || len(cli) != len(want) {
		c.t.Errorf("CLI list: %v %v", cli, err)
	}
}

func TestKillNineRecovery(t *testing.T) {
	c := newCluster(t)
	c.serve()
	c.ok("compute", "create", "-n", "stable", "--max-instances", "2")

	// 1. kill -9 right after PUT answered 201: the create may not have run.
	st, h, b := c.http("PUT", c.computePath("pending"), restBody)
	if st != 201 {
		t.Fatalf("PUT pending: %d %s", st, b)
	}
	c.kill9()
	c.inFlight("after PUT")
	createOp := h.Get("Azure-AsyncOperation")
	c.serve()
	eventually(t, "create after kill -9", func() (bool, string) {
		st, comp := c.getCompute("pending")
		return st == 200 && comp.Properties.ProvisioningState == "Succeeded", comp.Properties.ProvisioningState
	})
	if s := c.opStatus(createOp); s != "Succeeded" {
		t.Errorf("create operation after restart: %s", s)
	}
	c.consistent("pending", "stable")

	// 2. kill -9 right after a synchronous PATCH answered 200: it is durable.
	st, _, b = c.http("PATCH", c.computePath("pending"), `{"properties":{"properties":{"scaleSettings":{"maxNodeCount":7}}}}`)
	if st != 200 {
		t.Fatalf("PATCH: %d %s", st, b)
	}
	c.kill9()
	c.serve()
	if st, comp := c.getCompute("pending"); st != 200 || *comp.Aml().ScaleSettings.MaxNodeCount != 7 {
		t.Errorf("PATCH lost by kill -9: %d %+v", st, comp.Aml().ScaleSettings)
	}

	// 3. kill -9 right after DELETE answered 202.
	st, h, b = c.http("DELETE", c.computePath("stable")+"?underlyingResourceAction=Delete", "")
	if st != 202 {
		t.Fatalf("DELETE stable: %d %s", st, b)
	}
	c.kill9()
	c.inFlight("after DELETE")
	deleteOp := h.Get("Azure-AsyncOperation")
	c.serve()
	eventually(t, "delete after kill -9", func() (bool, string) {
		st, comp := c.getCompute("stable")
		return st == 404, comp.Properties.ProvisioningState
	})
	if s := c.opStatus(deleteOp); s != "Succeeded" {
		t.Errorf("delete operation after restart: %s", s)
	}
	c.consistent("pending")

	// 4. create and delete in flight together, then kill -9.
	st, h, b = c.http("PUT", c.computePath("flash"), restBody)
	if st != 201 {
		t.Fatalf("PUT flash: %d %s", st, b)
	}
	flashCreate := h.Get("Azure-AsyncOperation")
	st, h, b = c.http("DELETE", c.computePath("flash")+"?underlyingResourceAction=Delete", "")
	if st != 202 {
		t.Fatalf("DELETE flash: %d %s", st, b)
	}
	c.kill9()
	c.inFlight("after PUT+DELETE")
	flashDelete := h.Get("Azure-AsyncOperation")
	c.serve()
	eventually(t, "flash gone after kill -9", func() (bool, string) {
		st, comp := c.getCompute("flash")
		return st == 404 && c.opStatus(flashDelete) == "Succeeded", comp.Properties.ProvisioningState
	})
	if s := c.opStatus(flashCreate); s != "Succeeded" && s != "Canceled" {
		t.Errorf("create superseded by delete ended %s", s)
	}
	c.consistent("pending")

	// 5. kill -9 while idle, then a graceful stop: nothing lost either way.
	c.kill9()
	c.serve()
	c.consistent("pending")
	if err := c.term(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	c.serve()
	c.consistent("pending")
	if st, comp := c.getCompute("pending"); st != 200 || *comp.Aml().ScaleSettings.MaxNodeCount != 7 {
		t.Errorf("after graceful restart: %d %+v", st, comp.Aml().ScaleSettings)
	}
	if err := c.term(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}
