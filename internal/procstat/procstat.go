// Package procstat reads the few facts of a process that Cumulus decides
// on from Linux's /proc/<pid>/stat: its state, parent, group, session and
// kernel flags.
package procstat

import (
	"bytes"
	"os"
	"strconv"
)

// Stat is what /proc/<pid>/stat says of one process.
type Stat struct {
	State   byte // R, S, D, Z (zombie), X (dead), …
	PPID    int
	PGRP    int
	Session int
	Flags   uint64
}

// pfKthread is the kernel's PF_KTHREAD process flag.
const pfKthread = 0x00200000

// Read returns the stat of pid; false when it has no /proc entry (gone).
func Read(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return Parse(b)
}

// Parse reads a /proc/<pid>/stat line: "pid (comm) state ppid pgrp
// session tty_nr tpgid flags …", where comm may hold spaces and
// parentheses, so fields are counted from its last ')'.
func Parse(b []byte) (Stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 || len(f[0]) != 1 {
		return Stat{}, false
	}
	var s Stat
	var err [4]error
	s.State = f[0][0]
	s.PPID, err[0] = strconv.Atoi(string(f[1]))
	s.PGRP, err[1] = strconv.Atoi(string(f[2]))
	s.Session, err[2] = strconv.Atoi(string(f[3]))
	s.Flags, err[3] = strconv.ParseUint(string(f[6]), 10, 64)
	for _, e := range err {
		if e != nil {
			return Stat{}, false
		}
	}
	return s, true
}

// Live reports whether the process runs: it is neither a zombie waiting
// for its parent to reap it nor dead.
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// KernelThread reports whether the process is one of the kernel's own
// threads, which have no command line and no user program.
func (s Stat) KernelThread() bool { return s.Flags&pfKthread != 0 }
