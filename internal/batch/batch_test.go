package batch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every item is written exactly once, by one writer at a time, and items
// that arrive while a batch is written share the next one.
func TestEveryItemWrittenOnceInBatches(t *testing.T) {
	var g Group[*int]
	var writing, batches atomic.Int32
	written := make([]int, 200)
	var wg sync.WaitGroup
	for i := range written {
		wg.Go(func() {
			v := i
			g.Do(&v, func(b []*int) {
				if writing.Add(1) != 1 {
					t.Error("two writers at once")
				}
				batches.Add(1)
				time.Sleep(time.Millisecond) // a write that takes a while: others queue
				for _, p := range b {
					written[*p]++
				}
				writing.Add(-1)
			})
		})
	}
	wg.Wait()
	for i, n := range written {
		if n != 1 {
			t.Fatalf("item %d written %d times", i, n)
		}
	}
	if n := batches.Load(); n >= 200 {
		t.Errorf("%d batches for 200 concurrent items: none shared", n)
	}
}

// Max bounds a batch.
func TestMaxBoundsABatch(t *testing.T) {
	g := Group[int]{Max: 3}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			g.Do(i, func(b []int) {
				if len(b) > 3 {
					t.Errorf("a batch of %d", len(b))
				}
				time.Sleep(time.Millisecond)
			})
		})
	}
	wg.Wait()
}

// A write that panics still hands the writing on: the next caller is not
// left waiting for ever, and the panic goes on in the writer.
func TestAPanickingWriteHandsOn(t *testing.T) {
	var g Group[int]
	do := func() (p any) {
		defer func() { p = recover() }()
		g.Do(1, func([]int) { panic("write failed") })
		return nil
	}
	for i := range 2 {
		done := make(chan any, 1)
		go func() { done <- do() }()
		select {
		case p := <-done:
			if p != "write failed" {
				t.Fatalf("call %d: panic %v", i, p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d waits for a batch that panicked", i)
		}
	}
}
