package store

import (
	"encoding/json"
	"sync/atomic"

	"github.com/cumulus-ml/cumulus/internal/deepcopy"
)

// decoded holds a viewed row's document as last decoded, with the body it
// was decoded from: the reads that follow each get a deep copy of it, a
// fifth of what decoding it again cost (a job placed on a node is read by
// every poll, report and pass that touches it, its compute by every job
// placed on it). A row written anew keeps its holder: the value is used
// only for the body it came from, so a write's next read decodes again.
type decoded struct {
	last atomic.Pointer[decodedBody]
}

type decodedBody struct {
	body string
	v    any
}

// holder is d, or a new holder for a row the view takes without one.
func holder(d *decoded) *decoded {
	if d == nil {
		return new(decoded)
	}
	return d
}

// decodeVia decodes body into a T, through d when it is not nil: the first
// read of a body decodes and keeps the value, every read gets a copy of
// its own to change.
func decodeVia[T any](d *decoded, body string) (T, error) {
	if d != nil {
		if p := d.last.Load(); p != nil && p.body == body {
			if v, ok := p.v.(T); ok {
				return deepcopy.Of(v), nil
			}
		}
	}
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return v, err
	}
	if d != nil {
		d.last.Store(&decodedBody{body: body, v: deepcopy.Of(v)})
	}
	return v, nil
}
