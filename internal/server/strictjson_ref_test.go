package server

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// checkJSONByTokens is the first checkJSON, by the decoder's tokens (ten
// times slower), kept as the reference the scanner is held to. It refuses what Go's decoder would take silently, in any part of
// a body (a field Cumulus reads or not): a key twice in one object (the
// decoder keeps the last, another reader the first) and a number no
// float64 holds (1e999).
func checkJSONByTokens(body string) error {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next token of an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // not JSON: decoding says what is wrong
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return api.BadRequest(api.CodeInvalidRequest, "the request body has the key %q twice in one object", k)
				}
				top.keys[k] = true
				top.key = false
				continue
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(t), 64); err != nil {
				return api.BadRequest(api.CodeInvalidRequest, "the request body has the number %s, which is out of range", t)
			}
		}
		// A value ended: the object it is in expects a key next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}

// The scanner answers every JSON body as the decoder's tokens did: the
// same refusal, with the same words, or none.
func FuzzCheckJSONAsTheTokensDid(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"k":1},{"k":1}]}`, `{"x":1e999}`, `[1,-1e400]`, `{"a\u0062":1,"ab":2}`,
		`{"a":"\"b\\","a\"":1}`, `{"t":true,"f":false,"n":null,"s":"x"}`, `{"":1,"":2}`, `{"k":1e308,"m":-0.5e-3}`,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16,"17":17,"3":0}`,
		` { "a" : [ ] , "b" : { } } `, `"str"`, `12`, `null`, `{"a":"é","é":1,"\u00e9":2}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) {
			return // not JSON: the decoder says what is wrong, after either
		}
		got, want := checkJSON(body), checkJSONByTokens(body)
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("%q: the scanner says %v, the tokens said %v", body, got, want)
		}
	})
}

func BenchmarkCheckJSON(b *testing.B) {
	body := `{"properties":{"jobType":"Command","command":"python train.py --epochs 10","computeId":"/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default/computes/cpu","environmentId":"azureml:sklearn:1","environmentVariables":{"A":"1","B":"2"},"resources":{"instanceCount":1},"tags":{"team":"a"},"experimentName":"exp"}}`
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			_ = checkJSON(body)
		}
	})
	b.Run("tokens", func(b *testing.B) {
		for b.Loop() {
			_ = checkJSONByTokens(body)
		}
	})
}
