package dispatch

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Token prefixes: a node's join token and node token carry the node id so
// the server finds the node without scanning; a compute's join token
// (for machines joined by hand) carries the compute id.
const (
	prefixJoin        = "cjt_"
	prefixNode        = "cnt_"
	prefixComputeJoin = "cjc_"
)

// NewNodeJoinToken makes the one-time token a provider hands a new node's
// agent, and the hash the node record keeps.
func NewNodeJoinToken(nodeID string) (token, hash string) {
	return newToken(prefixJoin + nodeID)
}

// newNodeToken makes the token a registered agent authenticates with, and
// its hash.
func newNodeToken(nodeID string) (token, hash string) {
	return newToken(prefixNode + nodeID)
}

func newToken(head string) (token, hash string) {
	t := head + "." + secret.NewToken("")
	return t, secret.Hash(t)
}

// NewNodeID makes a node id in Azure's style: tvm-<cluster>-<random>_<time>.
func NewNodeID(compute string, now time.Time) string {
	return "tvm-" + strings.ToLower(compute) + "-" + secret.NewID()[:8] + "_" + now.UTC().Format("20060102t150405z")
}

// IsNodeToken reports whether a bearer token is a node token (rather than
// a user's).
func IsNodeToken(tok string) bool { return strings.HasPrefix(tok, prefixNode) }

// joinSecretID is where the store keeps the hash of a compute's join token.
func joinSecretID(computeID string) string { return "join:" + computeID }

// IssueComputeJoinToken makes a join token for machines joining a compute
// by hand and stores its hash; the compute's earlier token stops working.
func IssueComputeJoinToken(ctx context.Context, q store.Querier, computeID string) (string, error) {
	tok, hash := newToken(prefixComputeJoin + base64.RawURLEncoding.EncodeToString([]byte(computeID)))
	if err := store.PutSecret(ctx, q, joinSecretID(computeID), []byte(hash)); err != nil {
		return "", err
	}
	return tok, nil
}

// errNodeToken is the one refusal of a well-formed node token: the same
// for a node the store does not know and for a wrong secret, so that a
// caller cannot learn which node ids exist.
const errNodeToken = "the node token is not valid (the node may have been removed)"

// AuthenticateNode finds the node a node token belongs to. A token of a
// node the store does not know and a wrong token of a node it knows are
// refused alike (ErrUnauthorized, the same message).
func AuthenticateNode(ctx context.Context, q store.Querier, tok string) (store.Node, error) {
	rest, ok := strings.CutPrefix(tok, prefixNode)
	id, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return store.Node{}, unauthorized("a node token is required")
	}
	hash := secret.Hash(tok) // hashed before the lookup: both refusals take the same work
	n, err := store.GetNode(ctx, q, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Node{}, unauthorized(errNodeToken)
	}
	if err != nil {
		return store.Node{}, err
	}
	if n.TokenHash == "" || subtle.ConstantTimeCompare([]byte(n.TokenHash), []byte(hash)) != 1 {
		return store.Node{}, unauthorized(errNodeToken)
	}
	return n, nil
}

// nodeForJoinToken finds the preparing node a provider made a join token for.
func nodeForJoinToken(ctx context.Context, q store.Querier, tok string) (store.Node, error) {
	id, _, _ := strings.Cut(strings.TrimPrefix(tok, prefixJoin), ".")
	n, err := store.GetNode(ctx, q, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (n.JoinHash == "" || n.JoinHash != secret.Hash(tok))) {
		return n, unauthorized("the join token is not valid (it is used once, by the node it was made for)")
	}
	if err != nil {
		return n, err
	}
	if n.State != api.NodePreparing {
		return n, conflict("node " + n.ID + " is " + n.State + " and cannot register")
	}
	return n, nil
}

// nodeForComputeJoin makes a node record for a machine joining by hand.
func nodeForComputeJoin(ctx context.Context, q store.Querier, tok string, now time.Time) (store.Node, error) {
	enc, _, _ := strings.Cut(strings.TrimPrefix(tok, prefixComputeJoin), ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return store.Node{}, unauthorized("the join token is not valid")
	}
	computeID := string(raw)
	sealed, err := store.GetSecret(ctx, q, joinSecretID(computeID))
	if errors.Is(err, store.ErrNotFound) || (err == nil && string(sealed) != secret.Hash(tok)) {
		return store.Node{}, unauthorized("the join token is not valid (it may have been rotated)")
	}
	if err != nil {
		return store.Node{}, err
	}
	sc, name, err := api.ParseComputeID(computeID, api.Scope{})
	if err != nil {
		return store.Node{}, err
	}
	d, err := store.Get[api.Compute](ctx, q, store.KindCompute, sc.WorkspaceID(), name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Node{}, conflict("the compute of this join token no longer exists")
	}
	if err != nil {
		return store.Node{}, err
	}
	a := d.Value.Aml()
	return store.Node{ID: NewNodeID(d.Value.Name, now), Compute: d.Value.ID, State: api.NodePreparing, Priority: a.VMPriority,
		VMSize: a.VMSize, Provider: "manual", Created: now}, nil
}
