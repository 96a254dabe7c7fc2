package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// maxLogChunk is the most bytes of log sent in one request.
const maxLogChunk = 1 << 20

// shipLogLoop sends new log bytes every LogInterval until ctx ends.
// Failures are retried on the next tick: the offset protocol makes resends
// harmless.
func (j *job) shipLogLoop(ctx context.Context) {
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.a.clk.After(j.a.cfg.LogInterval):
		}
		err := j.shipLog(ctx, false)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			j.log.Warn("log shipping failed; retrying", "err", err)
			failing = true
		case err != nil:
			j.log.Debug("log shipping failed", "err", err)
		case failing:
			j.log.Info("log shipping resumed")
			failing = false
		}
	}
}

// shipLog sends what the server lacks of the log. With final it retries
// until all of it is delivered (or ctx ends, or the server refuses it).
func (j *job) shipLog(ctx context.Context, final bool) error {
	path := filepath.Join(j.dir, logFile)
	if !final {
		return j.shipLogOnce(ctx, path)
	}
	return j.a.retry(ctx, j.log, "ship the job's log", func(ctx context.Context) error {
		return j.shipLogOnce(ctx, path)
	})
}

// shipLogOnce sends the log from the acknowledged offset to its current
// end, in chunks, and follows the server's LogAck.
func (j *job) shipLogOnce(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the command never started
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	for j.logSent < size {
		off := j.logSent
		n := min(size-off, maxLogChunk)
		q := url.Values{"offset": {strconv.FormatInt(off, 10)}, "attempt": {strconv.Itoa(j.asg.Attempt)}}
		var ack agentapi.LogAck
		err := j.a.c.do(ctx, request{
			method: http.MethodPost, path: agentapi.Prefix + "/jobs/" + j.asg.UID + "/logs", query: q,
			contentType: "application/octet-stream",
			body: func() (io.ReadCloser, int64, error) {
				return io.NopCloser(io.NewSectionReader(f, off, n)), n, nil
			},
		}, &ack)
		if err != nil {
			return err
		}
		if ack.Size < 0 {
			return fmt.Errorf("ship log: the server acknowledged a negative size %d", ack.Size)
		}
		j.logSent = ack.Size
		if ack.Size == off {
			// The server held exactly our offset yet took nothing: try
			// again later rather than spin.
			return fmt.Errorf("ship log: the server took no bytes at offset %d", off)
		}
	}
	return nil
}
