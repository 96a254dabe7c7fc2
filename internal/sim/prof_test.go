package sim

import (
	"os"
	"testing"
	"time"
)

func TestProfPhilly(t *testing.T) {
	if os.Getenv("SIMPROF") == "" {
		t.Skip()
	}
	tr, err := LoadTrace("/work/shared/traces/philly-2017-10-03_to_11-08.csv")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Size, c.Max, c.Policy = "Standard_NC6s_v3", 1000, PolicyAdaptive
	c.Adaptive.DelayWeight = 3
	c.Provision = Delay{240 * time.Second, 60 * time.Second}
	start := time.Now()
	r, err := Run(tr, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(time.Since(start), r.Total.IdleNodeHours, r.Total.QueueDelay.Mean)
}
