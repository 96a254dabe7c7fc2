package lazyjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// same fails the test unless Marshal and MarshalIndent give json's bytes
// (or both fail) for v.
func same(t *testing.T, v any) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := Marshal(v)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%T: json's error %v, Marshal's %v", v, werr, gerr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%T:\n got %s\nwant %s", v, got, want)
	}
	want, _ = json.MarshalIndent(v, "> ", "\t")
	got, _ = MarshalIndent(v, "> ", "\t")
	if !bytes.Equal(got, want) {
		t.Fatalf("%T indented:\n got %s\nwant %s", v, got, want)
	}
}

// The resources a client sends and reads, filled at random many times,
// encode as json encodes them.
func TestRandomResourcesEncodeAsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []reflect.Type{
		reflect.TypeFor[api.Job](), reflect.TypeFor[api.Compute](), reflect.TypeFor[api.Page[api.Job]](),
	} {
		for range 300 {
			v := reflect.New(typ)
			fill(r, v.Elem(), 0)
			same(t, v.Elem().Interface()) // by value: nothing addressable
			same(t, v.Interface())        // by pointer: every field addressable
		}
	}
}

var strs = []string{"", "a", "Command", "<b>&", "é", "line\nbreak", "quote\"back\\", "\u2028", "bad\xffutf8", "\x01\x7f"}

// fill sets v to a random value: nil, empty or filled, a few levels deep.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	if depth > 6 || r.IntN(4) == 0 {
		return // the zero value
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(r, v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(r.Int64N(2e9), r.Int64N(1e9)).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		n := r.IntN(3)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(r, v.Index(i), depth+1)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range r.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(r, k, depth+1)
			fill(r, e, depth+1)
			v.SetMapIndex(k, e)
		}
	case reflect.Interface:
		if v.NumMethod() == 0 {
			x := []any{strs[r.IntN(len(strs))], r.Float64() * 1e6, true, map[string]any{"k": 1.5, "<": []any{"x", nil}}}
			v.Set(reflect.ValueOf(x[r.IntN(len(x))]))
		}
	case reflect.String:
		v.SetString(strs[r.IntN(len(strs))])
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(r.Int64N(200) - 100)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(r.Uint64N(200))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(r.NormFloat64() * 1e3)
	}
}

type valueMarshaler struct{ N int }

func (m valueMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`{"value": "<` + strings.Repeat("x", m.N) + `>"}`), nil
}

type pointerMarshaler struct{ N int }

func (m *pointerMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"pointer"`), nil }

type text int

func (x text) MarshalText() ([]byte, error) { return []byte("text&" + string(rune('0'+x))), nil }

type Inner struct {
	A string
}

type edges struct {
	Value      valueMarshaler              `json:"value"`
	Pointer    pointerMarshaler            `json:"pointer"`
	PointerP   *pointerMarshaler           `json:"pointerP"`
	NilValue   *valueMarshaler             `json:"nilValue"`
	Text       text                        `json:"text"`
	TextKeys   map[text]int                `json:"textKeys"`
	IntKeys    map[int]string              `json:"intKeys"`
	Bytes      []byte                      `json:"bytes"`
	Array      [3]uint8                    `json:"array"`
	Time       time.Time                   `json:"time"`
	Dur        time.Duration               `json:"dur"`
	Float      float64                     `json:"float"`
	Iface      any                         `json:"iface,omitempty"`
	Marshalers []pointerMarshaler          `json:"marshalers"`
	MapValues  map[string]pointerMarshaler `json:"mapValues"`
	Untagged   string
	BadTag     string `json:"bad\"tag"`
	Punct      string `json:"a<b>&c"`
	Skipped    string `json:"-"`
	Dash       string `json:"-,"`
	unexported string
	Empty      map[string]int `json:"empty,omitempty"`
	EmptyS     Inner          `json:"emptyS,omitempty"`
}

type quoted struct {
	Quoted int `json:"quoted,string"`
}

type omitZero struct {
	Zero time.Time `json:"zero,omitzero"`
}

type Label string

type Outer struct {
	Inner
	A string // Inner's is hidden under it
}

type inner2 struct{ X int }

type embeds struct {
	Inner
	*Outer2
	Label
	Tagged Inner  `json:"tagged"`
	B      string `json:"b"`
}

type Outer2 struct {
	C string `json:"c,omitempty"`
	D []int  `json:"d"`
}

type hides struct {
	Outer
	B string
}

type unexportedEmbed struct {
	inner2
	Y int
}

// promoted is encoded by the MarshalText it embeds.
type promoted struct {
	text
	Y int
}

type Recur struct {
	*Recur
	N int
}

type duplicates struct {
	A string `json:"C"`
	C string
}

// What the walk hands to json, and the rules it reproduces, give json's
// bytes: marshalers by value and by pointer (addressable or not), text
// marshalers as values and keys, byte slices, the string and omitzero
// options, invalid and punctuated tags, embedded structs, duplicate names.
func TestEdgesEncodeAsJSON(t *testing.T) {
	e := edges{
		Value: valueMarshaler{2}, PointerP: &pointerMarshaler{}, Text: 3,
		TextKeys: map[text]int{1: 1, 2: 2}, IntKeys: map[int]string{10: "a", 9: "b"},
		Bytes: []byte("hi<>"), Array: [3]uint8{1, 2, 3}, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Dur: time.Second, Float: 1e21, Iface: valueMarshaler{1}, Marshalers: []pointerMarshaler{{}},
		MapValues: map[string]pointerMarshaler{"b": {}, "a": {}}, Untagged: "u", BadTag: "b", Punct: "p",
		Skipped: "s", Dash: "d", unexported: "x",
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[edges](), reflect.TypeFor[embeds](), reflect.TypeFor[api.JobProperties]()} {
		if infoOf(typ).delegate {
			t.Fatalf("the walk hands %v to json", typ)
		}
	}
	same(t, e)
	same(t, &e)
	same(t, []edges{e})
	same(t, map[string]*edges{"k": &e, "n": nil})
	same(t, quoted{Quoted: 7})
	same(t, omitZero{})
	same(t, embeds{Inner: Inner{"a"}, Label: "l", B: "b"})
	same(t, embeds{Outer2: &Outer2{D: []int{1}}})
	same(t, &embeds{Outer2: &Outer2{C: "<"}})
	same(t, hides{Outer{Inner{"i"}, "o"}, "b"})
	same(t, unexportedEmbed{inner2{1}, 2})
	same(t, promoted{2, 3})
	same(t, Recur{&Recur{N: 2}, 1})
	same(t, duplicates{"a", "c"})
	same(t, []any{nil, 1, "<", []byte(nil), map[string]any(nil), (*int)(nil)})
	same(t, struct{ M map[string]edges }{})
}

// A value json cannot encode fails with json's error; a cycle of pointers
// fails rather than exhausting the stack.
func TestUnencodableFails(t *testing.T) {
	type node struct {
		Next *node `json:"next"`
	}
	n := &node{}
	n.Next = n
	if _, err := Marshal(n); err == nil {
		t.Fatal("a cycle encoded")
	} else if _, ok := errors.AsType[*json.UnsupportedValueError](err); !ok {
		t.Fatalf("a cycle: %T %v, want json's UnsupportedValueError", err, err)
	}
	same(t, struct{ F func() }{})
	same(t, map[string]any{"c": make(chan int)})
	_, err := Marshal(struct{ F float64 }{F: 0 * 1 / zero()})
	if err == nil {
		t.Fatal("NaN encoded")
	}
}

func zero() float64 { return 0 }

// A job encodes by walking what it fills: the first encoding of a small
// one sets up a few types, not the 39 its type reaches.
func TestWalkSetsUpOnlyFilledTypes(t *testing.T) {
	infos.Clear()
	j := api.Job{Name: "x", Properties: api.JobProperties{Command: "true", ComputeID: "c"}}
	if _, err := Marshal(j); err != nil {
		t.Fatal(err)
	}
	n := 0
	infos.Range(func(_, _ any) bool { n++; return true })
	if n > 12 {
		t.Fatalf("%d types set up for a job with three fields", n)
	}
}
