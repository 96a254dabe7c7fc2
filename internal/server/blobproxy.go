package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// azure-ai-ml 1.4.0 (and every version, for local data inputs) reaches a
// datastore at https://<account>.blob.core.windows.net, a URL it builds
// itself. Cumulus answers it as an HTTPS proxy (HTTPS_PROXY, which
// 'cumulus sdk env' sets, with NO_PROXY for the server itself): a CONNECT
// to <account>.blob.core.windows.net:443, for the account of one of its
// workspaces, is answered on the spot with TLS for that name, under a
// certificate the server's own CA issues (BlobTLS), and the requests
// inside go to the blob store. A CONNECT to any other host is refused:
// the server never opens a connection anywhere.

// BlobTLS issues the certificate for a blob host name; nil when the
// server has no CA to issue with (it serves an operator's certificate).
type BlobTLS func(host string) (*tls.Certificate, error)

// blobHostSuffix is what the public cloud's blob endpoints end with.
const blobHostSuffix = ".blob." + api.StorageEndpoint

// isBlobHost reports whether host (with or without a port) is an account's
// blob endpoint.
func isBlobHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.HasSuffix(strings.ToLower(host), blobHostSuffix) && len(host) > len(blobHostSuffix)
}

type blobHostKey struct{}

// blobHostAccount is the account of a request that came through a blob
// host tunnel.
func blobHostAccount(r *http.Request) (string, bool) {
	a, ok := r.Context().Value(blobHostKey{}).(string)
	return a, ok
}

// serveBlobHost serves a tunneled request: /<container>/<blob>.
func (s *Server) serveBlobHost(w http.ResponseWriter, r *http.Request, account string) {
	container, blob, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.serveBlob(w, r, account, container, blob)
}

// serveConnect answers an HTTPS proxy's CONNECT for a blob host.
func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, msg string) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(msg + "\n"))
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || port != "443" || !isBlobHost(host) {
		refuse(http.StatusForbidden, "Cumulus proxies only its workspaces' blob endpoints (<account>"+blobHostSuffix+":443), not "+r.Host+
			"; add this host to NO_PROXY, or set HTTPS_PROXY only for programs that talk to Cumulus")
		return
	}
	account := strings.ToLower(host[:len(host)-len(blobHostSuffix)])
	if s.blobTLS == nil {
		refuse(http.StatusBadGateway, "this server has no CA to issue a certificate for "+host+": serve with --tls-self-signed, or use an SDK that uploads by pending upload (see docs/sdk.md)")
		return
	}
	if _, ok, err := s.workspaceByAccount(r.Context(), account); err != nil || !ok {
		refuse(http.StatusNotFound, "no workspace of this server has the storage account "+account)
		return
	}
	cert, err := s.blobTLS(strings.ToLower(host))
	if err != nil {
		s.log.Error("blob host certificate", "host", host, "err", err)
		refuse(http.StatusBadGateway, "cannot issue a certificate for "+host)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		if rec, isRec := w.(*statusRecorder); isRec {
			hj, ok = rec.ResponseWriter.(http.Hijacker)
		}
	}
	if !ok {
		refuse(http.StatusHTTPVersionNotSupported, "CONNECT needs HTTP/1.1")
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		s.log.Warn("blob proxy hijack", "err", err)
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		conn.Close()
		return
	}
	var raw net.Conn = conn
	if buf != nil && buf.Reader.Buffered() > 0 {
		raw = &bufferedConn{Conn: conn, r: buf.Reader}
	}
	tconn := tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	inner := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			s.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), blobHostKey{}, account)))
		}),
		ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	_ = inner.Serve(newOneConnListener(tconn))
}

// bufferedConn reads what the hijacked connection's reader holds first.
type bufferedConn struct {
	net.Conn
	r interface{ Read([]byte) (int, error) }
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConnListener hands out one connection, then waits for it to close.
type oneConnListener struct {
	mu     sync.Mutex
	conn   net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{closed: make(chan struct{}), addr: c.LocalAddr()}
	l.conn = &notifyConn{Conn: c, done: func() { l.once.Do(func() { close(l.closed) }) }}
	return l
}

var errListenerDone = errors.New("tunnel closed")

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, errListenerDone
}

func (l *oneConnListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.addr }

// notifyConn tells when it is closed.
type notifyConn struct {
	net.Conn
	done func()
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.done()
	return err
}
