package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestExperiment(t *testing.T) {
	if os.Getenv("SIMEXP") == "" {
		t.Skip()
	}
	philly, err := LoadTrace("/work/shared/traces/philly-2017-10-03_to_11-08.csv")
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := strconv.Atoi(os.Getenv("SEED"))
	njobs, _ := strconv.Atoi(os.Getenv("NJOBS"))
	if seed == 0 {
		seed = 1
	}
	if njobs == 0 {
		njobs = 20000
	}
	bursty, _ := Synthetic(Bursty, njobs, uint64(seed))
	diurnal, _ := Synthetic(Diurnal, njobs, uint64(seed))
	type tc struct {
		name string
		tr   *Trace
		size string
		max  int
	}
	cases := []tc{{"philly-nc6", philly, "Standard_NC6s_v3", 1000}, {"philly-nd96", philly, "Standard_ND96asr_v4", 600}, {"bursty", bursty, "Standard_NC6s_v3", 400}, {"diurnal", diurnal, "Standard_NC6s_v3", 400}}
	ws := strings.Split(os.Getenv("SIMEXP"), ";")

	if os.Getenv("SYNONLY") != "" {
		cases = cases[2:]
	}
	for _, c := range cases {
		base := DefaultConfig()
		base.Size, base.Max = c.size, c.max
		base.Provision = Delay{240 * time.Second, 60 * time.Second}
		var cfgs []Config
		for _, sec := range []int{0, 60, 120, 300, 600, 1800} {
			f := base
			f.IdleTimeout = time.Duration(sec) * time.Second
			f.Label = fmt.Sprint("fixed", sec)
			cfgs = append(cfgs, f)
		}
		for _, w := range ws {
			a := base
			a.Policy = PolicyAdaptive
			a.Label = w
			for kv := range strings.SplitSeq(w, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "w":
					a.Adaptive.DelayWeight = f
				case "win":
					a.Adaptive.Window = int(f)
				case "min":
					a.Adaptive.MinSamples = int(f)
				case "cap":
					a.Adaptive.MaxIdle = time.Duration(f) * time.Second
				}
			}
			cfgs = append(cfgs, a)
		}
		rs, err := RunAll(c.tr, cfgs, 0)
		if err != nil {
			t.Fatal(err)
		}
		ref := rs[2].Total
		line := c.name + ":"
		for _, r := range rs[6:] {
			m := r.Total
			dom := ""
			for _, f := range rs[:6] {
				if f.Total.Cost <= m.Cost && f.Total.QueueDelay.Mean <= m.QueueDelay.Mean {
					dom += " DOM-by-" + f.Label
				}
			}
			line += fmt.Sprintf("\n  %-24s idle %7.1f (%+5.1f%%) delay %6.1f (%+5.1f%%)%s", r.Label, m.IdleNodeHours, 100*(m.IdleNodeHours/ref.IdleNodeHours-1), m.QueueDelay.Mean, 100*(m.QueueDelay.Mean/ref.QueueDelay.Mean-1), dom)
		}
		t.Log(line)
	}
}

func TestPerVC(t *testing.T) {
	if os.Getenv("SIMVC") == "" {
		t.Skip()
	}
	philly, err := LoadTrace("/work/shared/traces/philly-2017-10-03_to_11-08.csv")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := strconv.ParseFloat(os.Getenv("SIMVC"), 64)
	for _, sz := range []struct {
		size string
		max  int
	}{{"Standard_NC6s_v3", 1000}, {"Standard_ND96asr_v4", 600}} {
		base := DefaultConfig()
		base.Size, base.Max = sz.size, sz.max
		base.Provision = Delay{240 * time.Second, 60 * time.Second}
		var cfgs []Config
		for _, sec := range []int{0, 60, 120, 300, 600, 1800} {
			f := base
			f.IdleTimeout = time.Duration(sec) * time.Second
			f.Label = fmt.Sprint("fixed", sec)
			cfgs = append(cfgs, f)
		}
		a := base
		a.Policy, a.Label = PolicyAdaptive, "adaptive"
		a.Adaptive.DelayWeight = w
		cfgs = append(cfgs, a)
		rs, err := RunAll(philly, cfgs, 0)
		if err != nil {
			t.Fatal(err)
		}
		line := sz.size
		for i := range rs[0].Clusters {
			ref := rs[2].Clusters[i]
			m := rs[6].Clusters[i]
			dom := ""
			for _, f := range rs[:6] {
				fm := f.Clusters[i]
				if fm.Cost <= m.Cost && fm.QueueDelay.Mean <= m.QueueDelay.Mean && (fm.Cost < m.Cost || fm.QueueDelay.Mean < m.QueueDelay.Mean) {
					dom += " DOM-by-" + f.Label
				}
			}
			line += fmt.Sprintf("\n  %-8s jobs %5d idle %7.1f vs %7.1f (%+5.1f%%) delay %6.1f vs %6.1f (%+5.1f%%)%s", m.Cluster, m.Jobs, m.IdleNodeHours, ref.IdleNodeHours, 100*(m.IdleNodeHours/ref.IdleNodeHours-1), m.QueueDelay.Mean, ref.QueueDelay.Mean, 100*(m.QueueDelay.Mean/ref.QueueDelay.Mean-1), dom)
		}
		t.Log(line)
	}
}
