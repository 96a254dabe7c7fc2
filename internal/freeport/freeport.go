// Package freeport picks TCP ports for the servers tests start (a
// PostgreSQL, a Slurm, a cumulus serve), which bind the ports themselves.
//
// A port taken from the kernel (listen on :0, then close) is in the
// ephemeral range, from which the kernel also gives every outgoing
// connection its local port: on a busy machine one may take it between the
// pick and the server's bind, and two picks in a row may even return the
// same port. The ports here are drawn below that range instead, each
// checked free on every address and held until all are picked.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// low and high bound the ports drawn: below Linux's default ephemeral
// range (32768–60999).
const low, high = 20000, 32768

// Pick returns n distinct ports that nothing listens on.
func Pick(n int) ([]int, error) {
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
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue // taken
		}
		held = append(held, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// One returns a port that nothing listens on.
func One() (int, error) {
	p, err := Pick(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}
