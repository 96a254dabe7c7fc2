package sim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/decide"
)

func TestSweep(t *testing.T) {
	sw, err := ParseSweep("idle=0,60s, 2m,adaptive")
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := sw.Configs(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cfgs {
		got = append(got, fmt.Sprintf("%s %s %v", c.Label, c.Policy, c.IdleTimeout))
	}
	want := []string{"idle=0 fixed 0s", "idle=60s fixed 1m0s", "idle=2m fixed 2m0s", "adaptive adaptive 1m0s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configs %q, want %q", got, want)
	}
	for _, spec := range []string{"max=1,2", "tier=low_priority,dedicated", "provision-delay=60s,3m±1m", "delay-weight=0,1", "size=Standard_NC6s_v3", "min=0,1", "eviction-rate=0.1", "policy=fixed,adaptive"} {
		if _, err := ParseSweep(spec); err != nil {
			t.Errorf("%s: %v", spec, err)
		}
	}
	for _, spec := range []string{"idle", "idle=", "speed=1,2", "idle=soon", "max=many", "tier=gold"} {
		if _, err := ParseSweep(spec); err == nil {
			t.Errorf("%s: no error", spec)
		}
	}

	// RunAll keeps the order and matches single runs.
	tr := trace(tj("a", 0, 1000, 1), tj("a", 1130, 200, 1))
	rs, err := RunAll(tr, cfgs, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cfgs {
		one, err := Run(tr, c)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rs[i], one) {
			t.Errorf("sweep result %d differs from its single run", i)
		}
	}
	// idle=0 loses the warm start that idle=60s and 2m get.
	if rs[0].Total.QueueDelay.Mean != 100 || rs[1].Total.QueueDelay.Mean != 50 {
		t.Errorf("mean delays %v and %v, want 100 and 50", rs[0].Total.QueueDelay.Mean, rs[1].Total.QueueDelay.Mean)
	}
	bad := testConfig()
	bad.Max = 0
	if _, err := RunAll(tr, []Config{testConfig(), bad}, 0); err == nil {
		t.Error("a bad config in a sweep: no error")
	}
}

// wellFormed checks that an SVG parses as XML and has the elements named.
func wellFormed(t *testing.T, svg []byte, elements ...string) {
	t.Helper()
	seen := map[string]bool{}
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
		}
		if s, ok := tok.(xml.StartElement); ok {
			seen[s.Name.Local] = true
		}
	}
	for _, e := range elements {
		if !seen[e] {
			t.Errorf("SVG has no <%s>", e)
		}
	}
}

func TestPlots(t *testing.T) {
	tr, err := Synthetic(Bursty, 2000, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Size, cfg.Timeline = "Standard_NC6s_v3", true
	r, err := Run(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Timeline) < 100 {
		t.Fatalf("timeline of %d points", len(r.Timeline))
	}
	var b bytes.Buffer
	if err := PlotTimeline(&b, "bursty <&> test", r); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes(), "svg", "polyline", "polygon", "text")
	if !strings.Contains(b.String(), "bursty &lt;&amp;&gt; test") {
		t.Error("title not escaped")
	}

	sw, _ := ParseSweep("idle=0,120,600,adaptive")
	cfgs, _ := sw.Configs(cfg)
	rs, err := RunAll(tr, cfgs, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := PlotTradeoff(&b, "sweep", rs); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes(), "svg", "polyline", "circle", "path")

	// Empty inputs still give a picture.
	b.Reset()
	if err := PlotTimeline(&b, "none", &Result{}); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes(), "svg", "text")
	b.Reset()
	if err := PlotTradeoff(&b, "none", nil); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes(), "svg")
}

// TestQueuePrefix backs the simulator's shortcut: for a queue in
// submission order whose jobs all fit maxNodeCount, the shortest prefix
// needing more than maxNodeCount nodes gives the same Plan as the whole
// queue.
func TestQueuePrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	t0 := Epoch
	for range 5000 {
		c := decide.Cluster{ID: "c", Min: r.IntN(3), Max: 1 + r.IntN(8), IdleTimeout: time.Minute, Headroom: r.IntN(6) - 1}
		c.Min = min(c.Min, c.Max)
		states := []string{decide.NodeIdle, decide.NodeIdle, decide.NodeRunning, decide.NodePreparing, decide.NodePreempted}
		for i := range r.IntN(10) {
			n := decide.Node{ID: fmt.Sprintf("n%d", i), State: states[r.IntN(len(states))], Created: t0, IdleSince: t0.Add(time.Duration(r.IntN(120)) * time.Second)}
			if n.State == decide.NodeRunning {
				n.JobID = fmt.Sprintf("r%d", i)
			}
			c.Nodes = append(c.Nodes, n)
		}
		for i := range r.IntN(20) {
			c.Queued = append(c.Queued, decide.Job{ID: fmt.Sprintf("j%02d", i), InstanceCount: 1 + r.IntN(c.Max), Seq: int64(i)})
		}
		cut := c
		need := 0
		for i, j := range c.Queued {
			if need += j.InstanceCount; need > c.Max {
				cut.Queued = c.Queued[:i+1]
				break
			}
		}
		now := t0.Add(time.Duration(r.IntN(300)) * time.Second)
		full, short := decide.Decide(c, now), decide.Decide(cut, now)
		if !reflect.DeepEqual(full, short) {
			t.Fatalf("cluster %+v\nfull queue %+v\nprefix     %+v", c, full, short)
		}
	}
}
