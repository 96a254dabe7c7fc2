package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/freeport"
	"github.com/cumulus-ml/cumulus/internal/tlsutil"
)

// selfSigned makes a certificate for localhost, as serve --tls-self-signed.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	dir := t.TempDir()
	c, err := tlsutil.SelfSigned(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveAt serves at addr, over TLS with cert when it is given, answering
// every request with header (when not nil) and how it came (tls or
// plain); it stops when the returned function is called.
func serveAt(t *testing.T, addr string, cert *tls.Certificate, header http.Header) func() {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		if r.TLS != nil {
			w.Write([]byte(`{"via":"tls"}`))
		} else {
			w.Write([]byte(`{"via":"plain"}`))
		}
	})}
	if cert != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}})
	}
	go srv.Serve(ln)
	stop := func() { srv.Close() }
	t.Cleanup(stop)
	return stop
}

// told is the header a TLS server sends an agent that calls it over
// plain HTTP: its certificate and the name it is valid for.
func told(cert tls.Certificate) http.Header {
	h := http.Header{}
	h.Set(agentapi.HeaderServerCertificate, base64.StdEncoding.EncodeToString(cert.Certificate[0]))
	h.Set(agentapi.HeaderServerName, "localhost")
	return h
}

func via(t *testing.T, c *client) (string, error) {
	t.Helper()
	c.hc.Load().CloseIdleConnections() // the server before was stopped: a new connection each time
	var out struct{ Via string }
	err := c.do(context.Background(), request{method: http.MethodPost, path: agentapi.Prefix + "/poll"}, &out)
	return out.Via, err
}

// An agent follows its server to TLS on the server's word over the plain
// connection it joined on, trusting the certificate told there and no
// other; it never goes back to plain HTTP, and a certificate told over TLS
// changes nothing.
func TestAgentFollowsTheServerToTLS(t *testing.T) {
	addr, err := freeport.Addr() // the server starts there below
	if err != nil {
		t.Fatal(err)
	}
	real, impostor := selfSigned(t), selfSigned(t)

	// The server restarted with TLS and answers this agent over plain
	// HTTP where it joined, telling it its certificate.
	stop := serveAt(t, addr, nil, told(real))
	c, err := newClient("http://"+addr, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := via(t, c); err != nil || v != "plain" {
		t.Fatalf("first call: %q %v", v, err)
	}
	if u := c.servers.URLs(); len(u) != 1 || u[0] != "https://"+addr {
		t.Fatalf("after the server's word the agent calls %v, want https://%s", u, addr)
	}
	stop()
	stop = serveAt(t, addr, &real, told(impostor)) // a certificate told over TLS is not heeded
	if v, err := via(t, c); err != nil || v != "tls" {
		t.Fatalf("over TLS with the certificate told: %q %v", v, err)
	}
	if len(c.certs) != 1 {
		t.Errorf("a certificate told over TLS was taken: %d certificates", len(c.certs))
	}
	stop()

	// Another server at that address, with a certificate the agent was
	// not told where it joined, is refused; and a plain server there
	// again does not bring the agent back to plain HTTP.
	stop = serveAt(t, addr, &impostor, nil)
	_, err = via(t, c)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("an impostor's certificate: err = %v, want it refused as unknown", err)
	}
	stop()
	serveAt(t, addr, nil, told(impostor))
	if v, err := via(t, c); err == nil || v == "plain" || !strings.HasPrefix(c.servers.URLs()[0], "https://") {
		t.Errorf("a plain server after the move: via %q, err %v, servers %v; want no plain HTTP again", v, err, c.servers.URLs())
	}
}
