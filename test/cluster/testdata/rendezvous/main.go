// Command rendezvous is a tiny distributed program for the tests: rank 0
// listens on MASTER_ADDR:MASTER_PORT, every other rank connects and sends
// its rank, and rank 0 prints the sum of all ranks.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

func main() {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	addr := net.JoinHostPort(os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"))
	if rank == 0 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(2)
		}
		sum := 0
		for i := 1; i < world; i++ {
			c, err := ln.Accept()
			if err != nil {
				fmt.Println("accept:", err)
				os.Exit(2)
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			r, _ := strconv.Atoi(line[:len(line)-1])
			sum += r
			fmt.Fprintln(c, "ok")
			c.Close()
		}
		fmt.Printf("rank 0 of %d: sum=%d\n", world, sum)
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			fmt.Fprintf(c, "%d\n", rank)
			reply, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Printf("rank %d of %d: master said %s", rank, world, reply)
			return
		}
		if time.Now().After(deadline) {
			fmt.Println("dial:", err)
			os.Exit(2)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
