package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A container's blobs by path: case-sensitive names, prefix listings in
// byte order with paging, folders, metadata, deletion, and the digests
// they keep from the collector.
func TestBlobPaths(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	const ws, other = "/subscriptions/s/resourceGroups/g/providers/P/workspaces/A", "/subscriptions/s/resourceGroups/g/providers/P/workspaces/B"
	d1, d2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	put := func(w, c, p, d string) {
		t.Helper()
		if err := PutBlobPath(ctx, db.W(), BlobEntry{Workspace: w, Container: c, Path: p, Digest: d, Size: 1, MD5: "m", ContentType: "text/plain",
			Metadata: map[string]string{"k": p}, Created: t0, Modified: t0, ETag: `"0x1"`}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"dir/a", "dir/B", "dir/sub/c", "dir0", "di", "dir/\u00e9"} {
		put(ws, "c1", p, d1)
	}
	put(ws, "c2", "dir/a", d2)
	put(other, "c1", "dir/x", d2)

	names := func(es []BlobEntry) string {
		var out []string
		for _, e := range es {
			out = append(out, e.Path)
		}
		return strings.Join(out, ",")
	}
	all, err := ListBlobPaths(ctx, db.Q(), ws, "c1", "dir/", "", 100)
	if err != nil || names(all) != "dir/B,dir/a,dir/sub/c,dir/\u00e9" {
		t.Fatalf("list dir/ = %s (%v)", names(all), err)
	}
	page, _ := ListBlobPaths(ctx, db.Q(), ws, "c1", "dir/", "dir/a", 1)
	if names(page) != "dir/sub/c" {
		t.Errorf("page after dir/a = %s", names(page))
	}
	e, err := GetBlobPath(ctx, db.Q(), strings.ToUpper(ws), "c1", "dir/B")
	if err != nil || e.Metadata["k"] != "dir/B" || !e.Created.Equal(t0) {
		t.Errorf("get dir/B = %+v, %v", e, err)
	}
	if _, err := GetBlobPath(ctx, db.Q(), ws, "c1", "dir/b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("paths are case-sensitive, but dir/b was found: %v", err)
	}
	for _, c := range []struct {
		path   string
		folder bool
		want   bool
	}{{"dir", true, true}, {"dir/", true, true}, {"dir/sub", true, true}, {"dir/a", false, true}, {"dir/sub", false, false}, {"nope", true, false}, {"", true, true}} {
		if ok, err := BlobPathExists(ctx, db.Q(), ws, "c1", c.path, c.folder); err != nil || ok != c.want {
			t.Errorf("exists %q folder=%v = %v (%v)", c.path, c.folder, ok, err)
		}
	}
	if ok, _ := BlobDigestUnder(ctx, db.Q(), ws, "c1", "dir", d1, true); !ok {
		t.Error("d1 is under dir/")
	}
	if ok, _ := BlobDigestUnder(ctx, db.Q(), ws, "c1", "dir", d2, true); ok {
		t.Error("d2 is not under c1's dir/ (only in c2 and in another workspace)")
	}
	if err := SetBlobMetadata(ctx, db.W(), ws, "c1", "dir/a", map[string]string{"upload_status": "completed"}, t0.Add(time.Second), `"0x2"`); err != nil {
		t.Fatal(err)
	}
	if e, _ := GetBlobPath(ctx, db.Q(), ws, "c1", "dir/a"); e.Metadata["upload_status"] != "completed" || e.ETag != `"0x2"` {
		t.Errorf("metadata = %+v", e)
	}
	if err := SetBlobMetadata(ctx, db.W(), ws, "c1", "nope", nil, t0, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("metadata of a missing blob: %v", err)
	}
	if n, err := DeleteBlobFolder(ctx, db.W(), ws, "c1", "dir/"); err != nil || n != 4 {
		t.Errorf("deleted %d (%v), want the 4 under dir/", n, err)
	}
	if rest, _ := ListBlobPaths(ctx, db.Q(), ws, "c1", "", "", 100); names(rest) != "di,dir0" {
		t.Errorf("left = %s", names(rest))
	}

	// Blocks wait for their list; old ones are dropped.
	if err := PutBlock(ctx, db.W(), ws, "c1", "big", Block{ID: "YQ==", Digest: d1, Size: 3}, t0); err != nil {
		t.Fatal(err)
	}
	if err := PutBlock(ctx, db.W(), ws, "c1", "big", Block{ID: "Yg==", Digest: d2, Size: 4}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if bs, err := Blocks(ctx, db.Q(), ws, "c1", "big"); err != nil || len(bs) != 2 || bs["Yg=="].Digest != d2 {
		t.Errorf("blocks = %+v, %v", bs, err)
	}
	if n, err := DeleteBlocksBefore(ctx, db.W(), t0.Add(time.Minute)); err != nil || n != 1 {
		t.Errorf("stale blocks dropped: %d, %v", n, err)
	}

	// The collector keeps what a path or a block names.
	for _, o := range []BlobOwner{{d1, ws, 1, t0, "a"}, {d2, ws, 1, t0, "a"}, {d2, other, 1, t0, "b"}} {
		if err := PutBlobOwner(ctx, db.W(), o); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := UnreferencedBlobOwners(ctx, db.Q(), t0.Add(time.Hour), 100)
	if err != nil || len(stale) != 0 {
		t.Errorf("unreferenced while named: %+v, %v", stale, err)
	}
	if err := DeleteWorkspaceBlobs(ctx, db.W(), ws); err != nil {
		t.Fatal(err)
	}
	stale, _ = UnreferencedBlobOwners(ctx, db.Q(), t0.Add(time.Hour), 100)
	if len(stale) != 2 {
		t.Errorf("after the workspace's paths went: %+v", stale)
	}
}

// BenchmarkListBlobPaths lists a folder of 10,000 blobs in pages of
// 1,000, as a node's file list of a large input does.
func BenchmarkListBlobPaths(b *testing.B) {
	db := openTest(b)
	ctx := context.Background()
	const ws = "/subscriptions/s/resourceGroups/g/providers/P/workspaces/A"
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	err := db.Tx(ctx, func(q Querier) error {
		for i := range 10000 {
			if err := PutBlobPath(ctx, q, BlobEntry{Workspace: ws, Container: "c", Path: fmt.Sprintf("data/part-%05d.csv", i), Digest: strings.Repeat("a", 64),
				Size: 1, MD5: "m", ContentType: "text/csv", Created: t0, Modified: t0, ETag: "e"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		n, after := 0, ""
		for {
			es, err := ListBlobPaths(ctx, db.Q(), ws, "c", "data/", after, 1000)
			if err != nil {
				b.Fatal(err)
			}
			n += len(es)
			if len(es) < 1000 {
				break
			}
			after = es[len(es)-1].Path
		}
		if n != 10000 {
			b.Fatalf("listed %d", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/blob")
}
