package ui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// maxYAML bounds what the job page may paste.
const maxYAML = 256 << 10

// yamlToJSON answers POST /ui/api/yaml: the YAML document in the body as
// JSON, so the job page reads `az ml job` YAML with the same parser as the
// CLI (gopkg.in/yaml.v3) instead of one of its own. It reads nothing and
// changes nothing; the page maps the fields and submits the job through
// the public API. It still wants a signed-in session and its CSRF header,
// as every studio request that is not a plain read does.
func (u *UI) yamlToJSON(w http.ResponseWriter, r *http.Request) {
	ses, ok, err := u.session(r)
	if err == nil && !ok {
		err = unauthorized("not signed in")
	}
	if err != nil {
		u.writeError(w, r, err)
		return
	}
	if !csrfOK(r, ses) {
		u.writeError(w, r, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden, Message: "the request must carry the " + CSRFHeader + " header"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxYAML))
	if err != nil {
		u.writeError(w, r, api.BadRequest(api.CodeInvalidRequest, "the YAML is longer than %d KiB", maxYAML>>10))
		return
	}
	v, err := decodeYAML(body)
	if err != nil {
		u.writeError(w, r, &api.Error{Status: http.StatusBadRequest, Code: api.CodeValidationError, Target: "yaml", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// decodeYAML reads one YAML document whose top level is a mapping, into
// values that encoding/json can write: mapping keys must be strings.
func decodeYAML(b []byte) (map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the YAML is empty")
		}
		return nil, fmt.Errorf("the YAML cannot be read: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("the YAML holds more than one document (---); paste one job")
	}
	if len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the YAML must be a mapping of fields (command:, compute:, …), as in a job file")
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("the YAML cannot be read: %w", err)
	}
	out, err := jsonable(v, "")
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

// jsonable checks that every mapping key is a string (yaml.v3 gives
// map[string]any then) and that nothing else JSON cannot hold is left.
func jsonable(v any, at string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			c, err := jsonable(e, join(at, k))
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
		return x, nil
	case map[any]any:
		return nil, fmt.Errorf("%s: keys must be names, not numbers or lists", orTop(at))
	case []any:
		for i, e := range x {
			c, err := jsonable(e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: .nan and .inf are not numbers a job can use", orTop(at))
		}
	}
	return v, nil
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func orTop(at string) string {
	if at == "" {
		return "the top level"
	}
	return at
}
