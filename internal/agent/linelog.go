package agent

import (
	"bytes"
	"io"
	"sync"
)

// lineLog interleaves several processes' output into one log by whole
// lines, each prefixed (with its rank), so lines never tear.
type lineLog struct {
	mu      sync.Mutex
	w       io.Writer
	writers []*prefixWriter
}

func (l *lineLog) prefixed(prefix string) io.Writer {
	p := &prefixWriter{log: l, prefix: []byte(prefix)}
	l.writers = append(l.writers, p)
	return p
}

// flush writes the unfinished last lines once the processes have ended.
func (l *lineLog) flush() {
	if l == nil {
		return
	}
	for _, p := range l.writers {
		if len(p.partial) > 0 {
			_, _ = p.Write([]byte{'\n'})
		}
	}
}

type prefixWriter struct {
	log     *lineLog
	prefix  []byte
	partial []byte // an unfinished line, held until its newline
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	p.partial = append(p.partial, b...)
	var out []byte
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, p.prefix...), p.partial[:i+1]...)
		p.partial = p.partial[i+1:]
	}
	if len(p.partial) > 64<<10 { // a very long line without newline: flush it anyway
		out = append(append(append(out, p.prefix...), p.partial...), '\n')
		p.partial = p.partial[:0]
	}
	if len(out) == 0 {
		return n, nil
	}
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	if _, err := p.log.w.Write(out); err != nil {
		return 0, err
	}
	return n, nil
}
