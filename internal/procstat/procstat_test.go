package procstat

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseCountsFieldsFromTheLastParenthesis(t *testing.T) {
	line := []byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 1 0 99\n")
	s, ok := Parse(line)
	want := Stat{State: 'S', PPID: 1, PGRP: 4242, Session: 4242, Flags: 4194560}
	if !ok || s != want {
		t.Errorf("Parse = %+v, %v; want %+v", s, ok, want)
	}
	for _, bad := range []string{"", "12 (x", "12 (x) S 1 2", "12 (x) S one 2 3 0 -1 0"} {
		if s, ok := Parse([]byte(bad)); ok {
			t.Errorf("Parse(%q) = %+v; want it refused", bad, s)
		}
	}
}

func TestReadSeesThisProcessAndAZombie(t *testing.T) {
	self, ok := Read(os.Getpid())
	if !ok || !self.Live() || self.KernelThread() || self.PPID != os.Getppid() {
		t.Errorf("Read(self) = %+v, %v; want a live user process whose parent is %d", self, ok, os.Getppid())
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	if s, ok := Read(pid); !ok || s.Session != pid || s.PPID != os.Getpid() {
		t.Errorf("child %+v, %v; want its own session %d and parent %d", s, ok, pid, os.Getpid())
	}
	// Wait for it to exit but leave it unreaped (WNOWAIT): a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if s, ok := Read(pid); !ok || s.Live() || s.Session != pid {
		t.Errorf("exited, unreaped child %+v, %v; want a zombie of session %d", s, ok, pid)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if s, ok := Read(pid); ok && s.PPID == os.Getpid() {
		t.Errorf("reaped child still read as %+v", s)
	}
}

func TestKernelThreadsAreKnown(t *testing.T) {
	if comm, _ := os.ReadFile("/proc/2/comm"); string(comm) != "kthreadd\n" {
		t.Skip("no kthreadd in this pid namespace")
	}
	s, ok := Read(2)
	if !ok || !s.KernelThread() {
		t.Errorf("pid 2 = %+v; want the kernel's thread flag", s)
	}
}
