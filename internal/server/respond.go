package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

const maxBody = 1 << 20

// writeJSON writes v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

// toAPIError is the one place that maps errors to ARM errors and statuses.
func toAPIError(err error) *api.Error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		var e *api.Error
		if errors.As(err, &e) {
			return e
		}
		return api.NotFound("%s", err)
	case errors.Is(err, store.ErrETagMismatch):
		return &api.Error{Status: http.StatusPreconditionFailed, Code: api.CodePreconditionFailed,
			Message: "the resource changed since it was read (If-Match does not match its current ETag); read it again and retry"}
	case errors.Is(err, store.ErrExists):
		return &api.Error{Status: http.StatusPreconditionFailed, Code: api.CodePreconditionFailed,
			Message: "the resource already exists and If-None-Match: * was given"}
	case isBodyTimeout(err):
		return bodyTimeout()
	}
	return api.AsError(err)
}

func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := toAPIError(err)
	if e.Status >= 500 {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	w.Header().Set("x-ms-error-code", e.Code)
	writeJSON(w, e.Status, api.ErrorResponse{Error: e})
}

// bodyTimeout is the answer to a request whose body did not arrive in
// time (the connection is closed after it).
func bodyTimeout() *api.Error {
	return &api.Error{Status: http.StatusRequestTimeout, Code: "RequestTimeout",
		Message: "the request body did not arrive in time; send it without pausing"}
}

// decode reads a JSON body into v, refusing what is not one JSON object.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if isBodyTimeout(err) {
		return bodyTimeout()
	}
	if err != nil {
		return api.BadRequest(api.CodeInvalidRequest, "cannot read the request body: %v", err)
	}
	if len(body) > maxBody {
		return api.BadRequest(api.CodeInvalidRequest, "the request body is larger than %d bytes", maxBody)
	}
	return decodeBytes(body, v)
}

// decodeBytes is decode on bytes already read (fuzzed directly).
func decodeBytes(body []byte, v any) error {
	trimmed := strings.TrimSpace(string(body))
	if len(trimmed) == 0 {
		return api.BadRequest(api.CodeInvalidRequest, "the request body is empty; send a JSON object")
	}
	if kind := jsonKind(trimmed); kind != "" {
		// null, an array, a string, a number: json would take null as
		// "nothing" and leave v empty, as if an empty object had come.
		return api.BadRequest(api.CodeInvalidRequest, "the request body must be a JSON object, not %s", kind)
	}
	if err := checkJSON(trimmed); err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(v); err != nil {
		return api.BadRequest(api.CodeInvalidRequest, "the request body is not valid JSON for this resource: %s", jsonProblem(err))
	}
	if dec.More() {
		return api.BadRequest(api.CodeInvalidRequest, "the request body has data after the JSON object")
	}
	return nil
}

// jsonKind names the JSON value body starts with when it is not an
// object; "" for an object, or for what is not JSON (decoding says what
// is wrong then).
func jsonKind(body string) string {
	tok, err := json.NewDecoder(strings.NewReader(body)).Token()
	if err != nil {
		return ""
	}
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if t == '[' {
			return "an array"
		}
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	}
	return ""
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("expected %s, not %s", te.Type, te.Value)
	}
	return err.Error()
}
