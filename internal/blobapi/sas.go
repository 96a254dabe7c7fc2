// Package blobapi is the wire format of the Azure Blob Storage protocol
// subset Cumulus's blob store speaks (what azure-storage-blob sends for
// the Azure ML SDKs): shared access signatures, the XML of listings, block
// lists and errors, and ranges. It is pure: no I/O, no clock.
package blobapi

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// A SAS here is Azure's query-string shape (sv, sr, sp, se, skoid, sig),
// signed with the server's key rather than an account key: only the
// server makes and checks them. It names one account and container (sr=c)
// or one blob (sr=b), the permissions, when it ends and who it was issued
// to (skoid, for the audit log).

// SAS is a parsed shared access signature.
type SAS struct {
	Version   string // sv
	Resource  string // sr: ResourceContainer or ResourceBlob
	Perms     string // sp: letters of r, a, c, w, d, l
	Expiry    time.Time
	Principal string // skoid: who it was issued to
	Signature string // sig
}

// SAS resources.
const (
	ResourceContainer = "c"
	ResourceBlob      = "b"
)

// Permissions a request needs.
const (
	PermRead   = 'r'
	PermAdd    = 'a'
	PermCreate = 'c'
	PermWrite  = 'w'
	PermDelete = 'd'
	PermList   = 'l'
)

// Version is the sv Cumulus writes (the service version whose behaviour
// it follows); requests may send any x-ms-version.
const Version = "2021-08-06"

// Errors of Verify, each an Azure error code.
var (
	ErrNoAuth     = errors.New("NoAuthenticationInformation")
	ErrAuthFailed = errors.New("AuthenticationFailed")
	ErrPermission = errors.New("AuthorizationPermissionMismatch")
)

// Signer signs strings with the server's key (secret.Box.Tag).
type Signer func(msg string) string

func (s SAS) canonical(account, container, blob string) string {
	res := "/" + account + "/" + container
	if s.Resource == ResourceBlob {
		res += "/" + blob
	}
	return strings.Join([]string{"cumulus-blob-sas", s.Version, s.Resource, s.Perms, s.Expiry.UTC().Format(time.RFC3339), s.Principal, res}, "\n")
}

// Sign fills s's version and signature for the container (or, with
// Resource ResourceBlob, the blob) and returns it as a query string.
func Sign(sign Signer, account, container, blob string, s SAS) string {
	if s.Version == "" {
		s.Version = Version
	}
	s.Expiry = s.Expiry.UTC().Truncate(time.Second)
	s.Signature = sign(s.canonical(account, container, blob))
	q := url.Values{"sv": {s.Version}, "sr": {s.Resource}, "sp": {s.Perms}, "se": {s.Expiry.Format(time.RFC3339)}, "sig": {s.Signature}}
	if s.Principal != "" {
		q.Set("skoid", s.Principal)
	}
	return q.Encode()
}

// HasSAS reports whether a query carries a signature.
func HasSAS(q url.Values) bool { return q.Get("sig") != "" }

// Verify checks the SAS in q for a request on container (and blob, "" for
// the container itself) of account that needs perm at time now, and
// returns it. The error wraps ErrNoAuth, ErrAuthFailed or ErrPermission
// and says why in Azure's words.
func Verify(sign Signer, account, container, blob string, q url.Values, now time.Time, perm byte) (SAS, error) {
	if !HasSAS(q) {
		return SAS{}, fmt.Errorf("%w: Server failed to authenticate the request. Please refer to the information in the www-authenticate header", ErrNoAuth)
	}
	s := SAS{Version: q.Get("sv"), Resource: q.Get("sr"), Perms: q.Get("sp"), Principal: q.Get("skoid"), Signature: q.Get("sig")}
	exp, err := time.Parse(time.RFC3339, q.Get("se"))
	if err != nil {
		return s, fmt.Errorf("%w: Server failed to authenticate the request. Signed expiry time %q is not a valid time", ErrAuthFailed, q.Get("se"))
	}
	s.Expiry = exp
	if s.Resource != ResourceContainer && s.Resource != ResourceBlob {
		return s, fmt.Errorf("%w: Server failed to authenticate the request. Signed resource %q is not c or b", ErrAuthFailed, s.Resource)
	}
	want := sign(s.canonical(account, container, blob))
	if subtle.ConstantTimeCompare([]byte(want), []byte(s.Signature)) != 1 {
		return s, fmt.Errorf("%w: Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature. Signature did not match for this account, container and resource", ErrAuthFailed)
	}
	if !now.Before(exp) {
		return s, fmt.Errorf("%w: Server failed to authenticate the request. Signed expiry time [%s] must be after signed start time [%s]", ErrAuthFailed,
			exp.UTC().Format(time.RFC1123), now.UTC().Format(time.RFC1123))
	}
	if !strings.ContainsRune(s.Perms, rune(perm)) {
		return s, fmt.Errorf("%w: This request is not authorized to perform this operation using this permission", ErrPermission)
	}
	return s, nil
}

// Strip removes the SAS parameters from q, so that what remains can be
// logged or compared.
func Strip(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		switch k {
		case "sv", "sr", "sp", "se", "st", "skoid", "sig", "spr", "sip", "ss", "srt":
		default:
			out[k] = v
		}
	}
	return out
}
