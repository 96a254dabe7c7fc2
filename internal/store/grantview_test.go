package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A principal's role assignments read through Q follow every committed
// grant and revocation at once, whether held by the view or not, through
// a transaction or through W; a rolled-back one changes nothing.
func TestRoleAssignmentReadsFollowCommittedWrites(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	roles := func() []string {
		t.Helper()
		as, err := RoleAssignments(ctx, db.Q(), "bob")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range as {
			out = append(out, a.Role+"@"+a.Scope)
		}
		return out
	}
	for range 2 { // none, read from SQL then as held
		if got := roles(); len(got) != 0 {
			t.Fatalf("bob has %v before any grant", got)
		}
	}
	refused := errors.New("refused")
	if err := db.Tx(ctx, func(q Querier) error {
		if err := PutRoleAssignment(ctx, q, RoleAssignment{ID: "a1", Principal: "bob", Role: "Reader", Scope: "/x", Created: at}); err != nil {
			return err
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("the rolled-back grant returned %v", err)
	}
	if got := roles(); len(got) != 0 {
		t.Fatalf("after a rolled-back grant bob has %v", got)
	}
	if err := db.Tx(ctx, func(q Querier) error {
		return PutRoleAssignment(ctx, q, RoleAssignment{ID: "a1", Principal: "bob", Role: "Reader", Scope: "/x", Created: at})
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := roles(); len(got) != 1 || got[0] != "Reader@/x" {
			t.Fatalf("after the grant bob has %v, want [Reader@/x]", got)
		}
	}
	// A caller changing the list it was given changes nothing held.
	as, _ := RoleAssignments(ctx, db.Q(), "bob")
	as[0].Role = "Owner"
	if got := roles(); got[0] != "Reader@/x" {
		t.Fatalf("a caller's change of its copy reads back: %v", got)
	}
	if err := PutRoleAssignment(ctx, db.W(), RoleAssignment{ID: "a2", Principal: "bob", Role: "Contributor", Scope: "/y", Created: at}); err != nil {
		t.Fatal(err)
	}
	if got := roles(); len(got) != 2 {
		t.Fatalf("after a grant through W bob has %v, want two", got)
	}
	if err := db.Tx(ctx, func(q Querier) error { return DeleteRoleAssignment(ctx, q, "a1") }); err != nil {
		t.Fatal(err)
	}
	if got := roles(); len(got) != 1 || got[0] != "Contributor@/y" {
		t.Fatalf("after revoking Reader bob has %v, want [Contributor@/y]", got)
	}
	if err := DeleteRoleAssignment(ctx, db.W(), "a2"); err != nil {
		t.Fatal(err)
	}
	if got := roles(); len(got) != 0 {
		t.Fatalf("after revoking everything bob has %v", got)
	}
	if err := DeleteRoleAssignment(ctx, db.W(), "a2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoking an assignment that is not there: %v", err)
	}
}
