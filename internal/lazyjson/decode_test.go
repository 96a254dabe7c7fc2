package lazyjson

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// decodesAs fails the test unless Unmarshal leaves a new T as
// json.Unmarshal does, with the same error, and reports whether the walk
// set it (rather than json).
func decodesAs[T any](t *testing.T, data string) bool {
	t.Helper()
	var want, got T
	werr := json.Unmarshal([]byte(data), &want)
	walked, gerr := unmarshal([]byte(data), &got)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("%T from %s: json's error %v, Unmarshal's %v", got, data, werr, gerr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%T from %s:\n got %#v\nwant %#v", got, data, got, want)
	}
	return walked
}

// The resources a client reads, filled at random and encoded, decode as
// json decodes them, and by the walk.
func TestRandomResourcesDecodeAsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(typ reflect.Type, decode func(string) bool) {
		walked := 0
		for range 300 {
			v := reflect.New(typ)
			fill(r, v.Elem(), 0)
			b, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			if decode(string(b)) {
				walked++
			}
		}
		if walked < 250 {
			t.Fatalf("the walk set %d of 300 %v, json the rest", walked, typ)
		}
	}
	check(reflect.TypeFor[api.Job](), func(s string) bool { return decodesAs[api.Job](t, s) })
	check(reflect.TypeFor[api.Compute](), func(s string) bool { return decodesAs[api.Compute](t, s) })
	check(reflect.TypeFor[api.Page[api.Job]](), func(s string) bool { return decodesAs[api.Page[api.Job]](t, s) })
}

type flex struct {
	Size api.FlexString `json:"size"`
	At   time.Time      `json:"at"`
	AtP  *time.Time     `json:"atP"`
}

type decodeEdges struct {
	Name   string            `json:"name"`
	N      int8              `json:"n"`
	U      uint              `json:"u"`
	F      float32           `json:"f"`
	Any    any               `json:"any"`
	Bytes  []byte            `json:"bytes"`
	Arr    [2]int            `json:"arr"`
	IntMap map[int]string    `json:"intMap"`
	Map    map[string]*Inner `json:"map"`
	List   []Inner           `json:"list"`
	Ptr    *int              `json:"ptr"`
	Text   text              `json:"text"`
	Upper  map[upper]int     `json:"upper"`
}

// upper is a string kind whose UnmarshalText json calls for a map's key.
type upper string

func (u *upper) UnmarshalText(b []byte) error {
	*u = upper(strings.ToUpper(string(b)))
	return nil
}

func (x *text) UnmarshalText(b []byte) error {
	if len(b) != 1 {
		return fmt.Errorf("text %q is not one character", b)
	}
	*x = text(b[0] - '0')
	return nil
}

// Edge cases decode as json decodes them: those the walk sets itself, and
// those it leaves to json (another case, type mismatches, overflow,
// base64, non-string keys, bad syntax, trailing data), with json's errors.
func TestEdgesDecodeAsJSON(t *testing.T) {
	walk := []string{
		`{"name":"a","n":-5,"u":7,"f":1.5,"any":{"x":[1,"2",null,true]},"arr":[1,2,3],"bytes":[104,105],"map":{"k":{"A":"v"},"n":null},"list":[],"ptr":3}`,
		`{"name":null,"unknown":{"deep":[1]},"arr":[4],"list":[{"A":"x"}],"text":"7"}`,
		`{}`, `null`, ` {"any": 1e300} `,
	}
	for _, s := range walk {
		if !decodesAs[decodeEdges](t, s) {
			t.Fatalf("%s was left to json", s)
		}
	}
	left := []string{
		`{"NAME":"a"}`, `{"n":300}`, `{"n":1.5}`, `{"u":-1}`, `{"f":1e40}`, `{"name":5}`, `{"bytes":"aGk="}`,
		`{"intMap":{"1":"a"}}`, `{"upper":{"a":1}}`, `{"list":{}}`, `{"text":"long"}`, `{"any":1e400}`, `{"name":"a"} x`, `{"name":`, `[1]`,
	}
	for _, s := range left {
		if decodesAs[decodeEdges](t, s) {
			t.Fatalf("%s was set by the walk, not json", s)
		}
	}
	for _, s := range []string{`{"size":"3","at":"2026-01-02T03:04:05Z","atP":"2026-01-02T03:04:05.5+01:00"}`, `{"size":12,"atP":null}`, `{"size":true}`, `{"at":"yesterday"}`} {
		decodesAs[flex](t, s)
	}
	decodesAs[embeds](t, `{"A":"a","c":"c","d":[1],"Label":"l","tagged":{"A":"t"},"b":"b"}`)
	decodesAs[embeds](t, `{"b":"b"}`)
	decodesAs[any](t, `{"a":[1,{"b":2.5}]}`)
	decodesAs[map[string]any](t, `{"a":1}`)
}

// A value that is not zero is json's: it merges the data into what is
// there.
func TestNonZeroIsMerged(t *testing.T) {
	got := decodeEdges{Name: "kept", N: 1}
	want := got
	data := []byte(`{"n":2}`)
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.Name != "kept" {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
