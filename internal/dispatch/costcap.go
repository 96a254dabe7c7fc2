package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// costCapFloor keeps a job already at its cap from being stopped before
// its agent has even received it twice: it is stopped at once anyway.
const costCapFloor = time.Millisecond

// costLimit sets how long job j may still hold its nodes before its
// maxCost is reached, priced by its first node's size and tier.
func (s *Service) costLimit(ctx context.Context, q store.Querier, j store.Job, w *Work) {
	maxCost := j.Doc.MaxCost()
	if s.Prices == nil || maxCost <= 0 || len(j.Nodes) == 0 {
		return
	}
	n, err := store.GetNode(ctx, q, j.Nodes[0])
	if err != nil {
		return // the node is gone: the attempt ends anyway
	}
	hourly, ok := s.Prices.Hourly(n.VMSize, n.Priority)
	if !ok {
		return
	}
	left, ok := cost.CapLeft(maxCost, hourly, cost.JobNodeHours(j.Doc.Properties, s.Clock.Now()), len(j.Nodes))
	if !ok {
		return
	}
	w.CostLimit = max(left, costCapFloor)
	w.CostLimitReason = fmt.Sprintf("%s: the job's cost reached its limit of %.2f %s (%d nodes at %.4f %s per node-hour)",
		api.CostLimitExceeded, maxCost, s.Prices.Currency, len(j.Nodes), hourly, s.Prices.Currency)
}
