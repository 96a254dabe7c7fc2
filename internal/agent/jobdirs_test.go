package agent

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// The folder of a pruned isolated job is the folder of its owner's next
// job, as a new one would be: the earlier job's files and log are gone,
// its outputs and checkpoint folders are empty, and what it changed on
// them (mode, extended attributes) is undone. Another owner's job gets a
// folder of its own.
func TestLaterJobGetsAPrunedJobsFolderReset(t *testing.T) {
	needRoot(t)
	const uid = "2000999003"
	f := newFakeServer(t)
	ra := startAgent(t, f, func(c *Config) { c.JobUser = uid; c.KeepJobDirs = 1 })
	jobs := filepath.Join(ra.cfg.WorkDir, "jobs")
	run := func(job, owner, command string) (home uint64) {
		t.Helper()
		f.send(agentapi.PollResponse{Assign: &agentapi.Assignment{UID: job, Name: job, Attempt: 1, Grace: time.Second,
			Owner: owner, Command: command}})
		if ev := f.exited(job, 30*time.Second); ev.ExitCode != 0 {
			t.Fatalf("%s exited %+v; log:\n%s", job, ev, f.logOf(job))
		}
		fi, err := os.Stat(filepath.Join(jobs, job))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	kept := func(job, owner string) {
		t.Helper()
		f.waitFor(30*time.Second, job+"'s folder kept as a spare", func() bool {
			_, err := os.Stat(filepath.Join(ra.cfg.WorkDir, sparesDir, spareTag(owner)+job))
			return err == nil
		})
	}
	first := run("first", "alice", `echo first-job-wrote-this
echo secret > "$HOME/left"; echo secret > "$CUMULUS_CHECKPOINT_DIR/ckpt"; mkdir "$CUMULUS_OUTPUT_DIR/sub"
chmod 0777 "$CUMULUS_OUTPUT_DIR"`)
	// An attribute its user may set (the job's user could, with setfattr).
	if err := unix.Setxattr(filepath.Join(jobs, "first", outputDir), "user.note", []byte("secret"), 0); err != nil {
		t.Fatal(err)
	}
	run("second", "alice", "true") // its acknowledgement prunes the first job's folder
	kept("first", "alice")

	if other := run("other", "bob", "true"); other == first {
		t.Errorf("bob's job got the folder of alice's (inode %d)", first)
	}
	kept("second", "alice")

	if again := run("again", "alice", `stat -c '%n %a' "$CUMULUS_OUTPUT_DIR" "$CUMULUS_CHECKPOINT_DIR" | sed "s|$HOME/||"
ls -A "$HOME" "$CUMULUS_OUTPUT_DIR" "$CUMULUS_CHECKPOINT_DIR"`); again != first {
		t.Errorf("alice's next job did not get the folder of her first (inode %d, got %d)", first, again)
	}
	log := f.logOf("again")
	for _, want := range []string{"outputs 755\n", "checkpoint 755\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("the job's log lacks %q:\n%s", want, log)
		}
	}
	for _, left := range []string{"left", "ckpt", "sub", "first-job-wrote-this"} {
		if strings.Contains(log, left) {
			t.Errorf("the job sees %q of the first job:\n%s", left, log)
		}
	}
	names, err := xattrList(filepath.Join(jobs, "again", outputDir))
	if err != nil || slices.Contains(names, "user.note") {
		t.Errorf("the job's outputs folder has attributes %q (%v), want none of the first job's", names, err)
	}
}

func xattrList(path string) ([]string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return xattrNames(fd)
}

// A folder is kept only when every part of it can be reset; a state file
// the agent did not make (another mode) and a checkpoint folder replaced
// by a link are dropped from it, and a folder with an inode flag its user
// set is not kept.
func TestResetJobDir(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, outputDir), 0o700))
	must(os.WriteFile(filepath.Join(dir, outputDir, "model.pt"), []byte("weights"), 0o644))
	elsewhere := t.TempDir() // what a link the job made points at
	must(os.WriteFile(filepath.Join(elsewhere, "keep"), nil, 0o644))
	must(os.Symlink(elsewhere, filepath.Join(dir, checkpointDir)))
	must(os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"uid":"old"}`), 0o644)) // not the agent's mode: the job's
	must(os.WriteFile(filepath.Join(dir, logFile), []byte("old log"), 0o644))
	must(os.Chmod(dir, 0o700))

	must(resetJobDir(dir))
	ents, err := os.ReadDir(dir)
	must(err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{outputDir, logFile}) {
		t.Errorf("the reset folder holds %q, want only %s and %s", names, outputDir, logFile)
	}
	if b, err := os.ReadFile(filepath.Join(dir, logFile)); err != nil || len(b) != 0 {
		t.Errorf("the agent's log file holds %q (%v), want it kept and empty", b, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, outputDir)); len(ents) != 0 {
		t.Errorf("the outputs folder still holds %d entries", len(ents))
	}
	for _, p := range []string{dir, filepath.Join(dir, outputDir)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v (%v), want 0755", p, fi.Mode(), err)
		}
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "keep")); err != nil {
		t.Errorf("the reset followed the checkpoint link: %v", err)
	}

	// The agent's own state file stays, emptied.
	must(os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"uid":"old"}`), 0o600))
	must(resetJobDir(dir))
	if b, err := os.ReadFile(filepath.Join(dir, stateFile)); err != nil || len(b) != 0 {
		t.Errorf("the agent's state file holds %q (%v), want it kept and empty", b, err)
	}

	// An inode flag the folder's user set (no-dump) keeps the folder from
	// being reused.
	fd, err := unix.Open(filepath.Join(dir, outputDir), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(err)
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the file system of %s keeps no inode flags", dir)
	}
	must(err)
	must(unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|0x40))) // FS_NODUMP_FL
	if err := resetJobDir(dir); err == nil || !strings.Contains(err.Error(), "inode flags") {
		t.Errorf("a folder with a flag its user set was reset (err %v), want it refused", err)
	}
}

// Only the folder of a job whose processes all ended, with a known
// submitter, is kept, and only that submitter's next job takes it.
func TestSpareOnlyForTheSameSubmitter(t *testing.T) {
	a := &agent{cfg: Config{WorkDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	jobs := filepath.Join(a.cfg.WorkDir, "jobs")
	folder := func(name string) string {
		t.Helper()
		d := filepath.Join(jobs, name)
		if err := os.MkdirAll(filepath.Join(d, outputDir), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		name, owner string
		ended       bool
	}{{"running-left", "alice", false}, {"no-owner", "", true}} {
		if err := a.retireJobDir(folder(c.name), c.owner, c.ended); err != nil {
			t.Fatal(err)
		}
		if ents, _ := os.ReadDir(a.sparesDir()); len(ents) != 0 {
			t.Errorf("%s: kept as a spare (%d spares)", c.name, len(ents))
		}
		if _, err := os.Stat(filepath.Join(jobs, c.name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: not removed (%v)", c.name, err)
		}
	}
	if err := a.retireJobDir(folder("done"), "alice", true); err != nil {
		t.Fatal(err)
	}
	if a.takeSpare(filepath.Join(jobs, "bobs"), "bob") || a.takeSpare(filepath.Join(jobs, "anon"), "") {
		t.Error("another submitter's job (or one of no known submitter) took alice's spare")
	}
	if !a.takeSpare(filepath.Join(jobs, "alices"), "alice") {
		t.Error("alice's next job did not get her spare")
	}
	if _, err := os.Stat(filepath.Join(jobs, "alices", outputDir)); err != nil {
		t.Errorf("the spare has no outputs folder: %v", err)
	}
}
