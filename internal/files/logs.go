package files

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Logs keeps each job's log, one file per node rank, appended by agents
// at explicit offsets so that resends are harmless.
type Logs struct {
	Dir string
	// Limit bounds each log (0: none). The write that reaches it keeps the
	// bytes up to it and a line that says the rest is not kept; later
	// writes are ErrLogFull.
	Limit int64
	mu    sync.Mutex
}

// ErrLogFull is an append to a log at its Limit.
var ErrLogFull = errors.New("the log is at its limit")

func (l *Logs) path(uid string, rank int) string {
	return filepath.Join(l.Dir, uid, fmt.Sprintf("rank-%d.log", rank))
}

// Append writes data at offset if offset equals the stored size; bytes
// already stored (offset < size) are skipped. It returns the new size.
func (l *Logs) Append(uid string, rank int, offset int64, data []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.path(uid, rank)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return 0, fmt.Errorf("log: %w", err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("log: %w", err)
	}
	size := st.Size()
	if l.Limit > 0 && size >= l.Limit {
		return size, ErrLogFull
	}
	if offset > size {
		return size, nil // a gap: the agent resends from size
	}
	skip := size - offset
	if skip >= int64(len(data)) {
		return size, nil
	}
	data = data[skip:]
	if l.Limit > 0 && size+int64(len(data)) >= l.Limit {
		data = append(data[:l.Limit-size:l.Limit-size], fmt.Sprintf("\n[cumulus: this log reached its limit of %d bytes; the rest is not kept]\n", l.Limit)...)
	}
	n, err := f.WriteAt(data, size)
	if err != nil {
		return size + int64(n), fmt.Errorf("log: %w", err)
	}
	return size + int64(n), nil
}

// Read returns up to max bytes of a rank's log from offset, and the size.
func (l *Logs) Read(uid string, rank int, offset, max int64) ([]byte, int64, error) {
	f, err := os.Open(l.path(uid, rank))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("log: %w", err)
	}
	if offset >= st.Size() {
		return nil, st.Size(), nil
	}
	buf := make([]byte, min(max, st.Size()-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, st.Size(), fmt.Errorf("log: %w", err)
	}
	return buf[:n], st.Size(), nil
}

// Ranks lists the ranks that have a log for a job.
func (l *Logs) Ranks(uid string) []int {
	ents, _ := os.ReadDir(filepath.Join(l.Dir, uid))
	var out []int
	for _, e := range ents {
		var r int
		if _, err := fmt.Sscanf(e.Name(), "rank-%d.log", &r); err == nil && strings.HasSuffix(e.Name(), ".log") {
			out = append(out, r)
		}
	}
	sort.Ints(out)
	return out
}

// Remove deletes a job's logs.
func (l *Logs) Remove(uid string) error {
	return os.RemoveAll(filepath.Join(l.Dir, uid))
}

// Open opens a rank's log for reading; ErrNotFound when it has none.
func (l *Logs) Open(uid string, rank int) (*os.File, error) {
	f, err := os.Open(l.path(uid, rank))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("log of rank %d: %w", rank, ErrNotFound)
	}
	return f, err
}
