package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cumulus-ml/cumulus/internal/sim"
)

// simFlags are the flags of `cumulus sim`.
type simFlags struct {
	trace          string
	jobs           int
	size           string
	tier           string
	min, max       int
	idle           string
	policy         string
	delayWeight    float64
	provisionDelay string
	deletionDelay  string
	evictionRate   float64
	quotaCores     int
	oneCluster     bool
	vc             string
	seed           uint64
	sweep          string
	plot           string
	byCluster      bool
	until          string
	queuePolicy    string
	preemption     string
	minRuntime     string
	halfLife       string
	weights        []string
}

func newSimCmd(g *globals) *cobra.Command {
	def := sim.DefaultConfig()
	f := simFlags{
		size: def.Size, tier: "dedicated", min: def.Min, max: def.Max, idle: fmt.Sprintf("%gs", def.IdleTimeout.Seconds()), policy: def.Policy,
		delayWeight: def.Adaptive.DelayWeight, provisionDelay: def.Provision.String(), deletionDelay: def.Deletion.String(),
		seed: def.Seed, jobs: 20000,
	}
	f.queueDefaults()
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay a job trace through the scheduler and autoscaler on a virtual clock",
		Long: `Replay a job trace through the same scheduler and autoscaler code that
'cumulus serve' runs, with a virtual clock and a simulated provider, and
report what the setting costs and how long jobs wait. Nothing sleeps.

The trace is a CSV file with a header: submit_time_s and duration_s
(required), nodes, gpus, vc and status (optional; other columns are
ignored). Without nodes, a job takes ceil(gpus / GPUs per node of --size)
nodes. Each vc value is a cluster of its own (all with the same setting,
sharing --quota-cores); --one-cluster puts every job in one cluster.
--trace synthetic:bursty[:N] or synthetic:diurnal[:N] generates a trace
instead (see 'cumulus sim generate').

Billed node-hours run from a node's request until its deletion is done:
provisioning + busy + idle + deleting. Queue delay is the time a completed
job spent queued; a cold start is a job that started on a node created
after it was queued. See docs/simulator.md.`,
		Example: `  cumulus sim --trace traces/philly-2017-10-03_to_11-08.csv --size Standard_NC6s_v3 --max 1000
  cumulus sim --trace traces/philly-2017-10-03_to_11-08.csv --size Standard_NC6s_v3 --max 1000 \
      --provision-delay 240s±60s --sweep idle=0,60,120,300,600,1800,adaptive --plot tradeoff.svg
  cumulus sim --trace synthetic:bursty --size Standard_NC6s_v3 --policy adaptive --plot timeline.svg -o json
  cumulus sim generate bursty --jobs 100000 --seed 1 > bursty.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(g, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", "", "trace CSV file, or synthetic:bursty[:N] / synthetic:diurnal[:N] (required)")
	fl.IntVar(&f.jobs, "jobs", f.jobs, "jobs in a synthetic trace without :N")
	f.register(fl)
	cmd.AddCommand(newSimGenerateCmd(g))
	return cmd
}

// register adds the settings flags shared by 'sim' and 'compute simulate'.
func (f *simFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.size, "size", f.size, "VM size of every cluster (cumulus compute list-sizes)")
	fl.StringVar(&f.tier, "tier", f.tier, "dedicated or low_priority")
	fl.IntVar(&f.min, "min", f.min, "minNodeCount of each cluster")
	fl.IntVar(&f.max, "max", f.max, "maxNodeCount of each cluster")
	fl.StringVar(&f.idle, "idle", f.idle, "nodeIdleTimeBeforeScaleDown (fixed policy; the adaptive policy's fallback)")
	fl.StringVar(&f.policy, "policy", f.policy, "idle policy: fixed or adaptive")
	fl.Float64Var(&f.delayWeight, "delay-weight", f.delayWeight, "adaptive policy: node-seconds one second of a job's wait is worth")
	fl.StringVar(&f.provisionDelay, "provision-delay", f.provisionDelay, "node request to ready: D or D±J (uniform)")
	fl.StringVar(&f.deletionDelay, "deletion-delay", f.deletionDelay, "node removal to gone, billed: D or D±J")
	fl.Float64Var(&f.evictionRate, "eviction-rate", 0, "low-priority evictions per node-hour")
	fl.IntVar(&f.quotaCores, "quota-cores", 0, "cores all clusters share (0: unlimited)")
	fl.BoolVar(&f.oneCluster, "one-cluster", false, "one cluster for the whole trace, ignoring vc")
	fl.StringVar(&f.vc, "vc", "", "simulate only this vc")
	fl.Uint64Var(&f.seed, "seed", f.seed, "seed of the random delays, evictions and synthetic traces")
	fl.StringVar(&f.sweep, "sweep", "", "run several settings side by side: KEY=V1,V2,… (KEY: "+strings.Join(sim.SweepKeys, ", ")+"); idle also takes 'adaptive'")
	fl.StringVar(&f.plot, "plot", "", "write an SVG: nodes against demand over time, or for a sweep cost against queue delay")
	fl.BoolVar(&f.byCluster, "by-cluster", false, "a table row per cluster (vc) too")
	fl.StringVar(&f.until, "until", "", "only the jobs submitted before this time of the trace: a duration (432h) or a part of its span (50%)")
	fl.StringVar(&f.queuePolicy, "queue-policy", f.queuePolicy, "fifo, or fair: fair share between the trace's vc values (its teams) on one cluster")
	fl.StringVar(&f.preemption, "preemption", f.preemption, "none, lower_priority, or over_share (with --queue-policy fair)")
	fl.StringVar(&f.minRuntime, "min-runtime", f.minRuntime, "with preemption: how long an attempt runs before it may be preempted")
	fl.StringVar(&f.halfLife, "half-life", f.halfLife, "fair share: half-life of the teams' decayed usage")
	fl.StringArrayVar(&f.weights, "weight", nil, "fair share: a team's weight as VC=W (repeatable; default 1)")
}

// queueDefaults sets the queue policy flags' defaults.
func (f *simFlags) queueDefaults() {
	def := sim.DefaultConfig()
	f.queuePolicy, f.preemption = def.Queue, def.Preemption
	f.minRuntime, f.halfLife = def.MinRuntime.String(), def.HalfLife.String()
}

// config turns the flags into a sim.Config.
func (f *simFlags) config() (sim.Config, error) {
	c := sim.DefaultConfig()
	c.Size, c.Min, c.Max, c.Policy = f.size, f.min, f.max, f.policy
	c.Adaptive.DelayWeight = f.delayWeight
	c.EvictionRate, c.QuotaCores, c.OneCluster, c.Seed = f.evictionRate, f.quotaCores, f.oneCluster, f.seed
	var err error
	if c.LowPriority, err = sim.ParseTier(f.tier); err != nil {
		return c, err
	}
	if c.IdleTimeout, err = sim.ParseDuration(f.idle); err != nil {
		return c, fmt.Errorf("--idle: %w", err)
	}
	if c.Provision, err = sim.ParseDelay(f.provisionDelay); err != nil {
		return c, fmt.Errorf("--provision-delay: %w", err)
	}
	if c.Deletion, err = sim.ParseDelay(f.deletionDelay); err != nil {
		return c, fmt.Errorf("--deletion-delay: %w", err)
	}
	c.Queue, c.Preemption = f.queuePolicy, f.preemption
	if c.MinRuntime, err = sim.ParseDuration(f.minRuntime); err != nil {
		return c, fmt.Errorf("--min-runtime: %w", err)
	}
	if c.HalfLife, err = sim.ParseDuration(f.halfLife); err != nil {
		return c, fmt.Errorf("--half-life: %w", err)
	}
	for _, w := range f.weights {
		team, v, ok := strings.Cut(w, "=")
		x, err := strconv.ParseFloat(v, 64)
		if !ok || team == "" || err != nil {
			return c, fmt.Errorf("--weight %q: want VC=W, such as 6214e9=2", w)
		}
		if c.Weights == nil {
			c.Weights = map[string]float64{}
		}
		c.Weights[team] = x
	}
	c.Label = c.Policy
	if c.Policy == sim.PolicyFixed {
		c.Label = "idle=" + f.idle
	}
	if c.Queue != sim.QueueFifo || c.Preemption != sim.PreemptNone {
		c.Label = "queue=" + c.Queue
		if c.Preemption != sim.PreemptNone {
			c.Label += ",preemption=" + c.Preemption
		}
	}
	return c, nil
}

func (f *simFlags) load() (*sim.Trace, error) {
	if f.trace == "" {
		return nil, fmt.Errorf("--trace is required: a CSV file, or synthetic:bursty / synthetic:diurnal")
	}
	var t *sim.Trace
	kind, n, ok, err := sim.ParseSynthetic(f.trace, f.jobs)
	switch {
	case err != nil:
		return nil, err
	case ok:
		t, err = sim.Synthetic(kind, n, f.seed)
	default:
		t, err = sim.LoadTrace(f.trace)
	}
	if err != nil {
		return nil, err
	}
	if f.vc != "" {
		if !t.HasVC {
			return nil, fmt.Errorf("--vc %s: the trace has no vc column", f.vc)
		}
		if t = t.Filter(f.vc); len(t.Jobs) == 0 {
			return nil, fmt.Errorf("--vc %s: no job of the trace has that vc", f.vc)
		}
	}
	if f.until != "" {
		until, err := untilOf(f.until, t)
		if err != nil {
			return nil, fmt.Errorf("--until: %w", err)
		}
		if t = t.Until(until); len(t.Jobs) == 0 {
			return nil, fmt.Errorf("--until %s: no job of the trace was submitted before %v", f.until, until)
		}
	}
	if f.queuePolicy == sim.QueueFair && !t.HasVC {
		return nil, fmt.Errorf("--queue-policy fair shares the cluster between the trace's teams, its vc column, which %s does not have", t.Name)
	}
	return t, nil
}

// untilOf reads --until: a duration, or a percentage of the trace's span.
func untilOf(s string, t *sim.Trace) (time.Duration, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		x, err := strconv.ParseFloat(p, 64)
		if err != nil || x <= 0 || x > 100 {
			return 0, fmt.Errorf("%q is not a percentage of the trace's span (such as 50%%)", s)
		}
		return time.Duration(float64(t.Span()) * x / 100), nil
	}
	return sim.ParseDuration(s)
}

func runSim(g *globals, f *simFlags) error {
	format, err := g.format("table")
	if err != nil {
		return err
	}
	base, err := f.config()
	if err != nil {
		return err
	}
	if err := base.Validate(); err != nil {
		return err
	}
	cfgs := []sim.Config{base}
	if f.sweep != "" {
		sw, err := sim.ParseSweep(f.sweep)
		if err != nil {
			return err
		}
		if cfgs, err = sw.Configs(base); err != nil {
			return err
		}
	} else if f.plot != "" {
		cfgs[0].Timeline = true
	}
	t, err := f.load()
	if err != nil {
		return err
	}
	results, err := sim.RunAll(t, cfgs, 0)
	if err != nil {
		return err
	}
	if f.plot != "" {
		if err := writePlot(f.plot, t.Name, results, f.sweep != ""); err != nil {
			return err
		}
	}
	for _, r := range results {
		r.Timeline = nil // for the plot only: too long to print
	}
	switch {
	case (format != "table" || g.queryExpr != "") && f.sweep == "":
		return g.printValue(format, results[0])
	case format != "table" || g.queryExpr != "":
		return g.printValue(format, results)
	}
	if err := simTable(results, f.byCluster).print(g.stdout); err != nil {
		return err
	}
	if t := groupTable(results); t != nil {
		fmt.Fprintln(g.stdout)
		return t.print(g.stdout)
	}
	return nil
}

// groupTable is the teams' figures of each setting, when they share a
// cluster: nil otherwise.
func groupTable(results []*sim.Result) *table {
	if len(results) == 0 || len(results[0].Groups) == 0 {
		return nil
	}
	unit := strings.ToUpper(results[0].Unit)
	t := &table{header: []string{"SETTING", "TEAM", "JOBS", "RECEIVED_" + unit + "_H", "ENTITLED_" + unit + "_H", "RATIO", "P50_S", "P95_S",
		"PREEMPTED", "LOST_" + unit + "_H"}}
	for _, r := range results {
		for _, g := range r.Groups {
			t.add(r.Label, g.Name, g.Jobs, f1(g.ReceivedHours), f1(g.EntitledHours), fmt.Sprintf("%.2f", g.Ratio),
				f1(g.QueueDelay.P50), f1(g.QueueDelay.P95), g.Preempted, f1(g.LostHours))
		}
		t.add(r.Label, "all", r.Total.Jobs, "", "", fmt.Sprintf("jain %.3f", r.Fairness.Jain), f1(r.Total.QueueDelay.P50), f1(r.Total.QueueDelay.P95),
			r.Total.Preemptions, f1(r.Total.LostNodeHours))
	}
	return t
}

func writePlot(path, title string, results []*sim.Result, sweep bool) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if sweep {
		err = sim.PlotTradeoff(out, title, results)
	} else {
		err = sim.PlotTimeline(out, title, results[0])
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// simTable is the results as a table: a row per setting (and per cluster).
func simTable(results []*sim.Result, byCluster bool) *table {
	t := &table{header: []string{"SETTING", "CLUSTER", "JOBS", "BILLED_NODE_H", "BUSY_NODE_H", "IDLE_NODE_H", "COST_USD",
		"DELAY_MEAN_S", "P50_S", "P90_S", "P99_S", "COLD_STARTS", "PEAK_NODES", "SCALE_UPS", "SCALE_DOWNS", "UTIL"}}
	row := func(label string, m sim.Metrics) {
		d := m.QueueDelay
		t.add(label, m.Cluster, m.Jobs, f1(m.BilledNodeHours), f1(m.BusyNodeHours), f1(m.IdleNodeHours), money(m.Cost),
			f1(d.Mean), f1(d.P50), f1(d.P90), f1(d.P99), m.ColdStarts, m.PeakNodes, m.ScaleUps, m.ScaleDowns, fmt.Sprintf("%.3f", m.Utilization))
	}
	for _, r := range results {
		row(r.Label, r.Total)
		if byCluster && len(r.Clusters) > 1 {
			for _, m := range r.Clusters {
				row(r.Label, m)
			}
		}
	}
	return t
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

func newSimGenerateCmd(g *globals) *cobra.Command {
	var jobs int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "generate bursty|diurnal",
		Short: "Write a synthetic job trace (CSV) to stdout",
		Long: `Write a synthetic job trace as CSV, the same for the same kind, --jobs and
--seed. bursty: four teams submitting sweeps of similar jobs and single
jobs; diurnal: two teams whose submissions follow the working day. See
docs/simulator.md.`,
		Example: `  cumulus sim generate bursty --jobs 100000 --seed 1 > bursty.csv`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := sim.Synthetic(args[0], jobs, seed)
			if err != nil {
				return err
			}
			return t.WriteCSV(g.stdout)
		},
	}
	cmd.Flags().IntVar(&jobs, "jobs", 20000, "number of jobs")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}
