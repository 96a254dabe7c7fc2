package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A job's state saved again is the same file rewritten, and reads back as
// the latest state whether it grew or shrank.
func TestWriteStateRewritesInPlace(t *testing.T) {
	p := filepath.Join(t.TempDir(), stateFile)
	save := func(s savedJob) {
		t.Helper()
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeState(p, b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() savedJob {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var s savedJob
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("state %q: %v", b, err)
		}
		return s
	}
	save(savedJob{UID: "u", Attempt: 1, Outputs: []string{"a-long-output-name", "another"}})
	ino := inode(t, p)
	save(savedJob{UID: "u", Attempt: 1, Acked: true})
	if s := read(); !s.Acked || len(s.Outputs) != 0 {
		t.Errorf("state after a shorter save = %+v", s)
	}
	save(savedJob{UID: "u", Attempt: 2, Outputs: []string{"a-much-longer-output-name-than-before", "x", "y"}})
	if s := read(); s.Attempt != 2 || len(s.Outputs) != 3 || s.Acked {
		t.Errorf("state after a longer save = %+v", s)
	}
	if inode(t, p) != ino {
		t.Error("a later save made a new file")
	}
}

// The job's user owns the folder and may put something of its own where
// the state file is between saves: a symbolic link, a file of its own, a
// hard link to another file, a FIFO. The agent (root) writes through none
// of them: it makes its own file there, as the first save does, and what
// the link named is left as it was.
func TestWriteStateWritesThroughNothingTheJobPlanted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent that writes as root, a file of another user")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, stateFile)
	victim := filepath.Join(dir, "victim")
	plant := map[string]func() error{
		"symlink": func() error {
			return os.Symlink(victim, p)
		},
		"hard link": func() error {
			return os.Link(victim, p)
		},
		"file of its own": func() error {
			if err := os.WriteFile(p, []byte(`{"uid":"planted"}`), 0o600); err != nil {
				return err
			}
			return os.Chown(p, 2000999007, 2000999007)
		},
		"file open to all": func() error {
			if err := os.WriteFile(p, []byte(`{"uid":"planted"}`), 0o600); err != nil {
				return err
			}
			return os.Chmod(p, 0o666)
		},
		"fifo": func() error {
			return syscall.Mkfifo(p, 0o600)
		},
	}
	for name, f := range plant {
		t.Run(name, func(t *testing.T) {
			os.Remove(p)
			if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := f(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- writeState(p, []byte(`{"uid":"u"}`)) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the save is blocked on the %s", name)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious" {
				t.Errorf("the file the %s named was written: %q", name, b)
			}
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Fatalf("state file after the save: %v, %v", fi, err)
			}
			if b, _ := os.ReadFile(p); string(b) != `{"uid":"u"}` {
				t.Errorf("state = %q", b)
			}
		})
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
