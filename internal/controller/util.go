package controller

import (
	"encoding/json"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// errorsJSON renders an API error for an operation record.
func errorsJSON(e *api.Error) string {
	b, err := json.Marshal(e)
	if err != nil {
		return `{"code":"InternalServerError","message":"unencodable error"}`
	}
	return string(b)
}
