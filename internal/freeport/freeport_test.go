package freeport

import (
	"fmt"
	"net"
	"testing"
)

// The ports are distinct, below the ephemeral range, and free: a server
// can bind each.
func TestPick(t *testing.T) {
	for range 50 {
		ports, err := Pick(3)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if seen[p] || p < low || p >= high {
				t.Fatalf("ports %v: want 3 distinct in %d-%d", ports, low, high-1)
			}
			seen[p] = true
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("port %d is not free: %v", p, err)
			}
			l.Close()
		}
	}
}

// A port something listens on is never picked.
func TestPickSkipsATakenPort(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[int]bool{}
	for p := low; p < low+2000; p++ {
		if l, err := net.Listen("tcp", fmt.Sprintf(":%d", p)); err == nil {
			held = append(held, l)
			taken[p] = true
		}
	}
	for range 200 {
		p, err := One()
		if err != nil {
			t.Fatal(err)
		}
		if taken[p] {
			t.Fatalf("picked port %d, which this test listens on", p)
		}
	}
}

// A process is never given a port twice, though the first server may not
// have bound it yet.
func TestNeverTheSamePortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 3000 {
		p, err := One()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
	}
}
