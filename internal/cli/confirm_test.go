package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the controlling side, and the terminal
// a program reads as its stdin.
func openPTY(t *testing.T) (ctl, term *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		ctl.Close()
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	term, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ctl.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close(); ctl.Close() })
	return ctl, term
}

// compute delete without --yes asks on a terminal and deletes on "y";
// without a terminal it refuses, naming --yes.
func TestComputeDeleteAsksOnATerminal(t *testing.T) {
	_, cfg := startDaemon(t, nil)
	if _, errOut, code := run(t, "--config", cfg, "compute", "create", "-n", "asked", "--no-wait"); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	stdin := os.Stdin
	t.Cleanup(func() { os.Stdin = stdin })

	ctl, term := openPTY(t)
	os.Stdin = term
	if _, err := ctl.WriteString("n\n"); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, "--config", cfg, "compute", "delete", "-n", "asked")
	if code == 0 || !strings.Contains(errOut, "Delete compute asked and all its nodes? (y/n)") || !strings.Contains(errOut, "not deleted") {
		t.Fatalf("answered n: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run(t, "--config", cfg, "compute", "show", "-n", "asked"); code != 0 {
		t.Fatalf("the compute is gone after n: %s", errOut)
	}
	if _, err := ctl.WriteString("y\n"); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code = run(t, "--config", cfg, "compute", "delete", "-n", "asked"); code != 0 || !strings.Contains(errOut, "(y/n)") {
		t.Fatalf("answered y: exit %d, %q", code, errOut)
	}
	if _, errOut, code := run(t, "--config", cfg, "compute", "show", "-n", "asked"); code == 0 || !strings.Contains(errOut, "ResourceNotFound") {
		t.Fatalf("the compute is still there after y: %d %s", code, errOut)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("y\n")
	w.Close()
	defer r.Close()
	os.Stdin = r
	if _, errOut, code = run(t, "--config", cfg, "compute", "delete", "-n", "other"); code == 0 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("not a terminal: exit %d, %q", code, errOut)
	}
}
