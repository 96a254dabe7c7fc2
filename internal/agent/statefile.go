package agent

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
)

// writeState writes a job's state file (stateFile, savedJob's JSON) at
// path. The first save of a job makes the file (writeFileAtomic); a later
// one rewrites it in place, in one write, padded with spaces (JSON's
// whitespace) to the length it had, so that no shorter write leaves the
// end of an older state behind. A job's state is saved four times or so,
// and each file made and each one replaced is an inode allocated and one
// freed, which a file system under many short jobs spends noticeable time
// on (on ext4 without a journal, skipping inodes freed in the last
// seconds).
//
// The job's folder belongs to the job's user, who may replace the file
// between saves: only a regular file of the agent's own user with no other
// link is written in place (opened without following a symbolic link, and
// without blocking on a FIFO); anything else is replaced as the first save
// makes the file.
func writeState(path string, b []byte) error {
	if err := rewriteInPlace(path, b); err == nil {
		return nil
	}
	return writeFileAtomic(path, b, 0o600)
}

// rewriteInPlace is writeState's rewrite of an existing file; an error
// says that it wrote nothing (or, in the unlikely case of a failed write,
// that the caller is to write the file again as new).
func rewriteInPlace(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := ownFile(f, 0o600)
	if err != nil {
		return err
	}
	if n := int(fi.Size()) - len(b); n > 0 {
		b = append(b, bytes.Repeat([]byte{' '}, n)...)
	}
	_, err = f.WriteAt(b, 0)
	return err
}

// ownFile says whether f, opened without following a symbolic link, is a
// regular file of the agent's own user with no other link and mode perm:
// one the agent made, which the job's user, who owns the job's folder,
// cannot have put there.
func ownFile(f *os.File, perm os.FileMode) (os.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || st.Uid != uint32(os.Geteuid()) || st.Nlink != 1 || fi.Mode().Perm() != perm {
		return nil, fmt.Errorf("%s is not the agent's own file", f.Name())
	}
	return fi, nil
}

// maxStateFile bounds what is read of a state file.
const maxStateFile = 1 << 20

// readState reads the state file at path when it is the agent's own
// (ownFile, mode 0600: not its std.log, 0644, which holds what the job
// wrote, renamed by the job's user), opened without following a symbolic
// link or blocking on a FIFO the job's user may have put in its place.
func readState(path string) ([]byte, error) {
	return readOwn(path, 0o600, maxStateFile)
}

// readOwn reads path, up to max bytes, when it is the agent's own file of
// mode perm.
func readOwn(path string, perm os.FileMode, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := ownFile(f, perm); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, max))
}
