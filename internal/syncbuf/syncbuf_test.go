package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers at once lose nothing, and a reader may read while they write
// (the race detector checks the reads).
func TestWritersAtOnceLoseNothing(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("%d bytes written, want 800", len(got))
	}
}
