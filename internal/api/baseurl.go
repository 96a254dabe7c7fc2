package api

import (
	"net/http"
	"strings"
)

// BaseURL is the absolute URL prefix for links handed out in answer to r
// (nextLink, Azure-AsyncOperation, sign-in links): publicURL when the
// operator set one, else the scheme and host the client used.
func BaseURL(publicURL string, r *http.Request) string {
	if publicURL != "" {
		return strings.TrimSuffix(publicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
