package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/pgtest"
)

// fill puts one of everything Copy moves into db.
func fill(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000).UTC()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := Put(ctx, db.W(), "workspace", "/subscriptions/s/resourcegroups/r", "ws", map[string]string{"a": "b"}, 0, now)
	must(err)
	must(InsertOperation(ctx, db.W(), Operation{ID: "op1", Kind: "create", Target: "/x", Status: "InProgress", Started: now}))
	must(PutPrincipal(ctx, db.W(), Principal{Name: "alice", Kind: "User", Created: now}))
	must(InsertToken(ctx, db.W(), Token{ID: "t1", Name: "alice", Hash: "h1", Role: "Owner", Created: now}))
	_, err = db.W().ExecContext(ctx, `UPDATE tokens SET revoked = 1 WHERE id = 't1'`)
	must(err)
	must(PutRoleAssignment(ctx, db.W(), RoleAssignment{ID: "ra1", Principal: "alice", Role: "Reader", Scope: "/", Created: now}))
	must(PutSecret(ctx, db.W(), "sec", []byte{0, 1, 2, 255}))
	must(PutNode(ctx, db.W(), Node{ID: "n1", Compute: "/C", State: api.NodeIdle, Created: now}))
	for i, name := range []string{"j1", "j2"} {
		j := inGroup(queuedJob("u"+name, name, 2, i, "img", ""), "team-a")
		j.Doc.Properties.Waiting = &api.Block{Kind: api.BlockQuota}
		j.Doc.Properties.MinRuntime = "PT20M"
		if i == 1 { // a run in the cost ledger
			j.Doc.Properties.Attempts = []api.Attempt{{Number: 1, Nodes: []string{"n1"}, Assigned: &now}}
		}
		must(InsertJob(ctx, db.W(), j))
	}
	_, err = AppendAudit(ctx, db.W(), AuditEntry{Time: now, Principal: "alice", Operation: "PUT", Resource: "/x", Status: 200})
	must(err)
	must(PutBlobOwner(ctx, db.W(), BlobOwner{Digest: "d1", Workspace: "/ws", Size: 3, Uploaded: now, Principal: "alice"}))
	must(PutBlobPath(ctx, db.W(), BlobEntry{Workspace: "/ws", Container: "c", Path: "a/b", Digest: "d1", Size: 3, MD5: "m", ContentType: "text/plain",
		Metadata: map[string]string{"k": "v"}, Created: now, Modified: now, ETag: `"0x1"`}))
	must(PutBlock(ctx, db.W(), "/ws", "c", "big", Block{ID: "YQ==", Digest: "d1", Size: 3}, now))
	_, err = PutLock(ctx, db.W(), "/ws", api.Lock{ID: api.LockID("/ws", "l"), Name: "l", Properties: api.LockProperties{Level: api.LockReadOnly}}, now)
	must(err)
	must(PutMetrics(ctx, db.W(), "uj1", []Metric{{Name: "loss", Value: 0.5, Step: 1, Time: now}}))
	must(PutParams(ctx, db.W(), "uj1", []RunValue{{Name: "lr", Value: "0.1"}}))
	must(PlanBatches(ctx, db.W(), "uj1", []int{3}))
	must(PutShareUsage(ctx, db.W(), "/c", "team-a", ShareUsage{Value: 3600.5, At: now, Held: 2}))
}

// TestCopySQLiteToPostgres: every kind of state arrives, the counts agree,
// and the numbers PostgreSQL hands out next follow the copied ones; a
// second copy into the now full database is refused and changes nothing.
func TestCopySQLiteToPostgres(t *testing.T) {
	ctx := context.Background()
	src, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "cumulus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fill(t, src)
	dst, err := OpenPostgres(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	report, err := Copy(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range copied {
		want := 1
		switch tb.table {
		case "jobs":
			want = 2
		case "job_params": // a param and the job's counts: metric values, params, bytes
			want = 4
		}
		if report[tb.table] != want {
			t.Errorf("%s: copied %d rows, want %d", tb.table, report[tb.table], want)
		}
	}
	if d, err := Get[map[string]string](ctx, dst.Q(), "workspace", "/subscriptions/s/resourcegroups/r", "ws"); err != nil || d.Value["a"] != "b" {
		t.Errorf("workspace: %+v %v", d, err)
	}
	toks, err := ListTokens(ctx, dst.Q(), "alice")
	if err != nil || len(toks) != 1 || !toks[0].Revoked || toks[0].Hash != "h1" {
		t.Errorf("tokens: %+v %v", toks, err)
	}
	if e, err := GetBlobPath(ctx, dst.Q(), "/ws", "c", "a/b"); err != nil || e.Digest != "d1" || e.Metadata["k"] != "v" {
		t.Errorf("blob path: %+v %v", e, err)
	}
	if b, err := GetSecret(ctx, dst.Q(), "sec"); err != nil || string(b) != string([]byte{0, 1, 2, 255}) {
		t.Errorf("secret: %v %v", b, err)
	}
	q, err := QueuedJobs(ctx, dst.Q(), "/c", 10)
	if err != nil || len(q) != 2 || q[0].UID != "uj2" || !q[0].QuotaWait || q[0].Nodes != 2 {
		t.Errorf("queued jobs: %+v %v", q, err)
	}
	if g, err := QueuedJobsByGroup(ctx, dst.Q(), "/c", 10); err != nil || len(g) != 2 || g[0].Group != "team-a" {
		t.Errorf("queued jobs by group: %+v %v", g, err)
	}
	if r, err := RunningJobs(ctx, dst.Q(), "/c"); err != nil || len(r) != 0 {
		t.Errorf("running jobs: %+v %v", r, err)
	}
	if u, err := ShareUsages(ctx, dst.Q(), "/c"); err != nil || u["team-a"] != (ShareUsage{Value: 3600.5, At: time.UnixMilli(1_700_000_000_000).UTC(), Held: 2}) {
		t.Errorf("share usage: %+v %v", u, err)
	}
	if counts, err := NodeCounts(ctx, dst.Q(), "/C"); err != nil || counts[api.NodeIdle] != 1 {
		t.Errorf("node counts: %v %v", counts, err)
	}
	if n, err := CountJobs(ctx, dst.Q(), "/c", api.JobQueued); err != nil || n != 2 {
		t.Errorf("CountJobs: %d %v", n, err)
	}
	j := queuedJob("u3", "j3", 1, 0, "", "")
	if err := InsertJob(ctx, dst.W(), j); err != nil || j.Seq != 3 {
		t.Errorf("next job: seq %d, %v; want 3", j.Seq, err)
	}
	if seq, err := AppendAudit(ctx, dst.W(), AuditEntry{Time: time.Now(), Principal: "bob", Operation: "PUT", Resource: "/y", Status: 200}); err != nil || seq != 2 {
		t.Errorf("next audit entry: seq %d, %v; want 2", seq, err)
	}
	if _, err := Copy(ctx, src, dst); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("a copy into a full store: %v, want ErrNotEmpty", err)
	}
	if n, _ := CountJobs(ctx, dst.Q(), "/c", api.JobQueued); n != 3 {
		t.Errorf("after the refused copy: %d jobs, want 3", n)
	}
}

// TestBackupIsAWorkingStore: a backup taken while the store is open opens
// as a store with the same state, and is the owner's alone.
func TestBackupIsAWorkingStore(t *testing.T) {
	ctx := context.Background()
	src, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "cumulus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fill(t, src)
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := src.Backup(ctx, path); err != nil {
		t.Fatal(err)
	}
	if err := src.Backup(ctx, path); err == nil {
		t.Error("a backup over an existing file was not refused")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup file mode %v, %v; want 0600", fi.Mode(), err)
	}
	b, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n, err := CountJobs(ctx, b.Q(), "/c", api.JobQueued); err != nil || n != 2 {
		t.Errorf("jobs in the backup: %d %v", n, err)
	}
	if toks, err := ListTokens(ctx, b.Q(), ""); err != nil || len(toks) != 1 {
		t.Errorf("tokens in the backup: %v %v", toks, err)
	}
}
