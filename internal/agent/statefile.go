package agent

import (
	"bytes"
	"fmt"
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
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || st.Uid != uint32(os.Geteuid()) || st.Nlink != 1 || fi.Mode().Perm() != 0o600 {
		return fmt.Errorf("%s is not the agent's own state file", path)
	}
	if n := int(fi.Size()) - len(b); n > 0 {
		b = append(b, bytes.Repeat([]byte{' '}, n)...)
	}
	_, err = f.WriteAt(b, 0)
	return err
}
