package local

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Two nodes folders whose hashes meet get different blocks of job users
// (the next free one, wrapping after the last); a folder keeps its block;
// a block claimed for a folder that is gone is taken over.
func TestClaimBlock(t *testing.T) {
	claims := filepath.Join(t.TempDir(), "job-users")
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	claim := func(dir string, start int) int {
		t.Helper()
		block, err := claimBlock(claims, dir, start)
		if err != nil {
			t.Fatal(err)
		}
		return block
	}
	if got := claim(a, 7); got != 7 {
		t.Fatalf("the first folder got block %d, want its own 7", got)
	}
	if got := claim(b, 7); got != 8 {
		t.Errorf("a second folder hashed to the same block got %d, want the next, 8", got)
	}
	if got := claim(a, 7); got != 7 {
		t.Errorf("the first folder's block is now %d, want 7 still", got)
	}
	last := jobUIDBlocks - 1
	if got := claim(t.TempDir(), last); got != last {
		t.Errorf("a folder hashed to the last block got %d", got)
	}
	if got := claim(t.TempDir(), last); got != 0 {
		t.Errorf("another folder hashed to the last block got %d, want the first, 0", got)
	}
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if got := claim(c, 7); got != 7 {
		t.Errorf("a folder got block %d, want 7, whose folder is gone", got)
	}
	if fi, err := os.Stat(claims); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the claims folder: %v %v, want mode 0700", fi.Mode(), err)
	}
}

// A server whose nodes folder hashes to a block another server's folder
// holds gives its nodes users of another block.
func TestJobUsersOfAHeldBlockGoElsewhere(t *testing.T) {
	claims := t.TempDir()
	base := t.TempDir()
	held := hashBlock(base)
	other := t.TempDir() // another server's nodes folder, still there
	if err := os.WriteFile(filepath.Join(claims, strconv.Itoa(held)), []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	p := New(Options{BaseDir: base, JobUsersDir: claims})
	if err := os.MkdirAll(filepath.Join(base, "n1", workDir), 0o755); err != nil {
		t.Fatal(err)
	}
	uid, err := p.jobUID("n1")
	if err != nil {
		t.Fatal(err)
	}
	if block := (uid - jobUIDBase) / jobUIDBlock; block == held {
		t.Errorf("the node's job user %d is in block %d, which another nodes folder holds", uid, held)
	}
}
