package cli

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// QueuePolicySpec is the queue_policy block of the YAML (a Cumulus
// extension): kind fifo (Azure's) or fair_share, the grouping, the
// groups' weights, the usage half-life, and preemption with its minimum
// runtime. Durations are Go's (24h, 10m) or ISO-8601 (PT24H).
type QueuePolicySpec struct {
	Kind          string             `yaml:"kind" json:"kind"`
	FairShareBy   string             `yaml:"fair_share_by,omitempty" json:"fair_share_by,omitempty"`
	Weights       map[string]float64 `yaml:"weights,omitempty" json:"weights,omitempty"`
	UsageHalfLife string             `yaml:"usage_half_life,omitempty" json:"usage_half_life,omitempty"`
	Preemption    string             `yaml:"preemption,omitempty" json:"preemption,omitempty"`
	MinRuntime    string             `yaml:"min_runtime,omitempty" json:"min_runtime,omitempty"`
}

var (
	queueKinds = map[string]string{"fifo": api.QueuePolicyFifo, "fair": api.QueuePolicyFairShare, "fair_share": api.QueuePolicyFairShare,
		"fairshare": api.QueuePolicyFairShare}
	preemptionModes = map[string]string{"none": api.PreemptNone, "lower_priority": api.PreemptLowerPriority, "over_share": api.PreemptOverShare}
)

// toARM converts the YAML queue policy; the server checks the rest.
func (s QueuePolicySpec) toARM() (*api.QueuePolicy, error) {
	kind, ok := queueKinds[strings.ToLower(strings.ReplaceAll(s.Kind, "-", "_"))]
	switch {
	case s.Kind == "":
		return nil, fmt.Errorf("queue_policy needs a kind (--queue-policy): fifo or fair_share")
	case !ok:
		return nil, fmt.Errorf("queue_policy kind %q is not one of fifo, fair_share", s.Kind)
	}
	p := &api.QueuePolicy{Kind: kind, FairShareBy: s.FairShareBy, Weights: s.Weights}
	if s.Preemption != "" {
		mode, ok := preemptionModes[strings.ToLower(strings.ReplaceAll(s.Preemption, "-", "_"))]
		if !ok {
			return nil, fmt.Errorf("queue_policy preemption %q is not one of none, lower_priority, over_share", s.Preemption)
		}
		p.Preemption = mode
	}
	var err error
	if p.UsageHalfLife, err = isoDuration("usage_half_life", s.UsageHalfLife); err != nil {
		return nil, err
	}
	if p.MinRuntime, err = isoDuration("min_runtime", s.MinRuntime); err != nil {
		return nil, err
	}
	// As the server will store it (defaults filled), so that applying a
	// file twice changes nothing.
	if err := api.PrepareQueuePolicy(p); err != nil {
		return nil, fmt.Errorf("queue_policy: %w", err)
	}
	return p, nil
}

// queuePolicySpec is the YAML of a compute's queue policy.
func queuePolicySpec(p *api.QueuePolicy) *QueuePolicySpec {
	if p == nil {
		return nil
	}
	s := &QueuePolicySpec{Kind: "fifo", FairShareBy: p.FairShareBy, Weights: p.Weights,
		UsageHalfLife: goDuration(p.UsageHalfLife), MinRuntime: goDuration(p.MinRuntime)}
	if p.Kind == api.QueuePolicyFairShare {
		s.Kind = "fair_share"
	}
	for k, v := range preemptionModes {
		if v == p.Preemption && v != api.PreemptNone {
			s.Preemption = k
		}
	}
	return s
}

// isoDuration turns a duration as people write it (24h, 10m, 600) into
// ISO-8601; one written in ISO-8601 is kept.
func isoDuration(field, s string) (string, error) {
	if s == "" || strings.HasPrefix(s, "P") {
		return s, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, serr := strconv.ParseFloat(s, 64)
		if serr != nil {
			return "", fmt.Errorf("%s %q is not a duration (such as 24h, 10m or PT24H)", field, s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return "", fmt.Errorf("%s %q is negative", field, s)
	}
	return api.FormatDuration(d), nil
}

// goDuration shows an ISO-8601 duration as Go writes it, without zero
// units (24h, 10m).
func goDuration(iso string) string {
	d, err := api.ParseDuration(iso)
	if err != nil || iso == "" {
		return iso
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// queueFlags are the queue policy's flags on create and update.
type queueFlags struct {
	policy, by, halfLife, preemption, minRuntime string
	weights                                      []string
}

func (f *queueFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.policy, "queue-policy", "", "fifo (first come, first served, as Azure) or fair (fair share between the principals or teams that submit)")
	fl.StringVar(&f.by, "fair-share-by", "", "fair share groups jobs by principal (default) or by a tag's value: tag:KEY (e.g. tag:team)")
	fl.StringArrayVar(&f.weights, "fair-share-weight", nil, "a group's weight as GROUP=W (repeatable; default 1)")
	fl.StringVar(&f.halfLife, "usage-half-life", "", "fair share: how fast past usage is forgotten (default 24h)")
	fl.StringVar(&f.preemption, "preemption", "", "none (default), lower_priority, or over_share (fair share): stop running jobs for waiting ones")
	fl.StringVar(&f.minRuntime, "min-runtime", "", "with preemption: how long a job runs before it may be preempted (default 10m)")
}

// set reports whether any queue policy flag was given.
func (f *queueFlags) set(set func(string) bool) bool {
	for _, n := range []string{"queue-policy", "fair-share-by", "fair-share-weight", "usage-half-life", "preemption", "min-runtime"} {
		if set(n) {
			return true
		}
	}
	return false
}

// apply puts the flags given onto p: --queue-policy starts a new policy,
// the others change the one there is (the file's, or the compute's).
func (f *queueFlags) apply(set func(string) bool, p *QueuePolicySpec) (*QueuePolicySpec, error) {
	if !f.set(set) {
		return p, nil
	}
	if set("queue-policy") {
		p = &QueuePolicySpec{Kind: f.policy}
	}
	if p == nil {
		return nil, fmt.Errorf("give --queue-policy fifo or fair with the queue policy's other flags")
	}
	if set("fair-share-by") {
		p.FairShareBy = f.by
	}
	if set("fair-share-weight") {
		p.Weights = map[string]float64{}
		for _, w := range f.weights {
			g, v, ok := strings.Cut(w, "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || g == "" || err != nil {
				return nil, fmt.Errorf("--fair-share-weight %q: want GROUP=W, such as team-a=2", w)
			}
			p.Weights[g] = x
		}
	}
	if set("usage-half-life") {
		p.UsageHalfLife = f.halfLife
	}
	if set("preemption") {
		p.Preemption = f.preemption
	}
	if set("min-runtime") {
		p.MinRuntime = f.minRuntime
	}
	return p, nil
}

// FairShareView is where each group of a fair-share compute stands, as
// `compute show` prints it.
type FairShareView struct {
	Unit   string      `json:"unit" yaml:"unit"`
	Groups []GroupView `json:"groups" yaml:"groups"`
}

// GroupView is one fair-share group.
type GroupView struct {
	Name        string  `json:"name" yaml:"name"`
	Weight      float64 `json:"weight" yaml:"weight"`
	UsageHours  float64 `json:"usage_hours" yaml:"usage_hours"`
	RecentNodes float64 `json:"recent_nodes" yaml:"recent_nodes"`
	Nodes       int     `json:"nodes" yaml:"nodes"`
	Share       float64 `json:"share" yaml:"share"`
	QueuedJobs  int     `json:"queued_jobs" yaml:"queued_jobs"`
	QueuedNodes int     `json:"queued_nodes" yaml:"queued_nodes"`
}

func fairShareView(fs *api.FairShareStatus) *FairShareView {
	if fs == nil {
		return nil
	}
	v := &FairShareView{Unit: fs.Unit, Groups: []GroupView{}}
	for _, g := range fs.Groups {
		v.Groups = append(v.Groups, GroupView{Name: g.Display, Weight: g.Weight, UsageHours: g.UsageHours, RecentNodes: g.RecentNodes,
			Nodes: g.Nodes, Share: g.Share, QueuedJobs: g.QueuedJobs, QueuedNodes: g.QueuedNodes})
	}
	return v
}

// groupsTable is where each group stands.
func groupsTable(v *FairShareView) *table {
	unit := strings.ToUpper(v.Unit)
	t := &table{header: []string{"GROUP", "WEIGHT", "USAGE_" + unit + "_H", "RECENT_NODES", "NODES", "SHARE", "WAITING_JOBS", "WAITING_NODES"}}
	for _, g := range v.Groups {
		t.add(g.Name, strconv.FormatFloat(g.Weight, 'g', -1, 64), f1(g.UsageHours), f1(g.RecentNodes), g.Nodes, api.Nodes(g.Share),
			g.QueuedJobs, g.QueuedNodes)
	}
	return t
}

func newQueueCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Show a compute's queue in the order its scheduler will start it"}
	cmd.AddCommand(newQueueShowCmd(g))
	return cmd
}

func newQueueShowCmd(g *globals) *cobra.Command {
	var name string
	var top int
	cmd := &cobra.Command{
		Use:   "show",
		Short: "List a compute's queued jobs in the order its scheduler will start them, and why each waits",
		Long: `List a compute's queued jobs in the order its scheduler will start them:
by priority then submission (FIFO), or under fair share the job of the
group furthest below its share first, each job counted as started when
its turn comes. Each job says why it waits; on a fair-share compute the
groups' usage, share and waiting jobs come first.`,
		Example: `  cumulus queue show -n shared
  cumulus queue show -n shared --top 20 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.format("table")
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			q, err := c.GetQueue(cmd.Context(), name, top)
			if err != nil {
				return err
			}
			if format != "table" || g.queryExpr != "" {
				return g.printValue(format, q)
			}
			kind := "fifo"
			if q.Policy.Kind == api.QueuePolicyFairShare {
				kind = "fair share by " + q.Policy.FairShareBy
			}
			if q.Policy.Preemption != "" && q.Policy.Preemption != api.PreemptNone {
				kind += ", preemption " + strings.ToLower(q.Policy.Preemption) + " after " + goDuration(q.Policy.MinRuntime)
			}
			fmt.Fprintf(g.stdout, "Compute %s: %s; %d queued\n\n", q.Compute, kind, q.Queued)
			if v := fairShareView(q.FairShare); v != nil && len(v.Groups) > 0 {
				if err := groupsTable(v).print(g.stdout); err != nil {
					return err
				}
				fmt.Fprintln(g.stdout)
			}
			t := &table{header: []string{"POS", "JOB", "GROUP", "PRIORITY", "NODES", "QUEUED", "WHY"}}
			for _, e := range q.Jobs {
				t.add(e.Position, e.Name, cmp.Or(e.Display, "-"), e.Priority, e.Nodes, e.Queued.Local().Format("2006-01-02 15:04:05"), cmp.Or(e.Reason, "-"))
			}
			return t.print(g.stdout)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	cmd.Flags().IntVar(&top, "top", 0, "list at most this many jobs (default 100, at most 1000)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}
