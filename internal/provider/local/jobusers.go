package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// Blocks of job users are claimed machine-wide. A nodes folder's block
// comes from a hash of its path, and two nodes folders on one machine (two
// servers) whose hashes met would share job users: each one's jobs could
// read the other's folders, and the end of a job, which ends every process
// of its user, would end the other's job on the same node number. So the
// first new node of a folder claims its block in a folder of the
// machine's, root's alone: a file per block naming the nodes folder that
// holds it, written under a lock. A block named for another folder that
// still exists is taken and the next one is tried; a claim whose folder is
// gone is taken over.

// DefaultJobUsersDir is where blocks are claimed unless the server is told
// another folder (--job-users-dir, CUMULUS_JOB_USERS_DIR).
const DefaultJobUsersDir = "/var/lib/cumulus/job-users"

// claimBlock returns the block of job users that the nodes folder
// nodesDir (an absolute path) holds in the claims folder dir: the first
// from start (wrapping) that is its already, free, or claimed for a
// folder that is gone, which it then claims.
func claimBlock(dir, nodesDir string, start int) (int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("job users: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("job users: %w", err)
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("job users: lock %s: %w", dir, err)
	}
	for i := range jobUIDBlocks {
		b := (start + i) % jobUIDBlocks
		claim := filepath.Join(dir, strconv.Itoa(b))
		held, err := os.ReadFile(claim)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("job users: %w", err)
		}
		if err == nil {
			if string(held) == nodesDir {
				return b, nil
			}
			if _, err := os.Stat(string(held)); !errors.Is(err, fs.ErrNotExist) {
				continue // another nodes folder's
			}
		}
		if err := os.WriteFile(claim, []byte(nodesDir), 0o600); err != nil {
			return 0, fmt.Errorf("job users: %w", err)
		}
		return b, nil
	}
	return 0, provider.InsufficientCapacityf("job users: every block of %s is held by another nodes folder", dir)
}
