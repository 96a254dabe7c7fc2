package files

import (
	"errors"
	"strings"
	"testing"
)

// A log stops at its limit: the write that reaches it keeps the bytes up
// to the limit and a line that says so; later writes are ErrLogFull and
// change nothing. Below the limit, resends and gaps behave as before.
func TestLogStopsAtItsLimit(t *testing.T) {
	l := &Logs{Dir: t.TempDir(), Limit: 100}
	size, err := l.Append("u", 0, 0, []byte(strings.Repeat("a", 60)))
	if err != nil || size != 60 {
		t.Fatalf("first chunk: %d %v", size, err)
	}
	if size, err := l.Append("u", 0, 80, []byte("gap")); err != nil || size != 60 {
		t.Fatalf("a gap: %d %v, want the stored size", size, err)
	}
	size, err = l.Append("u", 0, 50, []byte(strings.Repeat("b", 70))) // 10 resent, 60 new: 20 past the limit
	if err != nil || size <= 100 {
		t.Fatalf("the chunk that reaches the limit: %d %v", size, err)
	}
	if _, err := l.Append("u", 0, size, []byte("more")); !errors.Is(err, ErrLogFull) {
		t.Fatalf("past the limit: %v, want ErrLogFull", err)
	}
	got, total, err := l.Read("u", 0, 0, 1000)
	if err != nil || total != size {
		t.Fatal(total, err)
	}
	want := strings.Repeat("a", 60) + strings.Repeat("b", 40) + "\n[cumulus: this log reached its limit of 100 bytes; the rest is not kept]\n"
	if string(got) != want {
		t.Errorf("log:\n%q\nwant\n%q", got, want)
	}
}
