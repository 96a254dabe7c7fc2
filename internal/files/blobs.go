// Package files keeps the control plane's bulk data on disk beside the
// store: content-addressed blobs (code snapshots, input folders), job
// logs and job outputs. It also packs and unpacks the folder archives
// (gzip-compressed tar) those blobs and outputs are: the CLI packs code
// and inputs and unpacks outputs, the agent unpacks code and inputs and
// packs outputs.
package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrNotFound is returned (wrapped) for a missing blob, log or output.
var ErrNotFound = errors.New("not found")

// ErrDigest is returned when uploaded bytes do not match their name.
var ErrDigest = errors.New("content does not match its sha256")

// Blobs is a content-addressed store: a blob's name is its sha256.
type Blobs struct{ Dir string }

// ValidDigest reports whether s is a lower-case hex sha256.
func ValidDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (b Blobs) path(digest string) string {
	return filepath.Join(b.Dir, digest[:2], digest)
}

// Has reports whether the blob is stored.
func (b Blobs) Has(digest string) bool {
	if !ValidDigest(digest) {
		return false
	}
	_, err := os.Stat(b.path(digest))
	return err == nil
}

// Put stores r under digest, verifying the content; storing a blob that
// exists is a no-op (deduplication).
func (b Blobs) Put(digest string, r io.Reader, maxBytes int64) error {
	if !ValidDigest(digest) {
		return fmt.Errorf("blob name %q is not a sha256: %w", digest, ErrDigest)
	}
	if b.Has(digest) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r, maxBytes))
		return nil
	}
	return writeVerified(b.path(digest), digest, r, maxBytes)
}

// Open opens a stored blob.
func (b Blobs) Open(digest string) (*os.File, error) {
	if !ValidDigest(digest) {
		return nil, fmt.Errorf("blob %q: %w", digest, ErrNotFound)
	}
	f, err := os.Open(b.path(digest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", digest, ErrNotFound)
	}
	return f, err
}

// writeVerified writes r to path atomically; with a digest it checks it.
func writeVerified(path, digest string, r io.Reader, maxBytes int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".upload-*")
	if err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, maxBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	if n > maxBytes {
		return fmt.Errorf("upload is larger than %d bytes", maxBytes)
	}
	if digest != "" && hex.EncodeToString(h.Sum(nil)) != digest {
		return fmt.Errorf("blob %s: %w", digest, ErrDigest)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	return nil
}
