// Package identity issues the tokens of managed identities: short-lived
// JWTs signed with RSA keys that rotate, published as a JWKS with OIDC
// discovery so any service that trusts OIDC federation can verify them.
package identity

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Defaults of the issuer.
const (
	DefaultLifetime    = 15 * time.Minute
	DefaultRotateEvery = 24 * time.Hour
)

type key struct {
	id      string
	created time.Time
	priv    *rsa.PrivateKey
}

// Issuer signs tokens. Keys live as PEM files in Dir (0600); a new key is
// made when the newest is older than RotateEvery, and old keys stay in the
// JWKS while tokens they signed can still be valid.
type Issuer struct {
	URL         string // iss, and the base of the discovery document
	Dir         string
	Lifetime    time.Duration
	RotateEvery time.Duration

	mu   sync.Mutex
	keys []key // oldest first
}

// Open loads the issuer's keys, making the first one if there is none.
func Open(url, dir string, now time.Time) (*Issuer, error) {
	is := &Issuer{URL: strings.TrimSuffix(url, "/"), Dir: dir, Lifetime: DefaultLifetime, RotateEvery: DefaultRotateEvery}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("identity keys: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("identity keys: %w", err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".pem")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("identity key %s: %w", name, err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("identity key %s: not PEM", name)
		}
		priv, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("identity key %s: %w", name, err)
		}
		created, err := time.Parse(time.RFC3339, blk.Headers["Created"])
		if err != nil {
			return nil, fmt.Errorf("identity key %s: created: %w", name, err)
		}
		is.keys = append(is.keys, key{id: name, created: created, priv: priv})
	}
	sort.Slice(is.keys, func(i, j int) bool { return is.keys[i].created.Before(is.keys[j].created) })
	if _, err := is.current(now); err != nil {
		return nil, err
	}
	return is, nil
}

// current returns the signing key, rotating when it is due. Caller may not hold mu.
func (is *Issuer) current(now time.Time) (key, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if n := len(is.keys); n > 0 && now.Sub(is.keys[n-1].created) < is.RotateEvery {
		return is.keys[n-1], nil
	}
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return key{}, fmt.Errorf("identity key: %w", err)
	}
	k := key{id: keyID(&priv.PublicKey), created: now.UTC(), priv: priv}
	blk := &pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Created": k.created.Format(time.RFC3339)}, Bytes: x509.MarshalPKCS1PrivateKey(priv)}
	if err := os.WriteFile(filepath.Join(is.Dir, k.id+".pem"), pem.EncodeToMemory(blk), 0o600); err != nil {
		return key{}, fmt.Errorf("identity key: %w", err)
	}
	is.keys = append(is.keys, k)
	// Keys older than a rotation plus a token lifetime sign nothing valid.
	keep := is.keys[:0]
	for _, old := range is.keys {
		if now.Sub(old.created) < 2*is.RotateEvery+is.Lifetime || old.id == k.id {
			keep = append(keep, old)
		} else {
			_ = os.Remove(filepath.Join(is.Dir, old.id+".pem"))
		}
	}
	is.keys = keep
	return k, nil
}

func keyID(pub *rsa.PublicKey) string {
	h := sha256.Sum256(x509.MarshalPKCS1PublicKey(pub))
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

// Claims are what a token says.
type Claims struct {
	Subject    string // the identity's principal id
	Audience   string // the resource the token is for
	ClientID   string
	TenantID   string
	ResourceID string // ARM id of the identity (compute, or user-assigned identity)
}

// Token is a signed token and when it expires.
type Token struct {
	Value   string
	Expires time.Time
}

// Issue signs a token for the claims, valid from now for Lifetime.
func (is *Issuer) Issue(c Claims, now time.Time) (Token, error) {
	if c.Subject == "" || c.Audience == "" {
		return Token{}, errors.New("identity token: subject and audience are required")
	}
	k, err := is.current(now)
	if err != nil {
		return Token{}, err
	}
	exp := now.Add(is.Lifetime)
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return Token{}, fmt.Errorf("identity token: %w", err)
	}
	header := map[string]string{"alg": "RS256", "typ": "JWT", "kid": k.id}
	payload := map[string]any{
		"iss": is.URL, "sub": c.Subject, "aud": c.Audience, "oid": c.Subject,
		"azp": c.ClientID, "appid": c.ClientID, "tid": c.TenantID, "xms_mirid": c.ResourceID,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": exp.Unix(), "jti": base64.RawURLEncoding.EncodeToString(jti),
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return Token{}, err
	}
	pb, err := json.Marshal(payload)
	if err != nil {
		return Token{}, err
	}
	signing := base64.RawURLEncoding.EncodeToString(hb) + "." + base64.RawURLEncoding.EncodeToString(pb)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.priv, crypto.SHA256, sum[:])
	if err != nil {
		return Token{}, fmt.Errorf("identity token: %w", err)
	}
	return Token{Value: signing + "." + base64.RawURLEncoding.EncodeToString(sig), Expires: exp}, nil
}

// JWK is one public key of the JWKS.
type JWK struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// JWKS is the key set document.
func (is *Issuer) JWKS() map[string][]JWK {
	is.mu.Lock()
	defer is.mu.Unlock()
	out := []JWK{}
	for _, k := range is.keys {
		pub := k.priv.PublicKey
		out = append(out, JWK{Kty: "RSA", Use: "sig", Alg: "RS256", Kid: k.id,
			N: base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
			E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())})
	}
	return map[string][]JWK{"keys": out}
}

// JWKSPath and DiscoveryPath are where the documents are served.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
)

// Discovery is the OpenID configuration document.
func (is *Issuer) Discovery() map[string]any {
	return map[string]any{
		"issuer":                                is.URL,
		"jwks_uri":                              is.URL + JWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "nbf", "oid", "azp", "tid", "xms_mirid"},
	}
}
