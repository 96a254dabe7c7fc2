package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
)

// Bounds on reading request bodies (Config.BodyTimeout, UploadTimeout).
const (
	// DefaultBodyTimeout is how long a request may take to send its body;
	// for an upload, how long it may send nothing.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultUploadTimeout is how long an upload (blob, job output, log
	// chunk) may take in all.
	DefaultUploadTimeout = time.Hour
)

// deadlineBody reads a request body under a read deadline on the
// connection, so that a client that sends its headers and then stalls (or
// trickles) its body cannot hold a connection and a handler forever.
//
// The deadline covers the body only: once the body has been read to its
// end it is lifted (net/http lifts it too, as its background read of the
// connection starts), so an answer the server holds on purpose (an agent's
// long poll, whose body is small) is not cut off.
//
// An ordinary body must arrive within BodyTimeout of the request. An
// upload may take up to UploadTimeout, as long as it never sends nothing
// for BodyTimeout. (net/http's ReadTimeout is one bound for every request:
// short enough for a slow body, it would cut off large uploads.)
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	upload bool
	stall  time.Duration // upload: the longest wait for the next bytes
	end    time.Time     // upload: no reading after this
	done   bool          // the body was read to its end: no deadline
}

// boundBody puts r's body (if it has one) under the body deadline. w must
// be the ResponseWriter net/http handed the server, as the deadline is set
// through it.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	now := time.Now() // a network deadline is wall-clock time, not the server's clock
	b := &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w), stall: s.cfg.BodyTimeout}
	if isUpload(r) {
		b.upload, b.end = true, now.Add(s.cfg.UploadTimeout)
	}
	if err := b.rc.SetReadDeadline(now.Add(s.cfg.BodyTimeout)); err != nil {
		return // not a network connection (a test's recorder): nothing to bound
	}
	r.Body = b
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.upload && !b.done {
		d := time.Now().Add(b.stall)
		if d.After(b.end) {
			d = b.end
		}
		_ = b.rc.SetReadDeadline(d)
	}
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// isUpload reports whether r is one of the requests whose body may be
// large: a blob (code snapshot, input folder), a job's output archive, or
// a chunk of a job's log.
func isUpload(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPut && strings.HasPrefix(p, agentapi.BlobPrefix+"/"):
		return true
	case r.Method == http.MethodPut && (strings.HasPrefix(p, api.BlobPathPrefix) || isBlobHost(r.Host)):
		return true
	case !strings.HasPrefix(p, agentapi.Prefix+"/jobs/"):
		return false
	case r.Method == http.MethodPut && strings.Contains(p, "/outputs/"):
		return true
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/logs"):
		return true
	}
	return false
}

// isBodyTimeout reports whether err is a body read cut off by the body
// deadline.
func isBodyTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
