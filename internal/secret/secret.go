// Package secret seals small secrets (admin passwords) at rest with
// AES-256-GCM under a key kept in the data directory, and hashes tokens.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"
)

// Box seals and opens secrets with one key.
type Box struct {
	aead cipher.AEAD
	mac  []byte // HMAC key derived from the box's key (Tag)
}

// LoadOrCreateKey reads the 32-byte key at path, creating it (mode 0600)
// on first use.
func LoadOrCreateKey(path string) (*Box, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("secret key: %w", err)
		}
		if err := os.WriteFile(path, key, 0o600); err != nil {
			return nil, fmt.Errorf("secret key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key %s: want 32 bytes, found %d", path, len(key))
	}
	return NewBox(key)
}

// NewBox makes a Box from a 32-byte key.
func NewBox(key []byte) (*Box, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	mac := sha256.Sum256(append([]byte("cumulus tag key\x00"), key...))
	return &Box{aead: aead, mac: mac[:]}, nil
}

// Tag is a keyed digest (HMAC-SHA256, hex) of msg: a value only the
// holder of the key can make, the same every time for the same msg.
func (b *Box) Tag(msg string) string {
	h := hmac.New(sha256.New, b.mac)
	h.Write([]byte(msg))
	return hex.EncodeToString(h.Sum(nil))
}

// Seal encrypts plain; the nonce travels in front of the ciphertext.
func (b *Box) Seal(plain []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return b.aead.Seal(nonce, nonce, plain, nil)
}

// Open decrypts what Seal produced.
func (b *Box) Open(sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("open secret: too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return nil, fmt.Errorf("open secret: %w", err)
	}
	return plain, nil
}

// NewToken returns a fresh random bearer token with a recognisable prefix.
func NewToken(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash is the stored form of a token: hex SHA-256. Tokens carry 256 bits
// of randomness, so a fast hash is enough (no dictionary to attack).
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewID returns a random 128-bit id in UUID text form.
func NewID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return uuidText(b)
}

// NewTimeID returns an id in UUID text form (version 7) that starts with
// the millisecond at, then 74 random bits.
func NewTimeID(at time.Time) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return uuidText(b)
}

func uuidText(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
