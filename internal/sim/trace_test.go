package sim

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestReadTrace(t *testing.T) {
	in := "Duration_S, submit_time_s,gpus,vc,user,status\n" +
		"100,20,4,a,alice,Pass\n" +
		"30.5,5,,b,bob,Killed\n" +
		"10,20,1,a,carol,Failed\n"
	tr, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{Line: 3, Submit: 5 * time.Second, Duration: 30500 * time.Millisecond, VC: "b", Status: "Killed"},
		{Line: 2, Submit: 20 * time.Second, Duration: 100 * time.Second, GPUs: 4, VC: "a", Status: "Pass"},
		{Line: 4, Submit: 20 * time.Second, Duration: 10 * time.Second, GPUs: 1, VC: "a", Status: "Failed"},
	}
	if !reflect.DeepEqual(tr.Jobs, want) {
		t.Errorf("jobs\n got %+v\nwant %+v", tr.Jobs, want)
	}
	if tr.HasNodes || !tr.HasGPUs || !tr.HasVC || !tr.HasStatus {
		t.Errorf("columns: nodes %v gpus %v vc %v status %v", tr.HasNodes, tr.HasGPUs, tr.HasVC, tr.HasStatus)
	}
	if got := tr.VCs(); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("vcs %v", got)
	}
	if got := tr.Filter("a"); len(got.Jobs) != 2 || got.Jobs[0].Line != 2 {
		t.Errorf("filter a: %+v", got.Jobs)
	}
}

func TestReadTraceErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "empty file"},
		{"no rows", "submit_time_s,duration_s\n", "no jobs"},
		{"missing column", "submit_time_s,gpus\n1,1\n", "line 1: no duration_s column"},
		{"duplicate column", "submit_time_s,duration_s,SUBMIT_TIME_S\n1,2,3\n", "line 1: column submit_time_s appears twice"},
		{"not a number", "submit_time_s,duration_s\n1,2\nx,3\n", `line 3: submit_time_s "x" is not a number of seconds`},
		{"negative", "submit_time_s,duration_s\n1,-2\n", "line 2: duration_s -2 is out of range"},
		{"empty cell", "submit_time_s,duration_s\n,2\n", "line 2: submit_time_s is empty"},
		{"zero nodes", "submit_time_s,duration_s,nodes\n1,2,0\n", "line 2: nodes 0 is out of range"},
		{"fractional gpus", "submit_time_s,duration_s,gpus\n1,2,1.5\n", `line 2: gpus "1.5" is not a whole number`},
		{"field count", "submit_time_s,duration_s\n1,2\n3\n", "line 3: 1 fields, the header has 2"},
		{"several bad rows", "submit_time_s,duration_s\n1,a\n2,b\n3,4\n", `line 2: duration_s "a" is not a number of seconds; line 3: duration_s "b"`},
		{"inf", "submit_time_s,duration_s\ninf,2\n", "is not a number of seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// More than maxRowErrors bad rows are summed up.
	in := "submit_time_s,duration_s\n" + strings.Repeat("x,1\n", 15)
	if _, err := ReadTrace(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "and 5 more bad rows") {
		t.Errorf("error %v, want a count of the rows left out", err)
	}
}

func TestNodesOf(t *testing.T) {
	tests := []struct {
		j           Job
		gpusPerNode int
		want        int
	}{
		{Job{Nodes: 3, GPUs: 64}, 8, 3}, // nodes wins
		{Job{GPUs: 8}, 8, 1},
		{Job{GPUs: 9}, 8, 2},
		{Job{GPUs: 32}, 1, 32},
		{Job{GPUs: 1}, 8, 1},
		{Job{}, 8, 1},
		{Job{GPUs: 4}, 0, 1}, // CPU size: the caller refuses such traces
	}
	for _, tt := range tests {
		if got := NodesOf(tt.j, tt.gpusPerNode); got != tt.want {
			t.Errorf("NodesOf(%+v, %d) = %d, want %d", tt.j, tt.gpusPerNode, got, tt.want)
		}
	}
}

func TestWriteCSVRoundTrip(t *testing.T) {
	tr, err := Synthetic(Diurnal, 500, 2)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tr.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTrace(&b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range back.Jobs {
		back.Jobs[i].Line = 0
	}
	if !reflect.DeepEqual(back.Jobs, tr.Jobs) {
		t.Error("the trace read back differs")
	}
}

func TestSynthetic(t *testing.T) {
	for _, kind := range []string{Bursty, Diurnal} {
		a, err := Synthetic(kind, 5000, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Synthetic(kind, 5000, 1)
		c, _ := Synthetic(kind, 5000, 2)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: one seed gave two traces", kind)
		}
		if reflect.DeepEqual(a.Jobs, c.Jobs) {
			t.Errorf("%s: two seeds gave one trace", kind)
		}
		if len(a.Jobs) != 5000 {
			t.Errorf("%s: %d jobs, want 5000", kind, len(a.Jobs))
		}
		perHour := float64(len(a.Jobs)) / a.Jobs[len(a.Jobs)-1].Submit.Hours()
		if perHour < 25 || perHour > 60 {
			t.Errorf("%s: %.0f jobs an hour, want about 40", kind, perHour)
		}
		for i, j := range a.Jobs {
			if j.Duration < 10*time.Second || j.GPUs < 1 || j.VC == "" || (i > 0 && j.Submit < a.Jobs[i-1].Submit) {
				t.Fatalf("%s: job %d is %+v", kind, i, j)
			}
		}
	}
	if _, err := Synthetic("weekly", 10, 1); err == nil {
		t.Error("unknown kind: no error")
	}
	for in, want := range map[string]int{"synthetic:bursty": 7, "synthetic:diurnal:123": 123} {
		_, n, ok, err := ParseSynthetic(in, 7)
		if !ok || err != nil || n != want {
			t.Errorf("ParseSynthetic(%q) = %d, %v, %v", in, n, ok, err)
		}
	}
	if _, _, ok, _ := ParseSynthetic("traces/x.csv", 7); ok {
		t.Error("a file name taken for a synthetic trace")
	}
	if _, _, _, err := ParseSynthetic("synthetic:weekly", 7); err == nil {
		t.Error("synthetic:weekly: no error")
	}
}

func TestParseDelay(t *testing.T) {
	for in, want := range map[string]Delay{
		"180s":       {Mean: 180 * time.Second},
		"180s±60s":   {180 * time.Second, 60 * time.Second},
		"3m+-1m":     {3 * time.Minute, time.Minute},
		"240":        {Mean: 240 * time.Second},
		" 90 ± 30 ":  {90 * time.Second, 30 * time.Second},
		"0s":         {},
		"1h30m±10m ": {90 * time.Minute, 10 * time.Minute},
	} {
		got, err := ParseDelay(in)
		if err != nil || got != want {
			t.Errorf("ParseDelay(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "-5s", "60s±90s", "60s±x"} {
		if _, err := ParseDelay(in); err == nil {
			t.Errorf("ParseDelay(%q): no error", in)
		}
	}
	d := Delay{180 * time.Second, 60 * time.Second}
	p := NewProvider(d, Delay{}, 0, 1)
	seen := map[time.Duration]bool{}
	for k := 1; k <= 200; k++ {
		v := p.ProvisionDelay(NodeRef{Cluster: "a", Requested: time.Duration(k) * time.Second})
		if v < 120*time.Second || v > 240*time.Second {
			t.Fatalf("delay %v outside 180s±60s", v)
		}
		seen[v] = true
		if v != p.ProvisionDelay(NodeRef{Cluster: "a", K: k + 7, Requested: time.Duration(k) * time.Second}) {
			t.Fatal("two nodes requested at the same time drew different delays")
		}
	}
	if len(seen) < 150 || p.EvictAfter(NodeRef{Cluster: "a", K: 1}) >= 0 {
		t.Errorf("%d distinct delays of 200; eviction without a rate", len(seen))
	}
}
