package metrics

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/metrics/promtext"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Utilization gauges: the latest sample of each node the store has (not
// unusable or preempted) and of each running job, read at scrape time.
// Their series are bounded by live nodes and running jobs; there are no
// per-job counters, so a finished job's series simply end.
//
// At 10,000 nodes they are some 80,000 series: gathered as series and
// sorted they would cost a scrape about 150 ms more. So they are written
// as text exposition straight from the store's rows (one family after
// another, each series once: nodes and jobs are unique in the store) and
// follow the registry's own families in the same answer.

// usageFamily is one metric family of the utilization gauges.
type usageFamily struct {
	name, help, typ string
}

// The families, in the order they are written.
const (
	famNodeCPU = iota
	famNodeMemUsed
	famNodeMemTotal
	famNodeDiskUsed
	famNodeRx
	famNodeTx
	famNodeGPU
	famNodeGPUMem
	famJobCPU
	famJobMem
	famJobGPU
	numUsageFamilies
)

var usageFamilies = [numUsageFamilies]usageFamily{
	famNodeCPU:      {Namespace + "_node_cpu_utilization", "Fraction (0-1) of the node's CPU time spent busy, all CPUs together, over its latest sampling interval.", "gauge"},
	famNodeMemUsed:  {Namespace + "_node_memory_used_bytes", "Memory in use on the node: MemTotal minus MemAvailable.", "gauge"},
	famNodeMemTotal: {Namespace + "_node_memory_total_bytes", "Memory of the node.", "gauge"},
	famNodeDiskUsed: {Namespace + "_node_disk_used_bytes", "Bytes used on the file system where the node runs jobs.", "gauge"},
	famNodeRx:       {Namespace + "_node_network_receive_bytes_total", "Bytes the node received since it started, all interfaces but loopback.", "counter"},
	famNodeTx:       {Namespace + "_node_network_transmit_bytes_total", "Bytes the node sent since it started, all interfaces but loopback.", "counter"},
	famNodeGPU:      {Namespace + "_node_gpu_utilization", "Fraction (0-1) of time one of the node's GPUs was busy, as nvidia-smi reports it (absent where the GPU does not).", "gauge"},
	famNodeGPUMem:   {Namespace + "_node_gpu_memory_used_bytes", "Memory in use on one of the node's GPUs.", "gauge"},
	famJobCPU:       {Namespace + "_job_cpu_utilization", "Fraction (0-1) of its nodes' CPU time a running job's processes used over the latest sampling interval, the mean over its nodes.", "gauge"},
	famJobMem:       {Namespace + "_job_memory_used_bytes", "Resident memory of a running job's processes, summed over its nodes.", "gauge"},
	famJobGPU:       {Namespace + "_job_gpu_utilization", "Fraction (0-1) of time the GPUs given to a running job were busy, the mean over them (absent for a job without GPUs).", "gauge"},
}

// UsageMetricNames are the names of the utilization families.
func UsageMetricNames() []string {
	out := make([]string, 0, numUsageFamilies)
	for _, f := range usageFamilies {
		out = append(out, f.name)
	}
	return out
}

// jobSum adds up a running job's samples over its nodes.
type jobSum struct {
	labels []byte // workspace="…",compute="…",job="…"
	nodes  int
	cpu    float64
	mem    int64
	gpu    float64
	gpus   int
}

// writeUsage appends the utilization families, as text exposition, to b.
func writeUsage(ctx context.Context, q store.Querier, b []byte) ([]byte, error) {
	rows, err := store.LatestUsages(ctx, q)
	if err != nil {
		return b, err
	}
	// About 110 bytes a series: sized once rather than grown.
	var fam [numUsageFamilies][]byte
	for i := range fam {
		fam[i] = make([]byte, 0, 110*len(rows))
	}
	prefix := map[string][]byte{} // compute key → `workspace="…",compute="…"`
	jobs := map[string]*jobSum{}
	var order []*jobSum
	var lv []byte
	line := func(f int, labels []byte, extra string, v float64) {
		x := append(fam[f], usageFamilies[f].name...)
		x = append(x, '{')
		x = append(x, labels...)
		x = append(x, extra...)
		x = append(x, '}', ' ')
		x = strconv.AppendFloat(x, v, 'g', -1, 64)
		fam[f] = append(x, '\n')
	}
	for _, r := range rows {
		p, ok := prefix[r.Compute]
		if !ok {
			ws, c := labels(r.Compute)
			p = promtext.AppendLabel(append(promtext.AppendLabel(nil, "workspace", ws), ','), "compute", c)
			prefix[r.Compute] = p
		}
		if r.Job != "" {
			// By labels, not uid: jobs of the same name in two resource
			// groups' workspaces of the same name share a series.
			k := r.Compute + "\x00" + r.JobName
			s := jobs[k]
			if s == nil {
				s = &jobSum{labels: promtext.AppendLabel(append(append([]byte(nil), p...), ','), "job", r.JobName)}
				jobs[k] = s
				order = append(order, s)
			}
			s.nodes++
			s.cpu += r.CPU
			s.mem += r.MemoryUsed
			agentapi.EachGPU(r.GPUs, func(_ string, u float64, ok bool, _ string) {
				if ok {
					s.gpu += u
					s.gpus++
				}
			})
			continue
		}
		lv = promtext.AppendLabel(append(append(lv[:0], p...), ','), "node", r.Node)
		line(famNodeCPU, lv, "", r.CPU)
		line(famNodeMemUsed, lv, "", float64(r.MemoryUsed))
		line(famNodeMemTotal, lv, "", float64(r.MemoryTotal))
		line(famNodeDiskUsed, lv, "", float64(r.DiskUsed))
		line(famNodeRx, lv, "", float64(r.NetworkRx))
		line(famNodeTx, lv, "", float64(r.NetworkTx))
		last := -1
		agentapi.EachGPU(r.GPUs, func(idx string, u float64, ok bool, mem string) {
			n, err := strconv.Atoi(idx)
			if err != nil || n <= last {
				return // out of order or repeated: a series twice would be invalid
			}
			last = n
			extra := `,gpu="` + idx + `"`
			if ok {
				line(famNodeGPU, lv, extra, u)
			}
			if m, err := strconv.ParseFloat(mem, 64); err == nil {
				line(famNodeGPUMem, lv, extra, m)
			}
		})
	}
	for _, s := range order {
		line(famJobCPU, s.labels, "", s.cpu/float64(s.nodes))
		line(famJobMem, s.labels, "", float64(s.mem))
		if s.gpus > 0 {
			line(famJobGPU, s.labels, "", s.gpu/float64(s.gpus))
		}
	}
	n := 0
	for i := range fam {
		n += len(fam[i]) + 512
	}
	b = slices.Grow(b, n)
	for i, f := range usageFamilies {
		if len(fam[i]) == 0 {
			continue
		}
		b = append(b, "# HELP "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = append(b, f.help...)
		b = append(b, "\n# TYPE "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = append(b, f.typ...)
		b = append(b, '\n')
		b = append(b, fam[i]...)
	}
	return b, nil
}

// textFormat is the exposition format the handler answers in: the
// registry's families and the utilization families in one text body.
const textFormat = "text/plain; version=0.0.4; charset=utf-8"

// handler serves the registry's families, then the utilization
// families, as text; gzipped when the scraper accepts it. A store read
// that fails fails the scrape (500): a partial exposition would read as
// zeros.
type handler struct {
	m  *Metrics
	db *store.DB // nil: no utilization
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.m.scrapeTimeout)
	defer cancel()
	body, err := h.m.reg.Append(ctx, nil)
	if err == nil && h.db != nil {
		body, err = writeUsage(ctx, h.db.Q(), body)
	}
	if err != nil {
		h.m.log.Warn("metrics scrape", "err", err)
		http.Error(w, "An error has occurred while reading metrics from the store:\n\n"+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", textFormat)
	if r.Method == http.MethodHead {
		return
	}
	var out io.Writer = w
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = gz
	}
	_, _ = out.Write(body)
}
