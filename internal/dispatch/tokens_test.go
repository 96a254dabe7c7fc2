package dispatch

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func TestNewNodeID(t *testing.T) {
	id := NewNodeID("GPU-Cluster", t0)
	if !regexp.MustCompile(`^tvm-gpu-cluster-[0-9a-f]{8}_20261121t100000z$`).MatchString(id) {
		t.Errorf("NewNodeID = %q", id)
	}
	if NewNodeID("c", t0) == NewNodeID("c", t0) {
		t.Error("two node ids made at the same time are equal")
	}
}

func (f *fixture) register(tok string) (store.Node, string, error) {
	var n store.Node
	var nodeToken string
	err := f.db.Tx(f.ctx, func(q store.Querier) error {
		var err error
		n, nodeToken, err = Register(f.ctx, q, tok, agentapi.RegisterRequest{Address: "10.1.1.1", GPUs: []agentapi.GPU{{Index: 0}, {Index: 1}}}, t0)
		return err
	})
	return n, nodeToken, err
}

func TestRegisterWithANodeJoinToken(t *testing.T) {
	f := newFixture(t)
	n := f.node("n1", api.NodePreparing, "")
	tok, hash := NewNodeJoinToken(n.ID)
	if hash != secret.Hash(tok) {
		t.Fatal("the hash is not the token's")
	}
	n.JoinHash = hash
	if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
		t.Fatal(err)
	}

	got, nodeToken, err := f.register(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "n1" || got.State != api.NodeIdle || got.Address != "10.1.1.1" || len(got.GPUs) != 2 || got.JoinHash != "" {
		t.Errorf("registered node %+v", got)
	}
	if !IsNodeToken(nodeToken) || IsNodeToken(tok) {
		t.Errorf("IsNodeToken: node token %v, join token %v", IsNodeToken(nodeToken), IsNodeToken(tok))
	}
	if n, err := AuthenticateNode(f.ctx, f.db.Q(), nodeToken); err != nil || n.ID != "n1" {
		t.Errorf("AuthenticateNode = %s, %v", n.ID, err)
	}
	if _, _, err := f.register(tok); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a join token used twice: %v, want ErrUnauthorized", err)
	}
}

func TestRegisterRefuses(t *testing.T) {
	f := newFixture(t)
	n := f.node("n1", api.NodeIdle, "")
	tok, hash := NewNodeJoinToken(n.ID)
	n.JoinHash = hash
	if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
		t.Fatal(err)
	}
	other, _ := NewNodeJoinToken("n1")
	cases := map[string]struct {
		tok  string
		kind error
	}{
		"a node that already runs":   {tok, ErrConflict},
		"another token of the node":  {other, ErrUnauthorized},
		"a node the store lacks":     {strings.Replace(tok, "n1", "n9", 1), ErrUnauthorized},
		"a node token":               {"cnt_n1.x", ErrUnauthorized},
		"no token":                   {"", ErrUnauthorized},
		"a compute token not issued": {"cjc_bm9uZQ.x", ErrUnauthorized},
		"a compute token garbled":    {"cjc_%%%.x", ErrUnauthorized},
	}
	for name, c := range cases {
		if _, _, err := f.register(c.tok); !errors.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v", name, err, c.kind)
		}
	}
}

func TestRegisterWithAComputeJoinToken(t *testing.T) {
	f := newFixture(t)
	old, err := IssueComputeJoinToken(f.ctx, f.db.W(), f.c.ID)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := IssueComputeJoinToken(f.ctx, f.db.W(), f.c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.register(old); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a rotated token: %v, want ErrUnauthorized", err)
	}
	n, nodeToken, err := f.register(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(n.ID, "tvm-gpu-") || n.Compute != f.c.ID || n.Provider != "manual" || n.State != api.NodeIdle {
		t.Errorf("joined node %+v", n)
	}
	if _, err := AuthenticateNode(f.ctx, f.db.Q(), nodeToken); err != nil {
		t.Error(err)
	}
	// The token joins any number of machines, each a new node.
	if m, _, err := f.register(tok); err != nil || m.ID == n.ID {
		t.Errorf("second machine: %s, %v", m.ID, err)
	}
}

func TestAuthenticateNode(t *testing.T) {
	f := newFixture(t)
	tok, hash := newNodeToken("n1")
	n := f.node("n1", api.NodeIdle, "")
	n.TokenHash = hash
	if err := store.PutNode(f.ctx, f.db.W(), n); err != nil {
		t.Fatal(err)
	}
	gone, _ := newNodeToken("n9")
	cases := map[string]struct {
		tok  string
		want error
	}{
		"its token":              {tok, nil},
		"another node token":     {strings.Replace(tok, ".", ".x", 1), ErrUnauthorized},
		"a join token":           {"cjt_n1.x", ErrUnauthorized},
		"no token":               {"", ErrUnauthorized},
		"a node without id":      {"cnt_n1", ErrUnauthorized},
		"a node the store lacks": {gone, ErrUnauthorized},
	}
	for name, c := range cases {
		_, err := AuthenticateNode(f.ctx, f.db.Q(), c.tok)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// A caller must not learn which node ids exist: an unknown node and a
	// wrong secret of a known one are refused in the same words.
	_, unknown := AuthenticateNode(f.ctx, f.db.Q(), gone)
	_, wrong := AuthenticateNode(f.ctx, f.db.Q(), strings.Replace(tok, ".", ".x", 1))
	if unknown == nil || wrong == nil || unknown.Error() != wrong.Error() {
		t.Errorf("unknown node: %v; wrong secret: %v; want the same refusal", unknown, wrong)
	}
}
