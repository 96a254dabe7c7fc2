package secret

import (
	"regexp"
	"slices"
	"testing"
	"time"
)

var (
	uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// A random id is a version 4 UUID, never the same twice.
func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !uuidV4.MatchString(id) || seen[id] {
			t.Fatalf("id %q: not a fresh version 4 UUID", id)
		}
		seen[id] = true
	}
}

// Time ids are version 7 UUIDs that sort as their times do (as text, as
// an index keeps them), carry the millisecond they were made for, and
// differ within one millisecond.
func TestNewTimeID(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var ids []string
	seen := map[string]bool{}
	for i := range 1000 {
		at := t0.Add(time.Duration(i/10) * time.Millisecond) // ten ids a millisecond
		id := NewTimeID(at)
		if !uuidV7.MatchString(id) || seen[id] {
			t.Fatalf("id %q: not a fresh version 7 UUID", id)
		}
		seen[id] = true
		if got := id[0:8] + id[9:13]; got != hexMillis(at) {
			t.Fatalf("id %q: starts with %s, want the time %s", id, got, hexMillis(at))
		}
		ids = append(ids, id)
	}
	for i := 10; i < len(ids); i++ {
		if ids[i] <= ids[i-10] {
			t.Fatalf("id %q of a later millisecond sorts before %q", ids[i], ids[i-10])
		}
	}
	if sorted := slices.Sorted(slices.Values(ids)); sorted[0][:13] != ids[0][:13] || sorted[len(sorted)-1][:13] != ids[len(ids)-1][:13] {
		t.Fatalf("sorted ids run from %s to %s, not from the first time to the last", sorted[0], sorted[len(sorted)-1])
	}
}

func hexMillis(at time.Time) string {
	const digits = "0123456789abcdef"
	ms := uint64(at.UnixMilli())
	b := make([]byte, 12)
	for i := range b {
		b[i] = digits[ms>>(44-4*i)&0xf]
	}
	return string(b)
}
