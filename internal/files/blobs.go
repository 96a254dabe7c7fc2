// Package files keeps the control plane's bulk data on disk beside the
// store: content-addressed blobs (code snapshots, input folders), job
// logs and job outputs. It also packs and unpacks the folder archives
// (gzip-compressed tar) those blobs and outputs are: the CLI packs code
// and inputs and unpacks outputs, the agent unpacks code and inputs and
// packs outputs.
package files

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotFound is returned (wrapped) for a missing blob, log or output.
var ErrNotFound = errors.New("not found")

// ErrDigest is returned when uploaded bytes do not match their name.
var ErrDigest = errors.New("content does not match its sha256")

// ErrTooLarge is returned (wrapped) when an upload exceeds its limit.
var ErrTooLarge = errors.New("upload too large")

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

// Put stores r under digest, verifying the content, and returns its
// size. Storing a blob that exists writes nothing (deduplication) but
// still reads and verifies the content: an upload proves that its sender
// holds the bytes, not only their digest.
func (b Blobs) Put(digest string, r io.Reader, maxBytes int64) (int64, error) {
	if !ValidDigest(digest) {
		return 0, fmt.Errorf("blob name %q is not a sha256: %w", digest, ErrDigest)
	}
	if b.Has(digest) {
		return verify(digest, r, maxBytes)
	}
	return writeCounted(b.path(digest), digest, r, maxBytes)
}

// verify reads r to its end and checks its size and digest.
func verify(digest string, r io.Reader, maxBytes int64) (int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, maxBytes+1))
	if err != nil {
		return n, fmt.Errorf("read upload: %w", err)
	}
	if n > maxBytes {
		return n, fmt.Errorf("upload is larger than %d bytes: %w", maxBytes, ErrTooLarge)
	}
	if hex.EncodeToString(h.Sum(nil)) != digest {
		return n, fmt.Errorf("blob %s: %w", digest, ErrDigest)
	}
	return n, nil
}

// Remove deletes a stored blob; a missing one is not an error.
func (b Blobs) Remove(digest string) error {
	if !ValidDigest(digest) {
		return fmt.Errorf("blob %q: %w", digest, ErrNotFound)
	}
	if err := os.Remove(b.path(digest)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove blob: %w", err)
	}
	return nil
}

// List lists the digests of the stored blobs (in-progress uploads and
// stray files are left out).
func (b Blobs) List() ([]string, error) {
	var out []string
	err := filepath.WalkDir(b.Dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.IsDir() && ValidDigest(d.Name()) {
			out = append(out, d.Name())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	return out, nil
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
	_, err := writeCounted(path, digest, r, maxBytes)
	return err
}

// writeCounted is writeVerified that also returns the size written.
func writeCounted(path, digest string, r io.Reader, maxBytes int64) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, fmt.Errorf("store file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".upload-*")
	if err != nil {
		return 0, fmt.Errorf("store file: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, maxBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("store file: %w", err)
	}
	if n > maxBytes {
		return n, fmt.Errorf("upload is larger than %d bytes: %w", maxBytes, ErrTooLarge)
	}
	if digest != "" && hex.EncodeToString(h.Sum(nil)) != digest {
		return n, fmt.Errorf("blob %s: %w", digest, ErrDigest)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return n, fmt.Errorf("store file: %w", err)
	}
	return n, nil
}

// Written is what PutStream stored: the content's sha256 (its name), its
// MD5 (as Content-MD5 carries it, raw) and its size.
type Written struct {
	Digest string
	MD5    []byte
	Size   int64
}

// PutStream stores r, whose digest is not known in advance, and names it
// by its sha256 (a blob with that content already stored is kept as it
// is). It is at most maxBytes long.
func (b Blobs) PutStream(r io.Reader, maxBytes int64) (Written, error) {
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return Written{}, fmt.Errorf("store blob: %w", err)
	}
	tmp, err := os.CreateTemp(b.Dir, ".upload-*")
	if err != nil {
		return Written{}, fmt.Errorf("store blob: %w", err)
	}
	defer os.Remove(tmp.Name())
	sum, md := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(tmp, sum, md), io.LimitReader(r, maxBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Written{Size: n}, fmt.Errorf("store blob: %w", err)
	}
	if n > maxBytes {
		return Written{Size: n}, fmt.Errorf("upload is larger than %d bytes: %w", maxBytes, ErrTooLarge)
	}
	w := Written{Digest: hex.EncodeToString(sum.Sum(nil)), MD5: md.Sum(nil), Size: n}
	if b.Has(w.Digest) {
		return w, nil
	}
	if err := os.MkdirAll(filepath.Dir(b.path(w.Digest)), 0o700); err != nil {
		return w, fmt.Errorf("store blob: %w", err)
	}
	if err := os.Rename(tmp.Name(), b.path(w.Digest)); err != nil {
		return w, fmt.Errorf("store blob: %w", err)
	}
	return w, nil
}

// Concat stores the concatenation of stored blobs (a block list
// committed) as a blob of its own, at most maxBytes long.
func (b Blobs) Concat(digests []string, maxBytes int64) (Written, error) {
	pr, pw := io.Pipe()
	go func() {
		for _, d := range digests {
			f, err := b.Open(d)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			_, err = io.Copy(pw, f)
			f.Close()
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.Close()
	}()
	w, err := b.PutStream(pr, maxBytes)
	pr.CloseWithError(io.ErrClosedPipe) // stops the writer if PutStream gave up early
	return w, err
}
