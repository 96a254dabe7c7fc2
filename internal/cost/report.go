package cost

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Ways to group a report.
const (
	ByCompute   = "compute"
	ByJob       = "job"
	ByWorkspace = "workspace"
	ByTag       = "tag" // By "tag:KEY"
)

// Keys of the rows that are not a job or a tag value.
const (
	IdleRow     = "(idle)"     // by job: the nodes' time no job held
	UntaggedRow = "(untagged)" // by tag: neither the job nor its compute has the tag
)

// ParseBy reads compute, job, workspace or tag:KEY.
func ParseBy(s string) (kind, tag string, err error) {
	switch k := strings.ToLower(s); {
	case k == ByCompute || k == ByJob || k == ByWorkspace:
		return k, "", nil
	case strings.HasPrefix(k, ByTag+":") && len(s) > len(ByTag)+1:
		return ByTag, s[len(ByTag)+1:], nil
	}
	return "", "", fmt.Errorf("by %q is not one of compute, job, workspace, tag:KEY", s)
}

// Input is what a report is made of: the ledger of the period, the
// computes' and jobs' names and tags, and prices.
type Input struct {
	Nodes        []store.NodeBill
	Runs         []store.JobRun
	Since, Until time.Time // Until no later than now
	Prices       Prices
	Computes     map[string]Compute           // by compute key
	JobTags      map[string]map[string]string // by job uid
}

// Compute names a compute of the ledger.
type Compute struct {
	Workspace, Name string
	Tags            map[string]string
}

// Make computes a report grouped by kind (and tag, for ByTag).
func Make(in Input, kind, tag string) api.CostReport {
	r := api.CostReport{Currency: in.Prices.Currency, Since: in.Since, Until: in.Until, By: kind, Rows: []api.CostRow{}}
	if kind == ByTag {
		r.By = ByTag + ":" + tag
	}
	type rowKey struct{ ws, comp, key string }
	rows := make(map[rowKey]*api.CostRow, len(in.Computes)+1)
	add := func(key, ws, comp string, busy bool, hours, price float64) {
		k := rowKey{ws, comp, key}
		row := rows[k]
		if row == nil {
			row = &api.CostRow{Key: key, Workspace: ws, Compute: comp}
			rows[k] = row
		}
		for _, x := range []*api.CostRow{row, &r.Total} {
			x.NodeHours += hours
			x.Cost += hours * price
			if busy {
				x.BusyNodeHours += hours
				x.BusyCost += hours * price
			} else {
				x.IdleNodeHours += hours
				x.IdleCost += hours * price
			}
		}
	}
	runsOn := make(map[string][]int32, len(in.Nodes)) // node → indexes of in.Runs
	for i, run := range in.Runs {
		for _, n := range run.Nodes {
			runsOn[n] = append(runsOn[n], int32(i))
		}
	}
	unpriced := map[string]bool{}
	for _, n := range in.Nodes {
		life := span(n.Created, n.Removed, in.Since, in.Until)
		if life.empty() {
			continue
		}
		price, ok := in.Prices.Hourly(n.VMSize, n.Priority)
		if !ok {
			unpriced[n.VMSize] = true
		}
		c := in.Computes[n.Compute]
		if c.Name == "" {
			c.Name = n.Compute[strings.LastIndex(n.Compute, "/")+1:] // a compute since deleted
		}
		busyTotal := 0.0
		for _, i := range runsOn[n.Node] {
			run := &in.Runs[i]
			if store.Key(run.Compute) != n.Compute {
				continue
			}
			held := life.and(span(run.Started, run.Ended, in.Since, in.Until))
			h := min(held.hours(), life.hours()-busyTotal)
			if h <= 0 {
				continue
			}
			busyTotal += h
			key, ws, comp := group(kind, tag, c, run, in.JobTags)
			add(key, ws, comp, true, h, price)
		}
		key, ws, comp := group(kind, tag, c, nil, in.JobTags)
		add(key, ws, comp, false, life.hours()-busyTotal, price)
	}
	r.Rows = make([]api.CostRow, 0, len(rows))
	for _, row := range rows {
		r.Rows = append(r.Rows, *row)
	}
	slices.SortFunc(r.Rows, func(a, b api.CostRow) int {
		return cmp.Or(cmp.Compare(b.Cost, a.Cost), strings.Compare(a.Workspace, b.Workspace), strings.Compare(a.Compute, b.Compute),
			strings.Compare(a.Key, b.Key))
	})
	r.Total.Key = "total"
	for s := range unpriced {
		r.Unpriced = append(r.Unpriced, s)
	}
	slices.Sort(r.Unpriced)
	return r
}

// interval is [from, to) in Unix milliseconds.
type interval struct{ from, to int64 }

// span is [start, end) clipped to [since, until); a zero end is open
// (until).
func span(start, end, since, until time.Time) interval {
	to := until
	if !end.IsZero() && end.Before(until) {
		to = end
	}
	from := start
	if since.After(from) {
		from = since
	}
	return interval{from.UnixMilli(), to.UnixMilli()}
}

func (i interval) and(j interval) interval {
	return interval{max(i.from, j.from), min(i.to, j.to)}
}

func (i interval) empty() bool { return i.to <= i.from }

func (i interval) hours() float64 {
	if i.empty() {
		return 0
	}
	return float64(i.to-i.from) / float64(time.Hour/time.Millisecond)
}

// Cents rounds an amount to the cent.
func Cents(v float64) float64 { return math.Round(v*100) / 100 }

// group is the row a charge of compute c goes to: a run's busy time, or
// (run nil) the compute's idle time. By tag, busy time goes to the job's
// tag value if it has one, else the compute's; idle time to the compute's.
func group(kind, tag string, c Compute, run *store.JobRun, jobTags map[string]map[string]string) (key, ws, comp string) {
	switch kind {
	case ByWorkspace:
		return c.Workspace, c.Workspace, ""
	case ByJob:
		if run == nil {
			return IdleRow, c.Workspace, c.Name
		}
		return run.Name, c.Workspace, c.Name
	case ByTag:
		v, ok := "", false
		if run != nil {
			v, ok = jobTags[run.Job][tag]
		}
		if !ok {
			v, ok = c.Tags[tag]
		}
		if !ok {
			v = UntaggedRow
		}
		return v, "", ""
	}
	return c.Name, c.Workspace, c.Name // ByCompute
}
