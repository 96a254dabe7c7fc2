package dispatch

import (
	"context"
	"errors"
	"fmt"
	"github.com/cumulus-ml/cumulus/internal/batch"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/hub"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Protocol timings the server hands agents unless configured otherwise.
const (
	// DefaultPollTimeout is how long a poll without news is held.
	DefaultPollTimeout = 20 * time.Second
	// DefaultHeartbeatInterval is how often an agent polls at least.
	DefaultHeartbeatInterval = DefaultPollTimeout / 2
)

// Outputs tells whether a job saved an output (files.Outputs does).
type Outputs interface {
	Has(uid, name string) bool
}

// Service runs the protocol against the store: it reads what the pure
// functions decide from, and writes what they decide in one transaction.
type Service struct {
	DB    *store.DB
	Clock clock.Clock
	// Hub records when agents were heard from and holds their polls.
	Hub *hub.Hub
	// PollTimeout is how long a poll without news is held.
	PollTimeout time.Duration
	Retries     Retries
	// Outputs says whether an earlier attempt saved a checkpoint.
	Outputs Outputs
	// ClientID returns the client id of a compute's default managed
	// identity (ok false: it has none). nil: this server issues no
	// identity tokens.
	ClientID func(api.Compute) (id string, ok bool)
	// LaunchToken is the secret of one attempt of a job that its nodes
	// share to launch MPI daemons on each other; nil: none.
	LaunchToken func(uid string, attempt int) string
	// TrackingToken is the bearer token a job's MLflow calls carry
	// (server.TrackingToken); nil: jobs get none.
	TrackingToken func(uid string) string
	// Changed, when set, is told that jobs or nodes changed.
	Changed func()
	// RowsExited, when set, is told of each exit of a part of a parallel
	// step that appends rows to an output, once the report of it is
	// written (in an event or a poll): when the step has ended, its rows
	// are to be filed.
	RowsExited func(ctx context.Context, uid string)
	// Prices price node time for jobs' cost limits; nil: limits are not
	// enforced.
	Prices *cost.Prices

	group batch.Group[*report] // agents' reports written together
}

func (s *Service) changed() {
	if s.Changed != nil {
		s.Changed()
	}
}

func (s *Service) now() time.Time { return s.Clock.Now().UTC() }

// Authenticate finds the node a node token belongs to. A node the store
// no longer has is refused as a wrong token is (ErrUnauthorized).
func (s *Service) Authenticate(ctx context.Context, tok string) (store.Node, error) {
	return AuthenticateNode(ctx, s.DB.Q(), tok)
}

// Register spends a join token: the node is ready and gets its node token.
func (s *Service) Register(ctx context.Context, joinToken string, req agentapi.RegisterRequest) (store.Node, string, error) {
	now := s.now()
	var node store.Node
	var tok string
	err := s.DB.Tx(ctx, func(q store.Querier) error {
		var err error
		node, tok, err = Register(ctx, q, joinToken, req, now)
		return err
	})
	if err != nil {
		return node, "", err
	}
	s.Hub.Seen(node.ID, now)
	s.changed()
	return node, tok, nil
}

// Poll is one agent poll: it records the states the agent reports, then
// answers with instructions, holding the answer up to PollTimeout while
// there are none. It returns ctx's error when ctx ends first.
func (s *Service) Poll(ctx context.Context, nodeID string, reported []agentapi.JobState) (agentapi.PollResponse, error) {
	return s.PollHeld(ctx, nodeID, reported, s.PollTimeout)
}

// PollHeld is Poll holding the answer at most hold.
func (s *Service) PollHeld(ctx context.Context, nodeID string, reported []agentapi.JobState, hold time.Duration) (agentapi.PollResponse, error) {
	return s.poll(ctx, nodeID, nil, reported, hold)
}

// PollNode is PollHeld for a node its caller has just read (authenticating
// the poll). A poll that reports nothing writes nothing before its first
// look, so that look decides from the node as read rather than reading it
// again: an idle node's poll reads it once, not twice. A change to the
// node after that read wakes the poll (the wake waits for it), which then
// reads it again.
func (s *Service) PollNode(ctx context.Context, node store.Node, reported []agentapi.JobState, hold time.Duration) (agentapi.PollResponse, error) {
	var known *store.Node
	if len(reported) == 0 {
		known = &node
	}
	return s.poll(ctx, node.ID, known, reported, hold)
}

// poll records the reported states, then answers, holding the answer while
// there is nothing to say. known, when set, is the node as just read.
func (s *Service) poll(ctx context.Context, nodeID string, known *store.Node, reported []agentapi.JobState, hold time.Duration) (agentapi.PollResponse, error) {
	s.Hub.Seen(nodeID, s.Clock.Now())
	if err := s.ReportAll(ctx, nodeID, reported); err != nil {
		return agentapi.PollResponse{}, err
	}
	deadline := time.Now().Add(hold)
	for last := false; ; {
		resp, err := s.instructions(ctx, nodeID, known, reported)
		if err != nil {
			return resp, err
		}
		known = nil // read again after a wait
		left := time.Until(deadline)
		if news(resp) || left <= 0 || last {
			return resp, nil
		}
		// Hold the poll until there is news for this node; when the wait
		// ends without any (timeout, shutdown), look once more and answer.
		last = !s.Hub.Wait(ctx, nodeID, left)
		if err := ctx.Err(); err != nil {
			return agentapi.PollResponse{}, err
		}
		s.Hub.Seen(nodeID, s.Clock.Now())
	}
}

// Instructions decides what a polling agent should do now and makes the
// write the decision asks for.
func (s *Service) Instructions(ctx context.Context, nodeID string, reported []agentapi.JobState) (agentapi.PollResponse, error) {
	return s.instructions(ctx, nodeID, nil, reported)
}

func (s *Service) instructions(ctx context.Context, nodeID string, known *store.Node, reported []agentapi.JobState) (agentapi.PollResponse, error) {
	v, err := s.view(ctx, s.DB.Q(), nodeID, known, reported)
	if err != nil {
		return agentapi.PollResponse{}, err
	}
	p := Instructions(v, reported)
	if p.Release != "" {
		if err := s.releaseStale(ctx, nodeID, p.Release); err != nil {
			return agentapi.PollResponse{}, err
		}
	}
	return p.Response, nil
}

// Report records a phase an agent reports for one of its jobs.
func (s *Service) Report(ctx context.Context, nodeID string, st agentapi.JobState) error {
	return s.ReportAll(ctx, nodeID, []agentapi.JobState{st})
}

// Leaving handles a node's agent telling that its machine is going away
// (see Leave).
func (s *Service) Leaving(ctx context.Context, nodeID string) error {
	now := s.now()
	var wake []string
	err := s.DB.Tx(ctx, func(q store.Querier) error {
		var err error
		wake, err = Leave(ctx, q, nodeID, s.Retries, now)
		return err
	})
	if err != nil && !errors.Is(err, lifecycle.ErrNotEvictable) {
		return err
	}
	s.wake(wake)
	s.changed()
	return nil
}

func (s *Service) releaseStale(ctx context.Context, nodeID, uid string) error {
	now := s.now()
	var released bool
	err := s.DB.Tx(ctx, func(q store.Querier) error {
		var err error
		released, err = ReleaseStale(ctx, q, nodeID, uid, s.Retries, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("release node %s from job %s: %w", nodeID, uid, err)
	}
	if released {
		s.changed()
	}
	return nil
}

func (s *Service) wake(nodes []string) { s.Hub.WakeAll(nodes) }
