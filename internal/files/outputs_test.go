package files

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// put packs a folder made of files (path → content) as one rank's upload.
func put(t *testing.T, o Outputs, uid, name string, attempt, rank int, fs map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for p, c := range fs {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := Pack(&b, dir); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(uid, name, attempt, rank, &b, 1<<20); err != nil {
		t.Fatal(err)
	}
}

// latest is o.Open with the parts given as empty ones.
func latest(o Outputs, empty ...Part) func(uid, name string) (*os.File, error) {
	return func(uid, name string) (*os.File, error) { return o.Open(uid, name, empty...) }
}

// read unpacks what a reader of the output gets.
func read(t *testing.T, open func(uid, name string) (*os.File, error), uid, name string) map[string]string {
	t.Helper()
	f, err := open(uid, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	if err := Unpack(f, dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			got[filepath.ToSlash(rel)] = string(b)
		}
		return err
	})
	return got
}

// Every rank's files are in the job's output: rank 0's model saved after
// the others finished included, each rank's own file, and a file all
// ranks wrote alike once.
func TestOutputsMergeRanks(t *testing.T) {
	o := Outputs{Dir: t.TempDir()}
	put(t, o, "j", "default", 1, 1, map[string]string{"rank1.txt": "one", "config.json": "{}"})
	put(t, o, "j", "default", 1, 2, map[string]string{"rank2.txt": "two", "config.json": "{}"})
	put(t, o, "j", "default", 1, 0, map[string]string{"model.pt": "weights", "rank0.txt": "zero", "config.json": "{}", "sub/a": "a"})
	got := read(t, latest(o), "j", "default")
	want := map[string]string{"model.pt": "weights", "rank0.txt": "zero", "rank1.txt": "one", "rank2.txt": "two", "config.json": "{}", "sub/a": "a"}
	if len(got) != len(want) {
		t.Fatalf("merged output = %v; want %v", got, want)
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("%s = %q; want %q", p, got[p], c)
		}
	}
}

// Ranks that wrote one path differently: rank 0's copy keeps the path,
// the others are kept beside it and listed; nothing is dropped.
func TestOutputsMergeConflicts(t *testing.T) {
	o := Outputs{Dir: t.TempDir()}
	put(t, o, "j", "default", 1, 0, map[string]string{"metrics.json": "from 0"})
	put(t, o, "j", "default", 1, 1, map[string]string{"metrics.json": "from 1"})
	put(t, o, "j", "default", 1, 2, map[string]string{"metrics.json": "from 0"})
	got := read(t, latest(o), "j", "default")
	if got["metrics.json"] != "from 0" || got["metrics.json.rank1"] != "from 1" {
		t.Errorf("merged = %v; want rank 0's copy at the path and rank 1's beside it", got)
	}
	if _, dup := got["metrics.json.rank2"]; dup {
		t.Errorf("rank 2's copy equals rank 0's and was kept twice: %v", got)
	}
	if r := got[ConflictsFile]; !strings.Contains(r, "metrics.json: kept rank 0; also ranks 1") {
		t.Errorf("%s = %q; want the conflict listed", ConflictsFile, r)
	}
}

// The job's output is its latest attempt's; a checkpoint is every
// attempt's, a later attempt's file replacing an earlier one's.
func TestOutputsAcrossAttempts(t *testing.T) {
	o := Outputs{Dir: t.TempDir()}
	for _, name := range []string{"default", "checkpoint"} {
		put(t, o, "j", name, 1, 0, map[string]string{"shard0": "a1", "old": "x"})
		put(t, o, "j", name, 1, 1, map[string]string{"shard1": "a1"})
		put(t, o, "j", name, 2, 0, map[string]string{"shard0": "a2"})
		put(t, o, "j", name, 2, 1, map[string]string{"shard1": "a2"})
	}
	if got := read(t, latest(o), "j", "default"); len(got) != 2 || got["shard0"] != "a2" || got["shard1"] != "a2" {
		t.Errorf("output = %v; want attempt 2's shards only", got)
	}
	got := read(t, o.OpenAll, "j", "checkpoint")
	if len(got) != 3 || got["shard0"] != "a2" || got["shard1"] != "a2" || got["old"] != "x" {
		t.Errorf("checkpoint = %v; want attempt 2's shards and attempt 1's other file", got)
	}
	if _, conflict := got[ConflictsFile]; conflict {
		t.Errorf("a newer attempt's file is an update, not a conflict: %v", got)
	}
	if n := o.Names("j"); len(n) != 2 || n[0] != "checkpoint" || n[1] != "default" {
		t.Errorf("names = %v", n)
	}
	if _, err := o.Open("j", "missing"); err == nil {
		t.Error("a missing output opened")
	}
}

// A part its node left empty, which the caller knows of (the job keeps
// it) rather than a file here, counts as an upload of an empty folder: a
// later attempt left empty has an empty output, not an earlier attempt's,
// and another rank's files of the same attempt are all of it.
func TestOutputsEmptyParts(t *testing.T) {
	o := Outputs{Dir: t.TempDir()}
	if _, err := o.Open("j", "default", Part{Attempt: 1, Rank: 0}); err != nil {
		t.Fatalf("an output left empty, with no upload at all, does not open: %v", err)
	}
	if got := read(t, latest(o, Part{Attempt: 1, Rank: 0}), "j", "default"); len(got) != 0 {
		t.Errorf("output left empty = %v; want no files", got)
	}
	if ps := o.Latest("j", "default", Part{Attempt: 1, Rank: 0}); len(ps) != 1 || !AllEmpty(ps) {
		t.Errorf("latest parts of an output left empty = %v", ps)
	}
	if ps := o.Latest("j", "default"); len(ps) != 0 {
		t.Errorf("latest parts of no output = %v", ps)
	}

	put(t, o, "j", "default", 1, 0, map[string]string{"model": "a1"})
	second := Part{Attempt: 2, Rank: 0}
	if got := read(t, latest(o, second), "j", "default"); len(got) != 0 {
		t.Errorf("output = %v; want attempt 2's, left empty, not attempt 1's files", got)
	}
	if got := read(t, latest(o), "j", "default"); got["model"] != "a1" {
		t.Errorf("output without the empty part = %v; want attempt 1's files", got)
	}
	put(t, o, "j", "default", 2, 1, map[string]string{"shard1": "a2"})
	if got := read(t, latest(o, second), "j", "default"); len(got) != 1 || got["shard1"] != "a2" {
		t.Errorf("output = %v; want rank 1's files of attempt 2 alone", got)
	}
	if ps := o.Latest("j", "default", second); len(ps) != 2 || AllEmpty(ps) {
		t.Errorf("latest parts with a rank's files in attempt 2 = %v", ps)
	}
	if n := o.Names("k", "default"); len(n) != 1 || n[0] != "default" {
		t.Errorf("names of a job whose only output was left empty = %v", n)
	}
}
