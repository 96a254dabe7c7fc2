package server

import (
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// supportedVersions are the api-versions whose shapes for the resources
// Cumulus serves match 2024-04-01, the version Cumulus implements.
var supportedVersions = []string{
	"2023-04-01", "2023-04-01-preview", "2023-06-01-preview", "2023-08-01-preview", "2023-10-01",
	"2024-01-01-preview", "2024-04-01", "2024-04-01-preview", "2024-07-01-preview", "2024-10-01",
	"2024-10-01-preview", "2025-01-01-preview", "2025-04-01", "2025-06-01", "2025-09-01", "2025-12-01",
}

func checkAPIVersion(v string) error {
	if v == "" {
		return &api.Error{Status: http.StatusBadRequest, Code: api.CodeMissingAPIVersion,
			Message: "the api-version query parameter is required; use api-version=2024-04-01"}
	}
	for _, s := range supportedVersions {
		if v == s {
			return nil
		}
	}
	return &api.Error{Status: http.StatusBadRequest, Code: api.CodeInvalidAPIVersion,
		Message: "api-version '" + v + "' is not supported; supported versions are " + strings.Join(supportedVersions, ", ")}
}
