package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/gpu"
	"github.com/cumulus-ml/cumulus/internal/gpu/gputest"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// gpuRefused checks a compute PUT is refused with an ARM 400 whose
// message says want, and that nothing is stored.
func (h *harness) gpuRefused(name string, body map[string]any, want string) {
	h.t.Helper()
	r := h.do("PUT", computePath(name), body).want(h.t, 400, api.CodeValidationError)
	var e api.ErrorResponse
	r.json(h.t, &e)
	msg := e.Error.Message
	if len(e.Error.Details) > 0 {
		msg = e.Error.Details[0].Message
	}
	if !strings.Contains(msg, want) {
		h.t.Errorf("refusal %q does not say %q", msg, want)
	}
	if _, err := store.Get[api.Compute](context.Background(), h.db.Q(), store.KindCompute, hWSPath, name); err == nil {
		h.t.Errorf("refused compute %s was stored", name)
	}
}

// A size needing more GPUs a node than the machine the nodes share will
// ever have is refused at create, naming the size, the GPUs it needs and
// the most the machine has; sizes that fit are created.
func TestGPUSizeRefusedWhenTheMachineCannotHoldIt(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) { c.GPUs = &gpu.Machine{Devices: gputest.Four()} }})
	h.gpuRefused("big", sized("Standard_ND96asr_v4", "Dedicated", 0, 2),
		"vmSize Standard_ND96asr_v4 needs 8 GPUs a node; this machine has at most 4 (4 × NVIDIA H100 80GB HBM3)")
	h.create("four", sized("Standard_NC24s_v3", "Dedicated", 0, 2))
	h.create("cpu", sized("Standard_DS3_v2", "Dedicated", 0, 2))
}

func TestGPUSizeRefusedOnAMachineWithoutGPU(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) { c.GPUs = &gpu.Machine{} }})
	h.gpuRefused("one", sized("Standard_NC6s_v3", "Dedicated", 0, 2), "vmSize Standard_NC6s_v3 needs 1 GPU a node; this machine has no GPU")
	h.create("cpu", sized("Standard_DS3_v2", "Dedicated", 0, 2))
}

// A compute kept from before (the machine had more GPUs then) cannot be
// updated into a state whose nodes could never start: the update is
// refused the same way, and the stored compute is unchanged.
func TestGPUSizeRefusedAtUpdate(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *server.Config) { c.GPUs = &gpu.Machine{Devices: gputest.Whole(2, "Tesla T4")} }})
	body := sized("Standard_NC24s_v3", "Dedicated", 0, 2)
	var c api.Compute
	c.Name, c.Location = "old", hLoc
	c.Properties = api.ComputeProperties{ComputeType: api.ComputeTypeAml, Properties: &api.AmlComputeProperties{VMSize: "Standard_NC24s_v3"}}
	if err := api.PrepareCompute(&c, "old", nil, hLoc); err != nil {
		t.Fatal(err)
	}
	c.ID, c.Properties.ProvisioningState = computePath("old"), api.StateSucceeded
	if _, err := store.Put(context.Background(), h.db.W(), store.KindCompute, hWSPath, "old", c, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := h.do("PUT", computePath("old"), body).want(t, 400, api.CodeValidationError)
	if !strings.Contains(string(r.Body), "needs 4 GPUs a node; this machine has at most 2 (2 × Tesla T4)") {
		t.Errorf("update refusal %s", r.Body)
	}
}
