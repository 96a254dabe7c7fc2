package lazyjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

// Unmarshal decodes data into v as json.Unmarshal would, setting up only
// the types the data fills. (json.Unmarshal sets up a struct's fields
// with an encoder for each, so decoding a job walks its type's whole
// graph too.) It parses data into maps, slices and json.Numbers, then
// sets v from them, visiting the struct types the data names. What it
// does not reproduce itself (a field whose name matches only in another
// case, a map whose keys are not strings, base64 for a byte slice, a
// value of a type that does not match) it leaves to json.Unmarshal, from
// the start, as it does a v that does not point to a zero value (json
// merges into what is there); a type with its own UnmarshalJSON or
// UnmarshalText gets its part of the data, encoded again.
func Unmarshal(data []byte, v any) error {
	_, err := unmarshal(data, v)
	return err
}

// unmarshal is Unmarshal, saying whether it set v itself.
func unmarshal(data []byte, v any) (bool, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || !rv.Elem().IsZero() {
		return false, json.Unmarshal(data, v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil || len(bytes.TrimSpace(data[dec.InputOffset():])) != 0 {
		return false, json.Unmarshal(data, v) // json's own error
	}
	if set(rv.Elem(), x) != nil {
		rv.Elem().SetZero()
		return false, json.Unmarshal(data, v) // json's result, and error, in full
	}
	return true, nil
}

// errFallback says that json.Unmarshal is to decode the data instead. Any
// error does: what json would have left set beside it may differ.
var errFallback = errors.New("lazyjson: left to encoding/json")

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// set sets v, addressable and zero, from x, a value parsed with numbers
// kept as json.Number.
func set(v reflect.Value, x any) error {
	t := v.Type()
	if infoOf(t).unmarshals {
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, v.Addr().Interface())
	}
	if x == nil {
		return nil // json sets a null's pointer, map, slice or interface to nil: v is
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := set(p.Elem(), x); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return errFallback
		}
		p, err := plain(x)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(p))
		return nil
	}
	switch x := x.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			return setStruct(v, x)
		case reflect.Map:
			return setMap(v, x)
		}
	case []any:
		switch t.Kind() {
		case reflect.Slice:
			v.Set(reflect.MakeSlice(t, len(x), len(x)))
			fallthrough
		case reflect.Array:
			for i, e := range x {
				if i == v.Len() {
					break
				}
				if err := set(v.Index(i), e); err != nil {
					return err
				}
			}
			return nil
		}
	case string:
		if t.Kind() == reflect.String {
			v.SetString(x)
			return nil
		}
	case bool:
		if t.Kind() == reflect.Bool {
			v.SetBool(x)
			return nil
		}
	case json.Number:
		return setNumber(v, string(x))
	}
	return errFallback
}

func setStruct(v reflect.Value, x map[string]any) error {
	info := infoOf(v.Type())
	if info.delegate {
		return errFallback
	}
	for k, e := range x {
		f, err := info.field(k)
		if err != nil {
			return err
		}
		if f == nil {
			continue
		}
		fv := v
		for _, i := range f.index {
			if fv.Kind() == reflect.Pointer { // an embedded struct's
				if fv.IsNil() {
					fv.Set(reflect.New(fv.Type().Elem()))
				}
				fv = fv.Elem()
			}
			fv = fv.Field(i)
		}
		if err := set(fv, e); err != nil {
			return err
		}
	}
	return nil
}

// field is the field a key names, nil for none; a key that names one only
// in another case is json's to match.
func (info *typeInfo) field(key string) (*field, error) {
	folded := false
	for i := range info.fields {
		f := &info.fields[i]
		if f.name == key {
			return f, nil
		}
		folded = folded || strings.EqualFold(f.name, key)
	}
	if folded {
		return nil, errFallback
	}
	return nil, nil
}

func setMap(v reflect.Value, x map[string]any) error {
	t := v.Type()
	if t.Key().Kind() != reflect.String || reflect.PointerTo(t.Key()).Implements(textUnmarshalerType) {
		return errFallback
	}
	m := reflect.MakeMapWithSize(t, len(x))
	for k, e := range x {
		ev := reflect.New(t.Elem()).Elem()
		if err := set(ev, e); err != nil {
			return err
		}
		m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
	}
	v.Set(m)
	return nil
}

func setNumber(v reflect.Value, s string) error {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return errFallback
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v.OverflowUint(n) {
			return errFallback
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil || v.OverflowFloat(n) {
			return errFallback
		}
		v.SetFloat(n)
	default:
		return errFallback
	}
	return nil
}

// plain turns x's json.Numbers into the float64s json.Unmarshal gives an
// interface.
func plain(x any) (any, error) {
	var err error
	switch x := x.(type) {
	case json.Number:
		return strconv.ParseFloat(string(x), 64) // out of range: json's error
	case map[string]any:
		for k, e := range x {
			if x[k], err = plain(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range x {
			if x[i], err = plain(e); err != nil {
				return nil, err
			}
		}
	}
	return x, nil
}
