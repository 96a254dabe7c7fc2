package store

import (
	"encoding/json"
	"sync/atomic"

	"github.com/cumulus-ml/cumulus/internal/deepcopy"
)

// decoded holds a viewed row's document once decoded: the reads that
// follow each get a deep copy of it, a fifth of what decoding it again
// cost (a job placed on a node is read by every poll, report and pass
// that touches it, its compute by every job placed on it). A row written
// anew gets a fresh one (the views' own and their edits see to that).
type decoded struct {
	v atomic.Pointer[any]
}

// decodeVia decodes body into a T, through d when it is not nil: the first
// read decodes and keeps the value, every read gets a copy of its own to
// change.
func decodeVia[T any](d *decoded, body string) (T, error) {
	if d != nil {
		if p := d.v.Load(); p != nil {
			if v, ok := (*p).(T); ok {
				return deepcopy.Of(v), nil
			}
		}
	}
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return v, err
	}
	if d != nil {
		var kept any = deepcopy.Of(v)
		d.v.Store(&kept)
	}
	return v, nil
}
