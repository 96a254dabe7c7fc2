package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
	"github.com/cumulus-ml/cumulus/internal/secret"
)

// fakeReads is a Reads whose answers a test chooses, to make reads fail
// in ways a real store seldom does. The other tests read a real store
// through internal/readmodel.
type fakeReads struct {
	loads  func(ctx context.Context) ([]ComputeLoad, error)
	nodes  func(ctx context.Context, computeID string) ([]Node, error)
	tokens func(ctx context.Context, hash string) (Token, error)
}

var _ Reads = (*fakeReads)(nil)

func (f *fakeReads) ComputeLoads(ctx context.Context) ([]ComputeLoad, error) { return f.loads(ctx) }
func (f *fakeReads) NodesOf(ctx context.Context, id string) ([]Node, error)  { return f.nodes(ctx, id) }
func (f *fakeReads) TokenByHash(ctx context.Context, h string) (Token, error) {
	return f.tokens(ctx, h)
}

// TestAMissingThingIsA404NotA500 checks that the studio maps errors as
// the API does: what Reads did not find answers 404 ResourceNotFound, a
// failure 500, and a token Reads does not know 401.
func TestAMissingThingIsA404NotA500(t *testing.T) {
	const tok = "cml_test"
	compute := "/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default/computes/gone"
	var nodesErr error
	reads := &fakeReads{
		nodes: func(context.Context, string) ([]Node, error) { return nil, nodesErr },
		tokens: func(_ context.Context, hash string) (Token, error) {
			if hash != secret.Hash(tok) {
				return Token{}, fmt.Errorf("token: %w", ErrNotFound)
			}
			return Token{Name: "admin"}, nil
		},
	}
	u := New(Options{Reads: reads, Clock: clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	get := func(bearer string) (int, string) {
		t.Helper()
		r := httptest.NewRequest("GET", "/ui/api/history?compute="+url.QueryEscape(compute), nil)
		r.Header.Set("Authorization", "Bearer "+bearer)
		w := httptest.NewRecorder()
		u.ServeHTTP(w, r)
		var e api.ErrorResponse
		if w.Code != http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Code != w.Header().Get("x-ms-error-code") {
				t.Fatalf("error body %s (%v)", w.Body, err)
			}
			return w.Code, e.Error.Code
		}
		return w.Code, ""
	}

	nodesErr = fmt.Errorf("compute gone: %w", ErrNotFound)
	if status, code := get(tok); status != http.StatusNotFound || code != api.CodeNotFound {
		t.Errorf("a compute Reads did not find: %d %s", status, code)
	}
	nodesErr = errors.New("disk on fire")
	if status, code := get(tok); status != http.StatusInternalServerError || code != api.CodeInternal {
		t.Errorf("a failed read: %d %s", status, code)
	}
	nodesErr = nil
	if status, _ := get(tok); status != http.StatusOK {
		t.Errorf("a read that works: %d", status)
	}
	// A token Reads does not find is refused as not valid, not as missing.
	if status, code := get("cml_unknown"); status != http.StatusUnauthorized || code != api.CodeUnauthorized {
		t.Errorf("an unknown token: %d %s", status, code)
	}
}
