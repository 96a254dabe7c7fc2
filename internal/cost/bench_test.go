package cost

import (
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/store"
)

// BenchmarkReport30Days is a month's report of a busy workspace: 10
// clusters, 10,000 node lives and 300,000 job runs, by compute and by job.
func BenchmarkReport30Days(b *testing.B) {
	in := Input{Since: t10, Until: t10.Add(30 * 24 * time.Hour), Prices: Catalog(), Computes: map[string]Compute{}}
	for c := range 10 {
		key := fmt.Sprintf("%s-%d", cpuKey, c)
		in.Computes[key] = Compute{Workspace: "ws", Name: fmt.Sprintf("cpu-%d", c), Tags: map[string]string{"team": fmt.Sprint(c % 3)}}
	}
	for n := range 10000 {
		key := fmt.Sprintf("%s-%d", cpuKey, n%10)
		start := t10.Add(time.Duration(n) * time.Minute)
		in.Nodes = append(in.Nodes, store.NodeBill{Node: fmt.Sprint("n", n), Compute: key, VMSize: "Standard_NC6s_v3", Priority: "Dedicated",
			Created: start, Removed: start.Add(3 * time.Hour)})
		for r := range 30 {
			s := start.Add(time.Duration(r) * 5 * time.Minute)
			in.Runs = append(in.Runs, store.JobRun{Job: fmt.Sprint("u", n, "-", r), Attempt: 1, Name: fmt.Sprint("job-", n, "-", r), Compute: key,
				Nodes: []string{fmt.Sprint("n", n)}, Started: s, Ended: s.Add(4 * time.Minute)})
		}
	}
	for _, kind := range []string{ByCompute, ByJob} {
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := Make(in, kind, ""); r.Total.Cost <= 0 {
					b.Fatal("no cost")
				}
			}
		})
	}
}
