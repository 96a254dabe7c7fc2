package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// Issuer issues certificates for host names, signed by a CA certificate
// and its key (the server's self-signed certificate is one): clients that
// trust the CA trust what it issues. Certificates are made once per name
// and kept.
type Issuer struct {
	ca   *x509.Certificate
	key  crypto.Signer
	now  func() time.Time
	mu   sync.Mutex
	made map[string]*tls.Certificate
}

// NewIssuer issues with the CA of ca (its first certificate and its key);
// now is the clock of the certificates' validity.
func NewIssuer(ca tls.Certificate, now func() time.Time) (*Issuer, error) {
	if len(ca.Certificate) == 0 {
		return nil, errors.New("issuer: no CA certificate")
	}
	c, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	if !c.IsCA || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("issuer: the certificate is not a CA that may sign certificates")
	}
	key, ok := ca.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("issuer: the CA's key cannot sign")
	}
	return &Issuer{ca: c, key: key, now: now, made: map[string]*tls.Certificate{}}, nil
}

// Issue returns a certificate for host, valid as long as the CA (at most
// a year), made now or earlier.
func (i *Issuer) Issue(host string) (*tls.Certificate, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := i.now()
	if c, ok := i.made[host]; ok && now.Before(c.Leaf.NotAfter.Add(-24*time.Hour)) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("issue %s: %w", host, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("issue %s: %w", host, err)
	}
	end := now.Add(365 * 24 * time.Hour)
	if i.ca.NotAfter.Before(end) {
		end = i.ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host, Organization: []string{"Cumulus"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     end,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{host},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.ca, &key.PublicKey, i.key)
	if err != nil {
		return nil, fmt.Errorf("issue %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("issue %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, i.ca.Raw}, PrivateKey: key, Leaf: leaf}
	i.made[host] = c
	return c, nil
}
