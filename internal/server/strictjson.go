package server

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// checkJSON refuses what Go's decoder would take silently, in any part of
// a body (a field Cumulus reads or not): a key twice in one object (the
// decoder keeps the last, another reader the first) and a number no
// float64 holds (1e999). It scans the body's bytes once; what is not
// JSON it leaves to the decoder, which says what is wrong.
func checkJSON(body string) error {
	var stack []keySet // the objects and arrays open; an array's is nil
	key := false       // the next string is an object's key
	for i := 0; i < len(body); {
		switch c := body[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ':':
			i++
		case c == '{':
			stack = append(stack, keySet{object: true})
			key = true
			i++
		case c == '[':
			stack = append(stack, keySet{})
			key = false
			i++
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return nil
			}
			stack = stack[:len(stack)-1]
			key = false
			i++
		case c == ',':
			key = len(stack) > 0 && stack[len(stack)-1].object
			i++
		case c == '"':
			end, escaped := stringEnd(body, i)
			if end < 0 {
				return nil
			}
			if key {
				k := body[i+1 : end-1]
				if escaped {
					if json.Unmarshal([]byte(body[i:end]), &k) != nil {
						return nil
					}
				}
				if !stack[len(stack)-1].add(k) {
					return api.BadRequest(api.CodeInvalidRequest, "the request body has the key %q twice in one object", k)
				}
				key = false
			}
			i = end
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(body) && strings.IndexByte("0123456789+-.eE", body[j]) >= 0 {
				j++
			}
			if _, err := strconv.ParseFloat(body[i:j], 64); errors.Is(err, strconv.ErrRange) {
				return api.BadRequest(api.CodeInvalidRequest, "the request body has the number %s, which is out of range", body[i:j])
			} else if err != nil {
				return nil
			}
			i = j
		case strings.HasPrefix(body[i:], "true") || strings.HasPrefix(body[i:], "null"):
			i += 4
		case strings.HasPrefix(body[i:], "false"):
			i += 5
		default:
			return nil
		}
	}
	return nil
}

// keySet is the keys seen in one open object: a list while short, a set
// past that.
type keySet struct {
	object bool
	keys   []string
	set    map[string]bool
}

// add notes key k; false if the object has it already.
func (s *keySet) add(k string) bool {
	if s.set != nil {
		if s.set[k] {
			return false
		}
		s.set[k] = true
		return true
	}
	for _, seen := range s.keys {
		if seen == k {
			return false
		}
	}
	s.keys = append(s.keys, k)
	if len(s.keys) > 16 {
		s.set = make(map[string]bool, 2*len(s.keys))
		for _, seen := range s.keys {
			s.set[seen] = true
		}
		s.keys = nil
	}
	return true
}

// stringEnd is the index just past the JSON string that starts at body[i]
// (a quote), -1 if it does not end; escaped says it has a backslash.
func stringEnd(body string, i int) (end int, escaped bool) {
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '"':
			return j + 1, escaped
		case '\\':
			escaped = true
			j++
		}
	}
	return -1, escaped
}
