package server

import (
	"errors"
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// simulateEviction preempts one low-priority node, as Azure's
// simulateEviction does for a Spot VM: its job gets SIGTERM and the
// compute's preemption grace period, then the node is preempted and goes
// away, and the job is queued again.
func (s *Server) simulateEviction(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	if d.Value.Aml().VMPriority != api.PriorityLowPriority {
		return api.Conflict(api.CodeConflict, "compute %s is dedicated; only nodes of low-priority clusters can be evicted", d.Value.Name)
	}
	now := s.clock.Now().UTC()
	var n store.Node
	err = s.tx(r, func(q store.Querier) error {
		cur, err := store.GetNode(r.Context(), q, p["node"])
		if isNotFound(err) || (err == nil && !store.SameKey(cur.Compute, d.Value.ID)) {
			return api.NotFound("node %s is not a node of compute %s", p["node"], d.Value.Name)
		}
		if err != nil {
			return err
		}
		n, err = lifecycle.Evict(r.Context(), q, cur.ID, now)
		if errors.Is(err, lifecycle.ErrNotEvictable) {
			return api.Conflict(api.CodeConflict, "%s", err)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.log.Info("node evicted", "node", n.ID, "compute", d.Value.Name, "job", n.JobID)
	s.hub.Wake(n.ID)
	s.changed()
	w.WriteHeader(http.StatusAccepted)
	return nil
}
