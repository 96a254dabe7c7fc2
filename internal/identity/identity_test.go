package identity

import (
	"crypto/rsa"
	"encoding/base64"
	"math/big"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// keyfunc resolves a token's kid in the issuer's JWKS, as a relying party does.
func keyfunc(is *Issuer) jwt.Keyfunc {
	return func(tok *jwt.Token) (any, error) {
		for _, k := range is.JWKS()["keys"] {
			if k.Kid == tok.Header["kid"] {
				n, _ := base64.RawURLEncoding.DecodeString(k.N)
				e, _ := base64.RawURLEncoding.DecodeString(k.E)
				return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
			}
		}
		return nil, jwt.ErrTokenUnverifiable
	}
}

func TestTokensVerifyWithTheJWKSAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	is, err := Open("https://cumulus.example", dir, t0)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := is.Issue(Claims{Subject: "p-1", Audience: "https://storage.azure.com", ClientID: "c-1", TenantID: "t-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Rotation: a day later a new key signs; the old token still verifies
	// (while valid) because the old key stays in the JWKS.
	later, err := is.Issue(Claims{Subject: "p-1", Audience: "aud"}, t0.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(is.JWKS()["keys"]) != 2 {
		t.Fatalf("JWKS has %d keys after a rotation, want 2", len(is.JWKS()["keys"]))
	}
	parser := jwt.NewParser(jwt.WithTimeFunc(func() time.Time { return t0.Add(time.Minute) }), jwt.WithIssuer("https://cumulus.example"),
		jwt.WithAudience("https://storage.azure.com"), jwt.WithValidMethods([]string{"RS256"}))
	claims := jwt.MapClaims{}
	if _, err := parser.ParseWithClaims(tok.Value, claims, keyfunc(is)); err != nil {
		t.Fatalf("token does not verify: %v", err)
	}
	if claims["sub"] != "p-1" || claims["azp"] != "c-1" || claims["tid"] != "t-1" {
		t.Fatalf("claims = %v", claims)
	}
	// Expired after the lifetime.
	expired := jwt.NewParser(jwt.WithTimeFunc(func() time.Time { return t0.Add(DefaultLifetime + time.Second) }))
	if _, err := expired.Parse(tok.Value, keyfunc(is)); err == nil {
		t.Fatal("a token verified after its lifetime")
	}
	// A tampered token does not verify.
	if _, err := parser.Parse(tok.Value[:len(tok.Value)-4]+"AAAA", keyfunc(is)); err == nil {
		t.Fatal("a tampered token verified")
	}
	// Keys survive a restart.
	again, err := Open("https://cumulus.example", dir, t0.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p2 := jwt.NewParser(jwt.WithTimeFunc(func() time.Time { return t0.Add(25 * time.Hour) }))
	if _, err := p2.Parse(later.Value, keyfunc(again)); err != nil {
		t.Fatalf("token does not verify after a restart: %v", err)
	}
}
