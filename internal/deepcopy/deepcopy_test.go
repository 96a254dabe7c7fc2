package deepcopy

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// fill sets every exported field v reaches to a value that is not zero:
// each pointer points somewhere, each slice and map has an element, each
// interface holds a JSON-like nested value. depth bounds recursive types.
func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"k": []any{"v", 1.5, map[string]any{"deep": true}}}))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(2.5)
	}
}

// scribble changes every value v reaches in place: each string, number and
// flag, each element of each slice and map (and adds one to each map).
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		// An interface's value is not settable in place: its maps and
		// slices are.
		switch e := v.Elem(); e.Kind() {
		case reflect.Map, reflect.Slice, reflect.Pointer:
			scribble(e)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for it := v.MapRange(); it.Next(); {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			scribble(e)
			v.SetMapIndex(it.Key(), e)
		}
		k := reflect.New(v.Type().Key()).Elem()
		if k.Kind() == reflect.String {
			k.SetString("added")
			v.SetMapIndex(k, reflect.New(v.Type().Elem()).Elem())
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(0, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}

// copiesWhole fills a T, copies it, checks the copy is equal, then changes
// everything the copy reaches and checks the original did not change.
func copiesWhole[T any](t *testing.T) {
	t.Helper()
	var orig T
	fill(reflect.ValueOf(&orig).Elem(), 0)
	before, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	c := Of(orig)
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("%T: the copy differs from the original", orig)
	}
	scribble(reflect.ValueOf(&c).Elem())
	if after, _ := json.Marshal(orig); string(after) != string(before) {
		t.Fatalf("%T: a change of the copy showed in the original:\nbefore %s\nafter  %s", orig, before, after)
	}
	if changed, _ := json.Marshal(c); string(changed) == string(before) {
		t.Fatalf("%T: scribbling over the copy changed nothing (the test sees nothing)", orig)
	}
}

// Every pointer, slice, map and interface a job, a compute or a workspace
// reaches is copied: changing anything in the copy leaves the original as
// it was, for every field the types have now or get later.
func TestCopiesShareNothing(t *testing.T) {
	copiesWhole[api.Job](t)
	copiesWhole[api.Compute](t)
	copiesWhole[api.Workspace](t)
	copiesWhole[struct {
		A [2][]int
		M map[string]*[]string
		I any
		p *int // unexported: kept as it is
	}](t)
	copiesWhole[tree](t)
}

// tree reaches itself.
type tree struct {
	Name string
	Kids []*tree
	By   map[string]tree
}

// ring is a recursive type no other test copies: the goroutines below
// are the first to ask for its copier, all at once.
type ring struct {
	N    int
	Next *ring
	Tags map[string][]ring
}

// Goroutines copying a type for the first time at once each get a whole
// copy (run with -race).
func TestCopiesConcurrently(t *testing.T) {
	var r ring
	fill(reflect.ValueOf(&r).Elem(), 0)
	want, _ := json.Marshal(r)
	done := make(chan string)
	for range 8 {
		go func() {
			b, _ := json.Marshal(Of(r))
			done <- string(b)
		}()
	}
	for range 8 {
		if got := <-done; got != string(want) {
			t.Fatalf("a concurrent copy reads %s, want %s", got, want)
		}
	}
}

// Nil pointers, slices, maps and interfaces stay nil, and empty ones
// empty (JSON tells them apart: omitempty, null).
func TestCopiesKeepNilAndEmpty(t *testing.T) {
	type doc struct {
		NilMap, EmptyMap     map[string]string
		NilSlice, EmptySlice []int
		NilPtr               *int
		NilAny               any
	}
	c := Of(doc{EmptyMap: map[string]string{}, EmptySlice: []int{}})
	if c.NilMap != nil || c.EmptyMap == nil || c.NilSlice != nil || c.EmptySlice == nil || c.NilPtr != nil || c.NilAny != nil {
		t.Fatalf("nil and empty are not kept apart: %#v", c)
	}
}

// benchAgainstDecoding measures a copy of job j beside a decode of its
// document, body.
func benchAgainstDecoding(b *testing.B, j api.Job, body []byte) {
	b.Run("deepcopy", func(b *testing.B) {
		for b.Loop() {
			_ = Of(j)
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			var d api.Job
			if err := json.Unmarshal(body, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A job with every field set.
func BenchmarkCopyJob(b *testing.B) {
	var j api.Job
	fill(reflect.ValueOf(&j).Elem(), 3)
	body, _ := json.Marshal(j)
	benchAgainstDecoding(b, j, body)
}

// A job as a command job on a node is stored.
func BenchmarkCopyTypicalJob(b *testing.B) {
	body := []byte(`{"id":"/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default/jobs/job-1","name":"job-1","type":"Microsoft.MachineLearningServices/workspaces/jobs","systemData":{"createdBy":"admin","createdAt":"2026-11-28T09:00:00Z"},"properties":{"jobType":"Command","command":"true","computeId":"/subscriptions/local/resourceGroups/local/providers/Microsoft.MachineLearningServices/workspaces/default/computes/cpu","environmentVariables":{"A":"1"},"resources":{"instanceCount":1},"isArchived":false,"status":"Running","environmentImage":"local","fairShareGroup":"admin","statusHistory":[{"status":"Queued","time":"2026-11-28T09:00:00Z"},{"status":"Starting","time":"2026-11-28T09:00:01Z"},{"status":"Running","time":"2026-11-28T09:00:02Z"}],"attempts":[{"attempt":1,"nodes":["cpu-node-1"],"startTime":"2026-11-28T09:00:01Z"}],"startTime":"2026-11-28T09:00:02Z"}}`)
	var j api.Job
	if err := json.Unmarshal(body, &j); err != nil {
		b.Fatal(err)
	}
	benchAgainstDecoding(b, j, body)
}
