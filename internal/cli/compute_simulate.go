package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/sim"
)

// newComputeSimulateCmd replays a cluster's own job history under other
// settings: "what would this cluster have cost with idle 600 s or max 8?"
func newComputeSimulateCmd(g *globals) *cobra.Command {
	def := sim.DefaultConfig()
	f := simFlags{tier: "dedicated", policy: def.Policy, delayWeight: def.Adaptive.DelayWeight,
		provisionDelay: def.Provision.String(), deletionDelay: def.Deletion.String(), seed: def.Seed}
	f.queueDefaults()
	var name string
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Replay a cluster's own job history under other settings (cost and queue delay)",
		Long: `Replay the jobs that ran on a cluster through the same scheduler and
autoscaler on a virtual clock, with the cluster's settings unless flags
change them, and report cost and queue delay (see 'cumulus sim').`,
		Example: `  cumulus compute simulate -n cpu-cluster --sweep idle=0,120,600
  cumulus compute simulate -n cpu-cluster --max 8 --provision-delay 240s±60s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			comp, err := c.GetCompute(cmd.Context(), name)
			if err != nil {
				return err
			}
			jobs, err := c.ListJobs(cmd.Context(), "")
			if err != nil {
				return err
			}
			csv, n := historyTrace(comp, jobs)
			if n == 0 {
				return fmt.Errorf("compute %s has no finished jobs to replay", name)
			}
			dir, err := os.MkdirTemp("", "cumulus-history")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			f.trace = filepath.Join(dir, name+".csv")
			if err := os.WriteFile(f.trace, []byte(csv), 0o600); err != nil {
				return err
			}
			f.fromCompute(comp, cmd.Flags().Changed)
			f.oneCluster = true
			if set := cmd.Flags().Changed; !set("provision-delay") || !set("deletion-delay") {
				// The delays this cluster's nodes had, so that the replay
				// under its own settings costs what it really cost.
				evs, err := c.ComputeEvents(cmd.Context(), name, client.EventQuery{Types: []string{api.EventNodeReady, api.EventNodeLeaving, api.EventNodeRemoved}})
				if err != nil {
					return err
				}
				if p, d, ok := observedDelays(evs); ok {
					if !set("provision-delay") {
						f.provisionDelay = p
					}
					if !set("deletion-delay") {
						f.deletionDelay = d
					}
					fmt.Fprintf(g.stderr, "Using the delays its nodes had: provisioning %s, removal %s\n", f.provisionDelay, f.deletionDelay)
				}
			}
			fmt.Fprintf(g.stderr, "Replaying %d jobs of compute %s\n", n, name)
			return runSim(g, &f)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	f.register(cmd.Flags())
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// fromCompute gives the flags that were not set the compute's own
// settings: size, tier, scale settings and idle policy.
func (f *simFlags) fromCompute(comp api.Compute, set func(string) bool) {
	min, max, idle := comp.Scale()
	if !set("size") {
		f.size = comp.Aml().VMSize
	}
	if !set("tier") && comp.Aml().VMPriority == api.PriorityLowPriority {
		f.tier = "low_priority"
	}
	if !set("min") {
		f.min = min
	}
	if !set("max") {
		f.max = max
	}
	if !set("idle") {
		f.idle = fmt.Sprintf("%gs", idle.Seconds())
	}
	if w, ok := comp.AdaptiveIdle(); ok {
		if !set("policy") {
			f.policy = sim.PolicyAdaptive
		}
		if !set("delay-weight") {
			f.delayWeight = w
		}
	}
	q := comp.Queue()
	if q.FairShare && !set("queue-policy") {
		f.queuePolicy = sim.QueueFair
		if !set("half-life") {
			f.halfLife = q.HalfLife.String()
		}
		if !set("weight") {
			for g, w := range q.Weights {
				f.weights = append(f.weights, fmt.Sprintf("%s=%g", g, w))
			}
		}
	}
	if q.Preemption != api.PreemptNone && !set("preemption") {
		f.preemption = map[string]string{api.PreemptLowerPriority: sim.PreemptLowerPriority, api.PreemptOverShare: sim.PreemptOverShare}[q.Preemption]
		if !set("min-runtime") {
			f.minRuntime = q.MinRuntime.String()
		}
	}
}

// historyTrace turns a compute's finished jobs into a trace CSV: when each
// was queued (seconds from the first), how long it ran, on how many nodes,
// and its team (vc): its fair-share group, else who submitted it, so that
// --queue-policy fair replays the compute shared by them.
func historyTrace(comp api.Compute, jobs []api.Job) (string, int) {
	type row struct {
		submit time.Time
		dur    time.Duration
		nodes  int
		team   string
	}
	var rows []row
	for _, j := range jobs {
		p := j.Properties
		if !strings.EqualFold(p.ComputeID, comp.ID) || p.StartTime == nil || p.EndTime == nil || len(p.History) == 0 {
			continue
		}
		submit := p.History[0].Time
		dur := p.EndTime.Sub(*p.StartTime)
		if a := p.Attempts; len(a) > 0 && a[len(a)-1].Started != nil && a[len(a)-1].Ended != nil {
			dur = a[len(a)-1].Ended.Sub(*a[len(a)-1].Started) // the run that finished, not the waits between attempts
		}
		team := "-"
		if g := p.FairShareGroup; g != nil {
			team = comp.Queue().GroupName(*g)
		} else if j.SystemData != nil && j.SystemData.CreatedBy != "" {
			team = j.SystemData.CreatedBy
		}
		rows = append(rows, row{submit, max(dur, time.Second), j.InstanceCount(), team})
	}
	sort.Slice(rows, func(i, k int) bool { return rows[i].submit.Before(rows[k].submit) })
	var b strings.Builder
	b.WriteString("submit_time_s,duration_s,nodes,vc\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%.3f,%.3f,%d,%s\n", r.submit.Sub(rows[0].submit).Seconds(), r.dur.Seconds(), r.nodes, csvField(r.team))
	}
	return b.String(), len(rows)
}

// observedDelays reads a cluster's history for the delays the simulator
// takes: request to ready (NodeReady's duration) as its median ± half the
// 10–90 % spread, and removal decided to gone (NodeLeaving to NodeRemoved
// of each node) as its median. ok is false without a ready node.
func observedDelays(evs []api.Event) (provision, deletion string, ok bool) {
	var ready, gone []float64
	leaving := map[string]time.Time{}
	for i := len(evs) - 1; i >= 0; i-- { // oldest first
		e := evs[i]
		switch e.Type {
		case api.EventNodeReady:
			if e.DurationSeconds != nil {
				ready = append(ready, *e.DurationSeconds)
			}
		case api.EventNodeLeaving:
			leaving[e.Node] = e.Time
		case api.EventNodeRemoved:
			if t, ok := leaving[e.Node]; ok && !e.Time.Before(t) {
				gone = append(gone, e.Time.Sub(t).Seconds())
			}
		}
	}
	if len(ready) == 0 {
		return "", "", false
	}
	slices.Sort(ready)
	slices.Sort(gone)
	q := func(xs []float64, p float64) float64 { return xs[int(p*float64(len(xs)-1))] }
	med := q(ready, 0.5)
	spread := min((q(ready, 0.9)-q(ready, 0.1))/2, med)
	provision = fmt.Sprintf("%.3fs±%.3fs", med, spread)
	deletion = "0s"
	if len(gone) > 0 {
		deletion = fmt.Sprintf("%.3fs", q(gone, 0.5))
	}
	return provision, deletion, true
}

// csvField quotes a CSV field when it needs it.
func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}
