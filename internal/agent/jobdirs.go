package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Job folders are kept for later jobs rather than removed and made anew.
// A job's folder, with its outputs and checkpoint folders, its log and its
// state file, is five inodes a job makes and the pruning of old folders
// frees again. On a busy node that is noticeable work for the file
// system: ext4 without a journal, for one, skips every inode freed in the
// last half minute when it allocates one, so each allocation reads through
// all of those freed before it. A pruned folder of a job that left nothing
// running (the agent ended every process of the job's user) is emptied
// instead, reset to what a new folder is, and kept in the spares folder;
// a later job of the same owner (as the node's private /tmp is kept for
// the same owner) gets its folder renamed from there.
//
// Only the same owner's: a folder is the same inode as before, and a
// process that was handed a descriptor of it (over a socket, by a job of
// another node that still runs) could reach whatever a later job keeps
// there. A job of another owner gets a new folder.
//
// Reset means: only the outputs and checkpoint folders and the agent's own
// log and state files (emptied) stay; every folder kept is the agent's
// again, mode 0755, with no extended attribute a user can set (access
// control lists included) and no inode flag beyond those a new folder
// has. A folder that cannot be brought back to that is removed as before.
const (
	sparesDir     = "job-spares" // in the work dir: the agent's alone, hidden from jobs as the work dir is
	maxSpares     = 16
	stagingPrefix = ".new-" // a spare being reset: never taken, removed at the agent's start
)

// freshFolderFlags are the inode flags a new folder may carry (ext4's
// extents, hashed index and inline data); a folder with any other (set by
// its user: no-dump, sync, case folding, encryption…) is not kept.
const freshFolderFlags = 0x00080000 | 0x00001000 | 0x10000000

// spareTag is the start of the names of the spares of owner's jobs.
func spareTag(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:8]) + "-"
}

func (a *agent) sparesDir() string { return filepath.Join(a.cfg.WorkDir, sparesDir) }

// clearSpares removes the spare folders an earlier agent process left.
func (a *agent) clearSpares() {
	if err := os.RemoveAll(a.sparesDir()); err != nil {
		a.logger().Warn("could not remove the spare job folders", "err", err)
	}
}

// retireJobDir removes the folder dir of a reported job of owner, or keeps
// it as a spare when ended says no process of the job is left.
func (a *agent) retireJobDir(dir, owner string, ended bool) error {
	if ended && owner != "" && a.keepSpare(dir, owner) {
		return nil
	}
	return os.RemoveAll(dir)
}

// keepSpare makes dir a spare of owner's; false when it did not touch dir
// (the caller removes it). When there are maxSpares already, one of them
// goes.
func (a *agent) keepSpare(dir, owner string) bool {
	spares := a.sparesDir()
	if err := os.Mkdir(spares, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return false
	}
	ents, err := os.ReadDir(spares)
	if err != nil {
		return false
	}
	if len(ents) >= maxSpares {
		a.dropSpare(ents)
	}
	name := spareTag(owner) + filepath.Base(dir)
	staged := filepath.Join(spares, stagingPrefix+name)
	if err := os.Rename(dir, staged); err != nil {
		return false
	}
	err = resetJobDir(staged)
	if err == nil {
		err = os.Rename(staged, filepath.Join(spares, name))
	}
	if err != nil {
		a.logger().Debug("a job folder is removed rather than kept", "dir", dir, "err", err)
		if err := os.RemoveAll(staged); err != nil {
			a.logger().Warn("could not remove an old job directory", "dir", staged, "err", err)
		}
	}
	return true
}

// dropSpare removes one of the spares ents, claimed first by a rename (a
// job may be taking it at the same time).
func (a *agent) dropSpare(ents []fs.DirEntry) {
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), stagingPrefix) {
			continue
		}
		claimed := filepath.Join(a.sparesDir(), stagingPrefix+"gone-"+e.Name())
		if os.Rename(filepath.Join(a.sparesDir(), e.Name()), claimed) != nil {
			continue
		}
		if err := os.RemoveAll(claimed); err != nil {
			a.logger().Warn("could not remove a spare job folder", "dir", claimed, "err", err)
		}
		return
	}
}

// takeSpare renames a spare folder of owner's to dir (which does not
// exist); false when there is none.
func (a *agent) takeSpare(dir, owner string) bool {
	if owner == "" {
		return false
	}
	ents, err := os.ReadDir(a.sparesDir())
	if err != nil {
		return false
	}
	tag := spareTag(owner)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tag) {
			continue
		}
		if os.Rename(filepath.Join(a.sparesDir(), e.Name()), dir) == nil {
			return true
		}
	}
	return false
}

// resetJobDir brings the folder of an ended job back to what the agent
// makes for a new one (see the comment at the top).
func resetJobDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch e.Name() {
		case outputDir, checkpointDir:
			if e.IsDir() { // as lstat says: a symbolic link is not kept
				if err := emptyDir(p); err != nil {
					return err
				}
				continue
			}
		case stateFile:
			if emptyOwnFile(p, 0o600) == nil {
				continue
			}
		case logFile:
			if emptyOwnFile(p, 0o644) == nil {
				continue
			}
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, outputDir), filepath.Join(dir, checkpointDir)} {
		if err := resetFolder(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// emptyDir removes what folder dir holds.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// emptyOwnFile empties the file at path when it is one the agent made,
// mode perm (ownFile); an error otherwise.
func emptyOwnFile(path string, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := ownFile(f, perm); err != nil {
		return err
	}
	return f.Truncate(0)
}

// resetFolder makes the folder at path (not a symbolic link) the agent's,
// mode 0755, without the extended attributes its user could set; an error
// when it holds an inode flag a new folder does not, or an attribute
// other than those and the security modules' (which users cannot set).
func resetFolder(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err == nil && flags&^freshFolderFlags != 0 {
		return fmt.Errorf("inode flags %#x", flags)
	}
	names, err := xattrNames(fd)
	if err != nil {
		return err
	}
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, "security."):
		case strings.HasPrefix(name, "user."), strings.HasPrefix(name, "system.posix_acl_"):
			if err := unix.Fremovexattr(fd, name); err != nil {
				return fmt.Errorf("remove attribute %s: %w", name, err)
			}
		default:
			return fmt.Errorf("attribute %s", name)
		}
	}
	if err := unix.Fchown(fd, os.Geteuid(), os.Getegid()); err != nil {
		return err
	}
	return unix.Fchmod(fd, 0o755)
}

// xattrNames lists the extended attributes of the open file fd.
func xattrNames(fd int) ([]string, error) {
	n, err := unix.Flistxattr(fd, nil)
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil || n == 0 {
		return nil, err
	}
	buf := make([]byte, n)
	if n, err = unix.Flistxattr(fd, buf); err != nil {
		return nil, err
	}
	var names []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	return names, nil
}
