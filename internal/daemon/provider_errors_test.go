package daemon_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/providertest"
)

// A provider's refusals reach the user through the API: with no capacity,
// the compute's errors, its history and the queued job say so while the
// cluster backs off; with a configuration error the compute shows the
// provider's words and gets its node as soon as it is updated, not after
// the 5 minutes it otherwise waits. The provider is the recording fake
// (no agent registers), so the node, once created, stays preparing.
func TestProviderRefusalsReachTheAPI(t *testing.T) {
	fake := providertest.NewFake()
	fake.AllowedCreateCalls = 0 // a cloud with no room
	o := options(t, t.TempDir())
	o.NodeProvider = fake
	d := start(t, o)
	defer stop(t, d)
	c := caller{t: t, base: d.URL, token: d.Token, http: http.DefaultClient}
	computeBody := func(idle string) string {
		return `{"properties":{"computeType":"AmlCompute","properties":{"vmSize":"Standard_DS3_v2","scaleSettings":{"minNodeCount":0,"maxNodeCount":1,"nodeIdleTimeBeforeScaleDown":"` + idle + `"}}}}`
	}
	if code, _, body := c.do("PUT", dWSPath+"/computes/cpu", computeBody("PT120S")); code != http.StatusCreated {
		t.Fatalf("PUT compute: %d %s", code, body)
	}
	job := `{"properties":{"jobType":"Command","command":"true","computeId":"` + dWSPath + `/computes/cpu"}}`
	if code, _, body := c.do("PUT", dWSPath+"/jobs/waits", job); code/100 != 2 {
		t.Fatalf("PUT job: %d %s", code, body)
	}

	// computeError waits for the compute's NodeProvisioningFailed error to
	// hold want, and returns it.
	computeError := func(want string) string {
		t.Helper()
		var last []byte
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			_, _, b := c.do("GET", dWSPath+"/computes/cpu", "")
			last = b
			var comp api.Compute
			if err := json.Unmarshal(b, &comp); err != nil || comp.Properties.Properties == nil {
				continue
			}
			for _, e := range comp.Aml().Errors {
				if e.Error != nil && e.Error.Code == "NodeProvisioningFailed" && strings.Contains(e.Error.Message, want) {
					return e.Error.Message
				}
			}
		}
		t.Fatalf("the compute's errors never said %q: %s", want, last)
		return ""
	}
	msg := computeError("has no capacity for another node")
	_, _, b := c.do("GET", dWSPath+"/jobs/waits", "")
	var j api.Job
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if j.Properties.Status != api.JobQueued || !strings.Contains(j.Properties.StatusMessage, "has no capacity for another node") {
		t.Errorf("the job is %s with message %q; want Queued, saying the provider has no capacity", j.Properties.Status, j.Properties.StatusMessage)
	}
	_, _, b = c.do("GET", dWSPath+"/computes/cpu/events", "")
	if !strings.Contains(string(b), api.EventProvisioningFailed) || !strings.Contains(string(b), "has no capacity") {
		t.Errorf("the compute's history has no ProvisioningFailed event saying so: %s", b)
	}
	if !strings.Contains(msg, "AllowedCreateCalls are used up") {
		t.Errorf("compute error %q does not carry the provider's words", msg)
	}

	// The provider now refuses the compute's configuration: the next try
	// (after the backoff) says so in its words.
	words := `namespace "ml-team" not found`
	fake.Locked(func() {
		fake.AllowedCreateCalls = math.MaxInt
		fake.NextCreateErr = provider.Configurationf("%s", words)
	})
	computeError(words)
	var calls int
	fake.Locked(func() { calls = len(fake.CreateCalls) })
	// Updated, the compute gets its node at once.
	if code, _, body := c.do("PUT", dWSPath+"/computes/cpu", computeBody("PT300S")); code != http.StatusOK {
		t.Fatalf("PUT compute again: %d %s", code, body)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var created []string
		fake.Locked(func() { created = append(created, fake.Created...) })
		if len(created) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node created within 2 minutes of updating the compute (calls before the update: %d); want one at once", calls)
		}
	}
}
