// Package readmodel answers the studio's reads (ui.Reads) from the store,
// so that the studio does not import the store and a store backend does
// not need to know the studio: this package is the one place that knows
// both.
package readmodel

import (
	"context"
	"errors"
	"fmt"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
	"github.com/cumulus-ml/cumulus/internal/ui"
)

// Studio reads the store for the studio. Every read goes to the store's
// read connections (DB.Q).
type Studio struct {
	DB *store.DB
}

var _ ui.Reads = (*Studio)(nil)

// New returns the studio's reads over db.
func New(db *store.DB) *Studio { return &Studio{DB: db} }

// ComputeLoads counts from the indexes, not the documents, so a sample
// stays cheap with thousands of nodes and a long queue.
func (s *Studio) ComputeLoads(ctx context.Context) ([]ui.ComputeLoad, error) {
	q := s.DB.Q()
	docs, err := store.List[api.Compute](ctx, q, store.KindCompute, "/subscriptions", false, "", 1<<30)
	if err != nil {
		return nil, fmt.Errorf("list computes: %w", classify(err))
	}
	out := make([]ui.ComputeLoad, 0, len(docs))
	for _, d := range docs {
		c := d.Value
		counts, err := store.NodeCounts(ctx, q, c.ID)
		if err != nil {
			return nil, fmt.Errorf("nodes of %s: %w", c.Name, classify(err))
		}
		jobs, demand, err := store.QueuedDemand(ctx, q, c.ID)
		if err != nil {
			return nil, fmt.Errorf("jobs of %s: %w", c.Name, classify(err))
		}
		out = append(out, ui.ComputeLoad{ID: c.ID, Name: c.Name, Target: int(c.Aml().TargetNodeCount), Nodes: counts,
			QueuedJobs: jobs, QueuedNodes: demand})
	}
	return out, nil
}

// NodesOf reads a compute's node records.
func (s *Studio) NodesOf(ctx context.Context, computeID string) ([]ui.Node, error) {
	nodes, err := store.NodesOf(ctx, s.DB.Q(), computeID)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]ui.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, ui.Node{ID: n.ID, State: n.State, Created: n.Created, Ready: n.Ready, IdleSince: n.IdleSince})
	}
	return out, nil
}

// TokenByHash reads a token record; its hash and role stay here.
func (s *Studio) TokenByHash(ctx context.Context, hash string) (ui.Token, error) {
	t, err := store.TokenByHash(ctx, s.DB.Q(), hash)
	if err != nil {
		return ui.Token{}, classify(err)
	}
	as, err := store.RoleAssignments(ctx, s.DB.Q(), t.Name)
	if err != nil {
		return ui.Token{}, err
	}
	return ui.Token{Name: t.Name, Expires: t.Expires, Revoked: t.Revoked, HasRole: len(as) > 0}, nil
}

// classify gives a store error the studio's sentinel beside the store's,
// so the studio tells a missing thing from a failure without importing
// the store.
func classify(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound{err}
	}
	return err
}

// notFound is a store ErrNotFound that also matches ui.ErrNotFound; its
// message is the store's.
type notFound struct{ err error }

func (e notFound) Error() string   { return e.err.Error() }
func (e notFound) Unwrap() []error { return []error{e.err, ui.ErrNotFound} }
