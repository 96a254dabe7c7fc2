// Package deepcopy copies values with nothing shared: every pointer,
// slice, map and interface a value reaches through its exported fields is
// copied too, so a change made through the copy never shows in the
// original. It is for the documents Cumulus decodes from JSON (jobs,
// computes), where a copy costs a fraction of decoding them again.
//
// A struct's unexported fields are copied as they are: a time.Time's
// location is shared, as it may be; a type whose unexported fields hold
// references it changes must not be given to Of. Values with cycles are
// not supported (no JSON document has one).
package deepcopy

import (
	"reflect"
	"sync"
)

// Of returns a deep copy of v.
func Of[T any](v T) T {
	var out T
	src := reflect.ValueOf(&v).Elem()
	copierOf(src.Type())(reflect.ValueOf(&out).Elem(), src)
	return out
}

// copier sets dst, settable, zero and of src's type, to a deep copy of src.
type copier func(dst, src reflect.Value)

// copiers holds each type's copier once made (reflect.Type → copier).
var copiers sync.Map

// making guards the making of copiers; made holds those made by the
// making in progress, published all at once when it ends (a recursive
// type's copiers call each other).
var (
	making sync.Mutex
	made   map[reflect.Type]*copier
)

// copierOf returns the copier of type t.
func copierOf(t reflect.Type) copier {
	if c, ok := copiers.Load(t); ok {
		return c.(copier)
	}
	making.Lock()
	defer making.Unlock()
	made = map[reflect.Type]*copier{}
	c := makingOf(t)
	for t, c := range made {
		copiers.Store(t, *c)
	}
	made = nil
	return c
}

// makingOf returns the copier of t while making is held: one published,
// one made already, or a new one. A type that reaches itself gets a
// copier that calls its own once it is made.
func makingOf(t reflect.Type) copier {
	if c, ok := copiers.Load(t); ok {
		return c.(copier)
	}
	if p, ok := made[t]; ok {
		return func(dst, src reflect.Value) { (*p)(dst, src) }
	}
	p := new(copier)
	made[t] = p
	*p = makeCopier(t)
	return *p
}

func makeCopier(t reflect.Type) copier {
	if flat(t) {
		return func(dst, src reflect.Value) { dst.Set(src) }
	}
	switch t.Kind() {
	case reflect.Pointer:
		elem := makingOf(t.Elem())
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			p := reflect.New(t.Elem())
			elem(p.Elem(), src.Elem())
			dst.Set(p)
		}
	case reflect.Interface:
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			e := src.Elem()
			c := reflect.New(e.Type()).Elem()
			copierOf(e.Type())(c, e)
			dst.Set(c)
		}
	case reflect.Slice:
		elem, flatElem := makingOf(t.Elem()), flat(t.Elem())
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			s := reflect.MakeSlice(t, src.Len(), src.Len())
			if flatElem {
				reflect.Copy(s, src)
			} else {
				for i := range src.Len() {
					elem(s.Index(i), src.Index(i))
				}
			}
			dst.Set(s)
		}
	case reflect.Array:
		elem := makingOf(t.Elem())
		return func(dst, src reflect.Value) {
			for i := range src.Len() {
				elem(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Map:
		key, elem := makingOf(t.Key()), makingOf(t.Elem())
		return func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			m := reflect.MakeMapWithSize(t, src.Len())
			k, v := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			for it := src.MapRange(); it.Next(); {
				k.SetZero()
				key(k, it.Key())
				v.SetZero()
				elem(v, it.Value())
				m.SetMapIndex(k, v)
			}
			dst.Set(m)
		}
	case reflect.Struct:
		// The whole struct as it is (its unexported fields, its flat
		// ones), then a copy of each exported field that shares.
		type field struct {
			i    int
			copy copier
		}
		var deep []field
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && !flat(f.Type) {
				deep = append(deep, field{i, makingOf(f.Type)})
			}
		}
		return func(dst, src reflect.Value) {
			dst.Set(src)
			for _, f := range deep {
				d := dst.Field(f.i)
				d.SetZero()
				f.copy(d, src.Field(f.i))
			}
		}
	}
	return func(dst, src reflect.Value) { dst.Set(src) }
}

// flats remembers, by type, whether a value of it shares nothing when
// copied as it is.
var flats sync.Map // reflect.Type → bool

// flat says whether a value of type t reaches no pointer, slice, map or
// interface (through exported fields), so that assigning it copies it
// whole. Strings are immutable, and functions and channels are shared as
// they are.
func flat(t reflect.Type) bool {
	if f, ok := flats.Load(t); ok {
		return f.(bool)
	}
	f := flatOf(t, map[reflect.Type]bool{})
	flats.Store(t, f)
	return f
}

func flatOf(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false // recursive, through a reference
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
		return false
	case reflect.Array:
		return flatOf(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && !flatOf(f.Type, seen) {
				return false
			}
		}
	}
	return true
}
