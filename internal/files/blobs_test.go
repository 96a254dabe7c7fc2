package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Put verifies content also when the blob is stored already, bounds the
// size, and List and Remove see what is stored.
func TestBlobsPutVerifiesEvenWhenStored(t *testing.T) {
	b := Blobs{Dir: t.TempDir()}
	data := []byte("snapshot")
	d := digest(data)
	if n, err := b.Put(d, bytes.NewReader(data), 100); err != nil || n != int64(len(data)) {
		t.Fatalf("put: %d %v", n, err)
	}
	if _, err := b.Put(d, bytes.NewReader([]byte("forged")), 100); !errors.Is(err, ErrDigest) {
		t.Errorf("forged bytes for a stored digest: %v, want ErrDigest", err)
	}
	if n, err := b.Put(d, bytes.NewReader(data), 100); err != nil || n != int64(len(data)) {
		t.Errorf("put again: %d %v", n, err)
	}
	big := make([]byte, 101)
	if _, err := b.Put(digest(big), bytes.NewReader(big), 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too large: %v, want ErrTooLarge", err)
	}
	if _, err := b.Put(d, bytes.NewReader(append(data, big...)), 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too large for a stored digest: %v, want ErrTooLarge", err)
	}
	if got, err := b.List(); err != nil || !slices.Equal(got, []string{d}) {
		t.Errorf("list: %v %v", got, err)
	}
	if err := b.Remove(d); err != nil || b.Has(d) {
		t.Errorf("remove: %v, still there %v", err, b.Has(d))
	}
	if err := b.Remove(d); err != nil {
		t.Errorf("remove again: %v", err)
	}
	if got, err := (Blobs{Dir: t.TempDir() + "/none"}).List(); err != nil || len(got) != 0 {
		t.Errorf("list of nothing: %v %v", got, err)
	}
}
