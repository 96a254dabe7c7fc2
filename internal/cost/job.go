package cost

import (
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// JobNodeHours is the node time a job's attempts have held until now: each
// attempt's nodes from its assignment (or start) to its end, or the job's
// end, or now — the ledger's definition.
func JobNodeHours(p api.JobProperties, now time.Time) float64 {
	total := 0.0
	for _, a := range p.Attempts {
		start := a.Assigned
		if start == nil {
			start = a.Started
		}
		if start == nil {
			continue
		}
		end := now
		switch {
		case a.Ended != nil:
			end = *a.Ended
		case api.JobTerminal(p.Status) && p.EndTime != nil:
			end = *p.EndTime
		}
		if end.After(*start) {
			total += end.Sub(*start).Hours() * float64(len(a.Nodes))
		}
	}
	return total
}

// CapLeft is how long a job on nodes nodes at hourly per node may still
// run before its cost reaches maxCost, having spent spentHours of node
// time; ok is false when there is no cap to enforce (no limit or no
// price). A cap already reached leaves zero.
func CapLeft(maxCost, hourly, spentHours float64, nodes int) (time.Duration, bool) {
	if maxCost <= 0 || hourly <= 0 || nodes <= 0 {
		return 0, false
	}
	left := (maxCost/hourly - spentHours) / float64(nodes)
	if left <= 0 {
		return 0, true
	}
	return time.Duration(left * float64(time.Hour)), true
}
