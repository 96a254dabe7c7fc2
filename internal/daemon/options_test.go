package daemon

import (
	"testing"
	"time"
)

func TestValidateChangesNothing(t *testing.T) {
	o := DefaultOptions()
	o.DataDir = t.TempDir()
	o.HeartbeatTimeout, o.PollTimeout = 30*time.Second, time.Minute
	before := o
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.PollTimeout != before.PollTimeout || o.Clock != nil || o.Log != nil {
		t.Errorf("Validate changed the options: poll timeout %v, clock %v, log %v", o.PollTimeout, o.Clock, o.Log)
	}
}

func TestWithDefaultsKeepsPollsInsideTheHeartbeatTimeout(t *testing.T) {
	cases := []struct{ heartbeat, poll, want time.Duration }{
		{60 * time.Second, 20 * time.Second, 20 * time.Second},
		{30 * time.Second, time.Minute, 10 * time.Second},
		{30 * time.Second, 30 * time.Second, 10 * time.Second},
		{0, time.Minute, time.Minute}, // no heartbeat timeout: nothing to stay inside
	}
	for _, c := range cases {
		o := Options{HeartbeatTimeout: c.heartbeat, PollTimeout: c.poll}.withDefaults()
		if o.PollTimeout != c.want {
			t.Errorf("heartbeat %v, poll %v: poll timeout %v, want %v", c.heartbeat, c.poll, o.PollTimeout, c.want)
		}
		if o.Clock == nil || o.Log == nil {
			t.Error("no clock or logger")
		}
	}
}
