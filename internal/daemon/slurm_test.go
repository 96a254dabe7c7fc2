package daemon

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/local"
)

// checking is a provider whose CheckNode answers err (a test double: the
// slurm provider's own CheckNode is tested against a real Slurm).
type checking struct {
	provider.Provider
	err  error
	spec provider.NodeSpec
}

func (c *checking) Name() string { return "slurm" }
func (c *checking) CheckNode(_ context.Context, s provider.NodeSpec) error {
	c.spec = s
	return c.err
}

func slurmCompute(placement *api.SlurmPlacement) api.Compute {
	c := api.Compute{Name: "c"}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.VMSize, a.VMPriority, a.PreemptionGracePeriod, a.Slurm = "Standard_NC6s_v3", api.PriorityLowPriority, "PT20S", placement
	return c
}

// The compute check refuses a Slurm placement on another provider, and
// turns a provider's refusal into a 400 naming the setting; a provider that
// cannot tell is a 503, never a silent yes.
func TestComputeCheck(t *testing.T) {
	ctx := context.Background()
	target := func(err error) (int, string) {
		var e *api.Error
		if !errors.As(err, &e) {
			t.Fatalf("%v is not an ARM error", err)
		}
		return e.Status, e.Target
	}
	err := computeCheck(local.New(local.Options{}))(ctx, slurmCompute(&api.SlurmPlacement{Partition: "gpu"}))
	if st, tg := target(err); st != http.StatusBadRequest || tg != "properties.properties.slurm" {
		t.Errorf("a Slurm placement on the local provider: %v", err)
	}
	if err := computeCheck(local.New(local.Options{}))(ctx, slurmCompute(nil)); err != nil {
		t.Errorf("a compute without placement on the local provider: %v", err)
	}

	p := &checking{}
	if err := computeCheck(p)(ctx, slurmCompute(nil)); err != nil {
		t.Errorf("a compute the provider accepts: %v", err)
	}
	if s := p.spec; s.VCPUs != 6 || s.GPUs != 1 || !s.LowPriority || s.GracePeriod.Seconds() != 30 {
		t.Errorf("the provider was asked about %+v; want NC6s_v3's 6 vCPUs and 1 GPU, low priority, 20 s grace + 10 s to report", s)
	}
	p.err = &provider.Refusal{Setting: "vmSize", Reason: "sbatch --test-only says: Requested node configuration is not available"}
	err = computeCheck(p)(ctx, slurmCompute(nil))
	if st, tg := target(err); st != http.StatusBadRequest || tg != "properties.properties.vmSize" ||
		!strings.Contains(err.Error(), "Standard_NC6s_v3 (6 vCPUs, 112 GB, 1 GPU) here: sbatch --test-only says: Requested node configuration") {
		t.Errorf("a refused size: %v", err)
	}
	p.err = &provider.Refusal{Setting: "preemptionGracePeriod", Reason: "too long"}
	if st, tg := target(computeCheck(p)(ctx, slurmCompute(nil))); st != http.StatusBadRequest || tg != "properties.properties.preemptionGracePeriod" {
		t.Errorf("a refused grace period: %d %s", st, tg)
	}
	p.err = errors.New("squeue: Unable to contact slurm controller")
	if st, _ := target(computeCheck(p)(ctx, slurmCompute(nil))); st != http.StatusServiceUnavailable {
		t.Errorf("a provider that cannot tell: %d; want 503", st)
	}
}

func TestAgentURLOnLoopback(t *testing.T) {
	for url, warn := range map[string]bool{"http://127.0.0.1:8787": true, "https://localhost:8787": true, "https://login01.example:8787": false, "https://10.1.2.3:8787": false} {
		if got := agentURLOnLoopback(url) != ""; got != warn {
			t.Errorf("agentURLOnLoopback(%s) warns %v; want %v", url, got, warn)
		}
	}
}
