package server_test

import (
	"testing"

	"github.com/cumulus-ml/cumulus/internal/server"
)

// A token that has been used stops working the moment its revocation is
// answered, for every request after it; a
// revocation that failed changes nothing; and another token of the same
// principal keeps working.
func TestRevokedTokenIsRefusedAtOnce(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.user("carol", "Reader", hWSPath)
	var first, second server.TokenCreated
	h.do("POST", "/cumulus/v1/auth/tokens", map[string]any{"principal": "carol"}).want(t, 201).json(t, &first)
	h.do("POST", "/cumulus/v1/auth/tokens", map[string]any{"principal": "carol"}).want(t, 201).json(t, &second)
	for range 3 {
		h.as(first.Token, "GET", hWSPath+"/computes", nil).want(t, 200)
	}
	h.do("DELETE", "/cumulus/v1/auth/tokens/no-such-token", nil).want(t, 404)
	h.as(first.Token, "GET", hWSPath+"/computes", nil).want(t, 200)
	// A principal cannot revoke another's token without the right to.
	h.as(second.Token, "DELETE", "/cumulus/v1/auth/tokens/"+first.ID, nil).want(t, 403)
	h.as(first.Token, "GET", hWSPath+"/computes", nil).want(t, 200)

	h.do("DELETE", "/cumulus/v1/auth/tokens/"+first.ID, nil).want(t, 200)
	for range 3 {
		h.as(first.Token, "GET", hWSPath+"/computes", nil).want(t, 401, "AuthenticationFailed")
	}
	h.as(second.Token, "GET", hWSPath+"/computes", nil).want(t, 200)
}
