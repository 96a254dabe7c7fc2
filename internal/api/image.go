package api

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// The grammar of a Docker image reference (github.com/distribution/reference):
//
//	reference        := name [ ":" tag ] [ "@" digest ]
//	name             := [domain '/'] path-component ['/' path-component]*
//	domain           := host [':' port-number]
//	host             := domain-name | '[' IPv6address ']'
//	domain-name      := domain-component ['.' domain-component]*
//	domain-component := /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
//	path-component   := alpha-numeric [separator alpha-numeric]*
//	alpha-numeric    := /[a-z0-9]+/
//	separator        := /[_.]|__|[-]+/
//	tag              := /[\w][\w.-]{0,127}/
//
// Cumulus takes sha256 digests only (64 lower-case hex digits). It is
// compiled at its first use, not at every start of the binary.
var imageRef = sync.OnceValue(func() *regexp.Regexp {
	const (
		alnum           = `[a-z0-9]+`
		separator       = `(?:[._]|__|-+)`
		pathComponent   = alnum + `(?:` + separator + alnum + `)*`
		domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		host            = `(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[[a-fA-F0-9:]+\])`
		domain          = host + `(?::[0-9]+)?`
		name            = `(?:` + domain + `/)?` + pathComponent + `(?:/` + pathComponent + `)*`
		tag             = `[\w][\w.-]{0,127}`
		digest          = `sha256:[a-f0-9]{64}`
	)
	return regexp.MustCompile(`^(` + name + `)(?::` + tag + `)?(?:@` + digest + `)?$`)
})

// Bounds of an image reference: its name (distribution's limit) and all
// of it.
const (
	maxImageName = 255
	maxImageRef  = 512
)

// CheckImageRef checks that ref is a Docker image reference, such as
// python:3.11, ghcr.io/org/img:tag or localhost:5000/x@sha256:<hex>.
// Nothing else may reach a container engine's command line: not an
// option (-rm), a path (../x), spaces or an upper-case repository.
func CheckImageRef(ref string) error {
	if len(ref) > maxImageRef {
		return fmt.Errorf("image reference %.40q… is longer than %d characters", ref, maxImageRef)
	}
	m := imageRef().FindStringSubmatch(ref)
	if m == nil {
		return fmt.Errorf("%q is not an image reference: [registry[:port]/]name[:tag][@sha256:digest], the name in lower case letters, digits and '.', '_', '-' separators (e.g. python:3.11 or ghcr.io/org/image:tag)", ref)
	}
	if len(m[1]) > maxImageName {
		return fmt.Errorf("image name %.40q… is longer than %d characters", m[1], maxImageName)
	}
	// A first component is a registry only when it looks like a host
	// (a dot, a port, localhost); otherwise it is part of the repository,
	// which is lower case (Docker says so too).
	if first, _, ok := strings.Cut(m[1], "/"); ok && !strings.ContainsAny(first, ".:[") && first != "localhost" && strings.ToLower(first) != first {
		return fmt.Errorf("%q is not an image reference: the repository name %q must be lower case", ref, m[1])
	}
	return nil
}

// BlobURIScheme prefixes a job input that is a blob this server stores:
// cumulus://blobs/<sha256 of the folder's archive>.
const BlobURIScheme = "cumulus://blobs/"

// checkBlobURI checks a job input's URI: one in the cumulus:// scheme
// must be exactly BlobURIScheme and a lower-case hex sha256, nothing
// more (no path, no query, no other host); other URIs are the job's own
// business.
func checkBlobURI(uri string) error {
	if len(uri) < len("cumulus://") || !strings.EqualFold(uri[:len("cumulus://")], "cumulus://") {
		return nil
	}
	digest, ok := strings.CutPrefix(uri, BlobURIScheme)
	if !ok || !isSHA256Hex(digest) {
		return fmt.Errorf("uri %.80q is not %s<sha256>, a folder the CLI uploaded (64 lower-case hex digits, nothing after)", uri, BlobURIScheme)
	}
	return nil
}

// isSHA256Hex reports whether s is 64 lower-case hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
