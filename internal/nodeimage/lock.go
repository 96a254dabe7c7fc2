package nodeimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockBuilds waits, until ctx ends, for the lock that one build of a node
// image at a time holds on this machine's Docker engine, and returns its
// release. Builds from two processes (two servers, a server and
// `cumulus node-image build`) would otherwise interleave: one's removal of
// the image its tag named before can take the image the other's build
// just made from the same cached layers, between that build and its tag.
// The lock is a file in the temporary directory, named by the engine's
// socket; where it cannot be opened the build goes on unlocked.
func lockBuilds(ctx context.Context, socket string) (release func(), err error) {
	sum := sha256.Sum256([]byte(socket))
	name := filepath.Join(os.TempDir(), "cumulus-node-image-"+hex.EncodeToString(sum[:6])+".lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return func() {}, nil
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return func() {}, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("node image: waiting for another build of a node image on this Docker engine (%s): %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
