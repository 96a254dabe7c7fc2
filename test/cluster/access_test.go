package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// as is a client of the same server acting with another token.
func (s *server) as(token string) *client.Client {
	c := *s.c
	c.Token = token
	return &c
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

// A Reader lists but cannot write (403 AuthorizationFailed) or read
// secrets; a ComputeOperator scales but cannot delete; revoked and
// expired tokens stop working; every write is in the audit log.
func TestRolesAndAudit(t *testing.T) {
	s := startServer(t)
	s.createCompute("shared", 0, 2, "PT60S")
	for _, p := range []string{"alice", "bob"} {
		if _, err := s.c.CreatePrincipal(bctx, p, "User"); err != nil {
			t.Fatal(err)
		}
	}
	aliceTok, err := s.c.CreateToken(bctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	bobTok, err := s.c.CreateToken(bctx, "bob", "1h")
	if err != nil || bobTok.Expires == nil {
		t.Fatalf("token with expiry: %+v %v", bobTok, err)
	}
	ws := s.c.Scope.WorkspaceID()
	if _, err := s.c.AssignRole(bctx, "alice", "Reader", ws); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.AssignRole(bctx, "bob", "ComputeOperator", ws); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.AssignRole(bctx, "bob", "Superuser", ws); err == nil {
		t.Fatal("an unknown role was assigned")
	}

	alice, bob := s.as(aliceTok.Token), s.as(bobTok.Token)
	if list, err := alice.ListComputes(bctx); err != nil || len(list) != 1 {
		t.Fatalf("reader list: %v %v", list, err)
	}
	zero, one := int32(0), int32(1)
	c := api.Compute{Name: "by-alice"}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &one}
	_, _, err = alice.PutCompute(bctx, c)
	wantCode(t, err, api.CodeForbidden)
	if !strings.Contains(err.Error(), "alice") {
		t.Fatalf("403 does not name the principal: %v", err)
	}
	_, err = alice.ListKeys(bctx, "shared")
	wantCode(t, err, api.CodeForbidden)
	// The audit log needs read access to everything, not one workspace.
	_, err = alice.ListAudit(bctx, "", "", time.Time{})
	wantCode(t, err, api.CodeForbidden)

	three := int32(3)
	if _, err := bob.UpdateScale(bctx, "shared", api.ScaleSettings{MaxNodeCount: &three}); err != nil {
		t.Fatalf("operator scale: %v", err)
	}
	_, err = bob.DeleteCompute(bctx, "shared")
	wantCode(t, err, api.CodeForbidden)
	_, err = bob.ListTokens(bctx, "")
	wantCode(t, err, api.CodeForbidden)

	// The CLI shows a refusal as one line.
	dir := t.TempDir()
	_, errOut, code := s.cliAs(dir, aliceTok.Token, "compute", "delete", "-n", "shared", "--yes")
	if code == 0 || !strings.HasPrefix(errOut, "error: AuthorizationFailed: ") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("cli: exit %d, %q", code, errOut)
	}

	// The audit log has the writes of this test, refused ones included.
	es, err := s.c.ListAudit(bctx, "", "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	has := func(who, op string, status int) bool {
		for _, e := range es {
			if e.Principal == who && strings.HasSuffix(e.Operation, op) && e.Status == status {
				return true
			}
		}
		return false
	}
	for _, want := range []struct {
		who, op string
		status  int
	}{
		{"admin", "workspaces/computes/write", 201},
		{"alice", "workspaces/computes/write", 403},
		{"bob", "workspaces/computes/write", 200},
		{"bob", "workspaces/computes/delete", 403},
		{"alice", "workspaces/computes/delete", 403},
		{"admin", "auth/tokens/action", 201},
	} {
		if !has(want.who, want.op, want.status) {
			t.Errorf("audit has no %s %s %d; log: %+v", want.who, want.op, want.status, es)
		}
	}
	if only, _ := s.c.ListAudit(bctx, "bob", "", time.Time{}); len(only) == 0 || only[0].Principal != "bob" {
		t.Fatalf("audit filter by principal: %+v", only)
	}
	// Token lists never show secrets; a revoked token stops working.
	ts, err := s.c.ListTokens(bctx, "alice")
	if err != nil || len(ts) != 1 || ts[0].Token != "" {
		t.Fatalf("token list: %+v %v", ts, err)
	}
	if err := s.c.RevokeToken(bctx, aliceTok.ID); err != nil {
		t.Fatal(err)
	}
	_, err = alice.ListComputes(bctx)
	wantCode(t, err, api.CodeUnauthorized)
}
