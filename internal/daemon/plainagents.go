package daemon

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
)

// A control plane that serves TLS after it served plain HTTP (restarted
// with --tls-self-signed or --tls-cert) still has agents that joined over
// plain HTTP and run jobs. It keeps answering them where they joined, and
// only there: on a loopback address or a subnet bridge's (the addresses
// where it served plain HTTP before, never across a network), only the
// agents' routes and their jobs' MLflow calls, which need a node's or a
// job's token. Each such answer carries the server's certificate and the
// name it is valid for (agentapi.HeaderServerCertificate): the agent,
// which trusts what answers at that address already, trusts that
// certificate from then on, for that address, and moves to HTTPS. It never
// takes a certificate from a TLS connection it could not verify, and
// never goes back to plain HTTP.

// plainPrefixes are the paths answered over plain HTTP on a TLS server.
var plainPrefixes = []string{agentapi.Prefix + "/", agentapi.BlobPrefix + "/", agentapi.TrackingPath + "/"}

// plainAgents wraps the API of a TLS server: a request that came over
// plain HTTP (see dualListener) gets the agents' routes with the
// certificate to move to, and an error saying to use HTTPS for anything
// else.
func plainAgents(h http.Handler, cert tls.Certificate, serverName, url string) http.Handler {
	der := ""
	if len(cert.Certificate) > 0 {
		der = base64.StdEncoding.EncodeToString(cert.Certificate[0])
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			h.ServeHTTP(w, r)
			return
		}
		for _, p := range plainPrefixes {
			if strings.HasPrefix(r.URL.Path, p) {
				w.Header().Set(agentapi.HeaderServerCertificate, der)
				w.Header().Set(agentapi.HeaderServerName, serverName)
				h.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-ms-error-code", api.CodeBadRequest)
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: &api.Error{Code: api.CodeBadRequest,
			Message: "this server serves HTTPS: use " + url + " (the CLI's config file names it; 'cumulus sdk env' gives the Azure SDKs its certificate)"}})
	})
}

// dualListener hands the HTTP server TLS connections, and plain ones
// where plainOK allows them (a loopback or bridge address of the server's
// side), told apart by their first byte (a TLS handshake begins with
// 0x16). Another plain connection gets the answer Go's TLS server gives.
// The first byte is read in a goroutine per connection, so that a slow
// client holds up no other.
type dualListener struct {
	net.Listener
	tls     *tls.Config
	plainOK func(local net.Addr) bool
	wait    time.Duration // for the first byte

	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
	err   error // Accept's error, once done is closed
}

func newDualListener(ln net.Listener, cfg *tls.Config, plainOK func(net.Addr) bool) *dualListener {
	l := &dualListener{Listener: ln, tls: cfg, plainOK: plainOK, wait: readHeaderTimeout, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.accept()
	return l
}

func (l *dualListener) accept() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.once.Do(func() { l.err = err; close(l.done) })
			return
		}
		go l.sniff(c)
	}
}

func (l *dualListener) sniff(c net.Conn) {
	first := make([]byte, 1)
	_ = c.SetReadDeadline(time.Now().Add(l.wait))
	if _, err := io.ReadFull(c, first); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: first}
	var out net.Conn = pc
	switch {
	case first[0] == 0x16:
		out = tls.Server(pc, l.tls)
	case !l.plainOK(c.LocalAddr()):
		_, _ = io.WriteString(c, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		c.Close()
		return
	}
	select {
	case l.conns <- out:
	case <-l.done:
		out.Close()
	}
}

// Accept returns the next connection, TLS or allowed plain.
func (l *dualListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// Close stops accepting.
func (l *dualListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { l.err = net.ErrClosed; close(l.done) })
	return err
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
