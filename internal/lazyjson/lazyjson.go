// Package lazyjson encodes and decodes values as encoding/json does, byte
// for byte and field for field, while setting up only the types a value
// fills.
//
// encoding/json builds an encoder for a type the first time it meets it,
// and a struct's encoder holds one for every field's type (its decoder
// keeps the same field lists), so a value's first encoding or decoding
// walks its type's whole graph: for a job (39 struct types, 241 fields)
// about half a millisecond, paid again by every process that encodes or
// decodes one once. A short command (a job create, a compute show) is
// such a process. Marshal walks the value instead: a struct's fields are
// listed when one of its values is met (and kept for the next), nil and
// omitted fields cost nothing, and what the walk does not reproduce itself
// (a type with its own MarshalJSON or MarshalText; a struct whose names
// repeat, that embeds an unexported struct, or that uses the string or
// omitzero options; a map whose keys are not strings; a byte slice; a
// float; a string json would escape) it hands to encoding/json, whose
// output for that part is the output. Unmarshal is its counterpart.
package lazyjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// Marshal returns the encoding of v, as json.Marshal would.
func Marshal(v any) ([]byte, error) {
	var e encoder
	if err := e.value(reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// MarshalIndent is Marshal with json.MarshalIndent's layout.
func MarshalIndent(v any, prefix, indent string) ([]byte, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(2 * len(b))
	if err := json.Indent(&out, b, prefix, indent); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

type encoder struct {
	buf   []byte
	depth int // values open around the one being encoded
}

// maxDepth is where the walk hands a value to json, which reports a cycle
// of pointers as an error (the walk would recurse until the stack ran out).
const maxDepth = 1000

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// value appends v's encoding.
func (e *encoder) value(v reflect.Value) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	t := v.Type()
	info := infoOf(t)
	if info.delegate || e.depth > maxDepth {
		return e.delegate(v)
	}
	e.depth++
	defer func() { e.depth-- }()
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.value(v.Elem())
	case reflect.Struct:
		return e.structValue(v, info.fields)
	case reflect.Map:
		return e.mapValue(v)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.list(v)
	case reflect.Array:
		return e.list(v)
	case reflect.String:
		e.str(v.String())
		return nil
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
		return nil
	}
	return e.delegate(v)
}

// delegate appends encoding/json's encoding of v. An addressable value is
// passed by its address, so that json calls a MarshalJSON with a pointer
// receiver on it, or on its fields, as it would have in place.
func (e *encoder) delegate(v reflect.Value) error {
	x := v.Interface()
	if v.CanAddr() && v.Kind() != reflect.Pointer {
		x = v.Addr().Interface()
	}
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	e.buf = append(e.buf, b...)
	return nil
}

func (e *encoder) structValue(v reflect.Value, fields []field) error {
	e.buf = append(e.buf, '{')
	first := true
fields:
	for _, f := range fields {
		fv := v
		for _, i := range f.index {
			if fv.Kind() == reflect.Pointer { // an embedded struct's
				if fv.IsNil() {
					continue fields
				}
				fv = fv.Elem()
			}
			fv = fv.Field(i)
		}
		if f.omitEmpty && isEmptyValue(fv) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = append(e.buf, f.key...)
		if err := e.value(fv); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// mapValue encodes a map with string keys (infoOf hands the others to
// json), its keys sorted.
func (e *encoder) mapValue(v reflect.Value) error {
	if v.IsNil() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(k.String())
		e.buf = append(e.buf, ':')
		if err := e.value(v.MapIndex(k)); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) list(v reflect.Value) error {
	e.buf = append(e.buf, '[')
	for i := range v.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.value(v.Index(i)); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

// str appends s quoted. A string of printable ASCII that json would not
// escape is copied; any other is json's to escape (HTML characters,
// control characters, invalid UTF-8, line and paragraph separators).
func (e *encoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			e.buf = append(e.buf, b...)
			return
		}
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
}

// typeInfo is what the walks need of a type: whether json encodes it
// (delegate), else for a struct the fields it encodes, in order; and
// whether json decodes it with its own method (unmarshals).
type typeInfo struct {
	delegate   bool
	fields     []field
	unmarshals bool
}

type field struct {
	index     []int  // of the field, through embedded structs
	name      string // in JSON
	key       string // the quoted name and a colon
	omitEmpty bool
}

var infos sync.Map // reflect.Type → *typeInfo

func infoOf(t reflect.Type) *typeInfo {
	if i, ok := infos.Load(t); ok {
		return i.(*typeInfo)
	}
	i, _ := infos.LoadOrStore(t, newInfo(t))
	return i.(*typeInfo)
}

func newInfo(t reflect.Type) *typeInfo {
	p := reflect.PointerTo(t)
	info := &typeInfo{unmarshals: p.Implements(unmarshalerType) || p.Implements(textUnmarshalerType)}
	switch {
	case marshals(t):
		info.delegate = true
	case t.Kind() == reflect.Struct:
		fields, ok := structFields(t)
		info.fields, info.delegate = fields, !ok
	case t.Kind() == reflect.Map:
		info.delegate = t.Key().Kind() != reflect.String
	case t.Kind() == reflect.Slice:
		info.delegate = t.Elem().Kind() == reflect.Uint8 // base64, or a marshaler's bytes
	}
	return info
}

// marshals reports whether json would call a method of t's (or of a
// pointer to it, when addressable) to encode it.
func marshals(t reflect.Type) bool {
	if t.Implements(marshalerType) || t.Implements(textMarshalerType) {
		return true
	}
	if t.Kind() != reflect.Pointer {
		p := reflect.PointerTo(t)
		return p.Implements(marshalerType) || p.Implements(textMarshalerType)
	}
	return false
}

// structFields lists t's encoded fields as json would, in order, those
// of an embedded struct in its place, or reports false for a struct whose
// encoding takes json's rules for names that repeat (at any depth), for
// embedded structs that are unexported or repeat, or the string and
// omitzero options.
func structFields(t reflect.Type) ([]field, bool) {
	var fields []field
	names := map[string]bool{}
	embedded := map[reflect.Type]bool{t: true}
	var walk func(t reflect.Type, index []int) bool
	walk = func(t reflect.Type, index []int) bool {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if !validTag(name) {
				name = ""
			}
			at := append(index[:len(index):len(index)], i)
			if sf.Anonymous {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if !sf.IsExported() {
					if ft.Kind() != reflect.Struct {
						continue // json ignores it
					}
					return false // its fields would be reached only read-only
				}
				if name == "" && ft.Kind() == reflect.Struct {
					if embedded[ft] {
						return false
					}
					embedded[ft] = true
					if !walk(ft, at) {
						return false
					}
					continue
				}
			} else if !sf.IsExported() {
				continue
			}
			omitEmpty := false
			for o := range strings.SplitSeq(opts, ",") {
				switch o {
				case "omitempty":
					omitEmpty = true
				case "string", "omitzero":
					return false
				}
			}
			if name == "" {
				name = sf.Name
			}
			if names[name] {
				return false
			}
			names[name] = true
			k, err := json.Marshal(name)
			if err != nil {
				panic(fmt.Sprintf("lazyjson: field name %q: %v", name, err))
			}
			fields = append(fields, field{index: at, name: name, key: string(k) + ":", omitEmpty: omitEmpty})
		}
		return true
	}
	if !walk(t, nil) {
		return nil, false
	}
	return fields, true
}

// validTag is json's rule for a tag's name that it uses.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// isEmptyValue is json's omitempty test.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
