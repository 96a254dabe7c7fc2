package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Ownership is per workspace; a blob a job of its workspace mentions is
// never unreferenced; a fresh upload keeps it past an older cutoff.
func TestBlobOwners(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	const a, b = "/subscriptions/s/resourceGroups/g/providers/P/workspaces/A", "/subscriptions/s/resourceGroups/g/providers/P/workspaces/B"
	d1, d2 := "1111111111111111111111111111111111111111111111111111111111111111", "2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Unix(1000, 0)
	for _, o := range []BlobOwner{{d1, a, 10, t0, "alice"}, {d1, b, 10, t0, "bob"}, {d2, a, 20, t0, "alice"}} {
		if err := PutBlobOwner(ctx, db.W(), o); err != nil {
			t.Fatal(err)
		}
	}
	if o, err := GetBlobOwner(ctx, db.Q(), d1, "/SUBSCRIPTIONS/s/resourceGroups/g/providers/P/workspaces/a"); err != nil || o.Principal != "alice" || o.Size != 10 {
		t.Errorf("owner of d1 in A: %+v, %v", o, err)
	}
	if _, err := GetBlobOwner(ctx, db.Q(), d2, b); !errors.Is(err, ErrNotFound) {
		t.Errorf("B owns d2: %v", err)
	}
	j := queuedJob("u1", "j1", 1, 0, "", "")
	j.Parent = a
	j.Doc.Properties.CodeID = a + "/codes/c/versions/" + d2
	if err := InsertJob(ctx, db.W(), j); err != nil {
		t.Fatal(err)
	}
	stale, err := UnreferencedBlobOwners(ctx, db.Q(), t0.Add(time.Second), 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, o := range stale {
		got[o.Digest[:1]+o.Workspace[len(o.Workspace)-1:]] = true
	}
	if len(got) != 2 || !got["1a"] || !got["1b"] {
		t.Errorf("unreferenced: %v, want d1 in a and b (d2 is referenced by a job of A)", got)
	}
	if err := PutBlobOwner(ctx, db.W(), BlobOwner{d1, a, 10, t0.Add(time.Hour), "alice"}); err != nil {
		t.Fatal(err)
	}
	if gone, err := DeleteBlobOwner(ctx, db.W(), d1, a, t0.Add(time.Second)); err != nil || gone {
		t.Errorf("a re-uploaded blob was removed: %v %v", gone, err)
	}
	if gone, err := DeleteBlobOwner(ctx, db.W(), d1, b, t0.Add(time.Second)); err != nil || !gone {
		t.Errorf("stale ownership not removed: %v %v", gone, err)
	}
	if owned, err := BlobOwned(ctx, db.Q(), d1); err != nil || !owned {
		t.Errorf("d1 still owned by A: %v %v", owned, err)
	}
	if owned, err := BlobOwned(ctx, db.Q(), "3333333333333333333333333333333333333333333333333333333333333333"); err != nil || owned {
		t.Errorf("unknown blob owned: %v %v", owned, err)
	}
}

// An audit entry's sequence number comes back, and its status can be
// corrected once the answer is known.
func TestAuditSeqAndStatus(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	var seq int64
	err := db.Tx(ctx, func(q Querier) error {
		var err error
		seq, err = AppendAudit(ctx, q, AuditEntry{Time: time.Unix(5, 0), Principal: "p", Operation: "o", Resource: "/r", Status: 200})
		return err
	})
	if err != nil || seq <= 0 {
		t.Fatalf("seq %d, %v", seq, err)
	}
	if err := SetAuditStatus(ctx, db.W(), seq, 201); err != nil {
		t.Fatal(err)
	}
	es, err := ListAudit(ctx, db.Q(), AuditFilter{})
	if err != nil || len(es) != 1 || es[0].Seq != seq || es[0].Status != 201 {
		t.Errorf("audit %+v, %v", es, err)
	}
}

// Migration 8 gives the blobs stored jobs reference (code snapshot and
// cumulus://blobs/ inputs) to the jobs' workspaces.
func TestBlobOwnersBackfill(t *testing.T) {
	db := openTest(t)
	sqliteOnly(t, db)
	ctx := context.Background()
	const ws = "/subscriptions/s/resourceGroups/g/providers/P/workspaces/W"
	code, input := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	j := queuedJob("u1", "j1", 1, 0, "", "")
	j.Parent = ws
	j.Doc.Properties.CodeID = ws + "/codes/c/versions/" + code
	j.Doc.Properties.Inputs = map[string]api.JobInput{"data": {JobInputType: "uri_folder", URI: "cumulus://blobs/" + input},
		"lit": {JobInputType: "literal", Value: "3"}, "web": {JobInputType: "uri_file", URI: "https://example.com/x"}}
	if err := InsertJob(ctx, db.W(), j); err != nil {
		t.Fatal(err)
	}
	plain := queuedJob("u2", "j2", 1, 0, "", "")
	plain.Parent = ws
	if err := InsertJob(ctx, db.W(), plain); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(backfillBlobOwners, ";\n") {
		if _, err := db.W().ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{code, input} {
		if o, err := GetBlobOwner(ctx, db.Q(), d, ws); err != nil || o.Principal != "cumulus" {
			t.Errorf("blob %s…: %+v, %v; want owned by the job's workspace", d[:4], o, err)
		}
	}
	var n int
	if err := db.Q().QueryRowContext(ctx, `SELECT count(*) FROM blob_owners`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d owners, %v; want 2", n, err)
	}
}
