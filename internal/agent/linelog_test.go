package agent

import (
	"bytes"
	"testing"
)

func TestLineLogPrefixesWholeLines(t *testing.T) {
	var buf bytes.Buffer
	l := &lineLog{w: &buf}
	a, b := l.prefixed("[rank 0] "), l.prefixed("[rank 1] ")
	a.Write([]byte("hel"))
	b.Write([]byte("one\ntw"))
	a.Write([]byte("lo\n"))
	b.Write([]byte("o"))
	l.flush()
	want := "[rank 1] one\n[rank 0] hello\n[rank 1] two\n"
	if buf.String() != want {
		t.Fatalf("log = %q, want %q", buf.String(), want)
	}
}
