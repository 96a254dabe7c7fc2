// Package procs gives a command that asks the server one thing and exits
// one processor, before the rest of the program's package inits run.
//
// The Go runtime starts with a processor for each CPU. A short command
// (a job create, a compute show) has no work to spread over them, yet
// every goroutine it starts (the HTTP client's dial, its read and write
// loops) wakes another thread for an idle processor, and each wake is a
// futex call and a context switch: about an eighth of such a command's CPU
// time. With one processor the goroutines take turns on one thread.
//
// The decision must come early: a package's init runs in the order Go
// sorts packages by import path among those whose imports are done, and
// this one imports only os, runtime and slices, so it runs before most
// of the program's inits. GOMAXPROCS set in the environment is left as
// it is.
package procs

import (
	"os"
	"runtime"
	"slices"
)

// OneShot are the top-level commands that send the server a request or a
// few and exit, each with those of its subcommands (Except) that do work
// of their own instead and keep every processor. Every other command
// (serve, agent, sim, store, node-image, ui) keeps them all, and so does a
// command line that does not start with a command's name (a flag first):
// one processor is an optimization, never a surprise. An array, not a
// map: every process of the program, the jobs' inits too, runs this
// package's init, and a map would be built there each time.
var OneShot = [...]struct {
	Name   string
	Except []string
}{
	{"compute", []string{"simulate"}}, {"computetarget", nil}, {"identity", nil}, {"job", nil}, {"workspace", nil},
	{"quota", nil}, {"environment", nil}, {"data", nil}, {"datastore", nil}, {"queue", nil}, {"auth", nil},
	{"audit", nil}, {"cost", nil}, {"budget", nil}, {"lock", nil}, {"apply", nil}, {"sdk", nil}, {"version", nil},
}

func init() {
	if !IsOneShot(os.Args[1:]) {
		return
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}

// IsOneShot reports whether a command line (without the program name)
// runs a one-shot command.
func IsOneShot(args []string) bool {
	if len(args) == 0 {
		return false
	}
	for _, c := range OneShot {
		if c.Name != args[0] {
			continue
		}
		return len(args) == 1 || !slices.Contains(c.Except, args[1])
	}
	return false
}
