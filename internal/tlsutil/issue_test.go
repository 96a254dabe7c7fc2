package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"
)

// What the issuer makes for a name verifies against the self-signed
// certificate alone, for that name only.
func TestIssuerChainsToTheCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := SelfSigned(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), now)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := NewIssuer(ca, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	c, err := iss.Issue("cml123.blob.core.windows.net")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := iss.Issue("cml123.blob.core.windows.net"); again != c {
		t.Error("a second certificate was made for the same name")
	}
	roots, err := Pool(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: "cml123.blob.core.windows.net", CurrentTime: now}
	if _, err := c.Leaf.Verify(opts); err != nil {
		t.Errorf("issued certificate does not verify: %v", err)
	}
	opts.DNSName = "other.blob.core.windows.net"
	if _, err := c.Leaf.Verify(opts); err == nil {
		t.Error("issued certificate verifies for another name")
	}
	if _, err := NewIssuer(tls.Certificate{}, time.Now); err == nil {
		t.Error("an issuer without a CA was made")
	}
}
