package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// A job with limits.maxCost on a local node is stopped by its agent when
// its node time reaches the cap and fails with CostLimitExceeded; while it
// runs, its cost so far is in the job (job show). The price file makes a
// node-second cost 1.00, so a cap of 3 is about three seconds of holding
// the node, preparation included.
func TestJobStopsAtItsCostLimit(t *testing.T) {
	prices := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(prices, []byte("currency: USD\nsizes:\n  Standard_DS3_v2: {dedicated: 3600}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--price-file", prices)
	s.createCompute("capped", 0, 1, "PT60S")
	limit := 3.0
	j := api.Job{Name: "spender", Properties: api.JobProperties{Command: "sleep 120", ComputeID: "capped",
		Limits: &api.JobLimits{MaxCost: &limit}}}
	if _, err := s.c.PutJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to run", 60*time.Second, func() bool { return s.job("spender").Properties.Status == api.JobRunning })
	if c := s.job("spender").Properties.Cost; c == nil || c.Amount <= 0 || c.Currency != "USD" || c.MaxCost == nil || *c.MaxCost != 3 {
		t.Errorf("cost while it runs = %+v, want some USD of 3", c)
	}
	waitFor(t, "the job to fail at its cost limit", 60*time.Second, func() bool { return api.JobTerminal(s.job("spender").Properties.Status) })
	got := s.job("spender").Properties
	if got.Status != api.JobFailed || !strings.HasPrefix(got.StatusMessage, api.CostLimitExceeded+": ") {
		t.Fatalf("job ended %s: %q, want Failed with CostLimitExceeded", got.Status, got.StatusMessage)
	}
	// Stopped at the cap: SIGTERM ends sleep at once, so little more than
	// the cap is spent (the stop's report and release).
	if c := got.Cost; c == nil || c.Amount < limit || c.Amount > limit+2 {
		t.Errorf("final cost = %+v, want between %.2f and %.2f", c, limit, limit+2)
	}
	out, _, code := s.cli(t.TempDir(), "-o", "table", "job", "show", "-n", "spender")
	if code != 0 || !strings.Contains(out, "of 3.00") || !strings.Contains(out, "CostLimitExceeded") {
		t.Errorf("job show -o table:\n%s", out)
	}
}
