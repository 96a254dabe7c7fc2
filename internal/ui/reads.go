package ui

import (
	"context"
	"errors"
	"time"
)

// Reads is all the studio reads besides what the page asks the public API
// for: what the API does not carry (node counts cheap enough to sample
// every few seconds, node times) or must not carry (tokens by hash, for
// sign-in). The studio declares it so that a store needs no knowledge of
// the studio: internal/readmodel implements it over the store. Reads are
// read-only.
type Reads interface {
	// ComputeLoads returns every compute with its nodes counted by state
	// and its queued demand.
	ComputeLoads(ctx context.Context) ([]ComputeLoad, error)
	// NodesOf returns the nodes of the compute with that ARM id (any case);
	// none, not an error, when it has none or does not exist.
	NodesOf(ctx context.Context, computeID string) ([]Node, error)
	// TokenByHash returns the API token whose secret has that hash; an
	// error matching ErrNotFound when there is none.
	TokenByHash(ctx context.Context, hash string) (Token, error)
}

// ErrNotFound is what Reads return (wrapped) for a thing that does not
// exist; the studio answers it with 404, as the API does.
var ErrNotFound = errors.New("not found")

// ComputeLoad is one compute's size and queue at one moment.
type ComputeLoad struct {
	ID          string
	Name        string
	Target      int            // the controller's target node count
	Nodes       map[string]int // by state (api.Node…)
	QueuedJobs  int
	QueuedNodes int // the nodes the queued jobs need
}

// Node is one node of a compute and its times.
type Node struct {
	ID        string
	State     string    // api.Node…
	Created   time.Time // intent recorded
	Ready     time.Time // agent registered; zero before
	IdleSince time.Time // last became idle; zero if never
}

// Token is what sign-in needs of an API token.
type Token struct {
	Name    string    // the principal it signs in
	Expires time.Time // zero: never
	Revoked bool
	// HasRole: the principal holds a role somewhere. The studio opens no
	// session for one that holds none (it could read nothing).
	HasRole bool
}
