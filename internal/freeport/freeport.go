// Package freeport picks TCP ports for the servers tests start (a
// PostgreSQL, a Slurm, a cumulus serve), which bind the ports themselves.
//
// A port taken from the kernel (listen on :0, then close) is in the
// ephemeral range, from which the kernel also gives every outgoing
// connection its local port: on a busy machine one may take it between the
// pick and the server's bind, and two picks in a row may even return the
// same port. The ports here are drawn below that range instead, each
// checked free on every address and held until all are picked, and a
// process is never given the same port twice (a server it started may not
// have bound its port yet when it asks for the next).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// low and high bound the ports drawn: below Linux's default ephemeral
// range (32768–60999).
const low, high = 20000, 32768

var (
	mu    sync.Mutex
	given = map[int]bool{} // the ports this process was given
)

// Pick returns n distinct ports that nothing listens on.
func Pick(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("no free TCP port in %d-%d", low, high-1)
		}
		port := low + rand.IntN(high-low)
		if given[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue // taken
		}
		held = append(held, l)
		ports = append(ports, port)
		given[port] = true
	}
	return ports, nil
}

// Addr returns a loopback address, 127.0.0.1:port, with a port that
// nothing listens on.
func Addr() (string, error) {
	p, err := One()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}

// One returns a port that nothing listens on.
func One() (int, error) {
	p, err := Pick(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}
