package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
)

// cgroupRoot is where cgroup v2 is expected.
var cgroupRoot = "/sys/fs/cgroup"

// cgroup is a job's cgroup v2 directory, opened for CLONE_INTO_CGROUP.
type cgroup struct {
	dir string
	f   *os.File
}

func (g *cgroup) fd() int { return int(g.f.Fd()) }

// remove closes and deletes the cgroup; nil-safe.
func (g *cgroup) remove() {
	if g == nil {
		return
	}
	g.f.Close()
	_ = os.Remove(g.dir) // fails while stray processes live; harmless
}

// jobCgroup makes a cgroup with the node's cpu and memory limits for a job,
// or returns nil when there are no limits or they cannot be enforced here
// (no cgroup v2, not writable, controllers not delegated). Best effort:
// a job never fails for want of a cgroup.
func (a *agent) jobCgroup(uid string, log *slog.Logger) *cgroup {
	if (a.cfg.VCPUs <= 0 && a.cfg.MemoryMB <= 0) || a.noCgroups.Load() {
		return nil
	}
	g, err := makeCgroup(filepath.Join(cgroupRoot, "cumulus"), a.node()+"-"+uid, a.cfg.VCPUs, a.cfg.MemoryMB)
	if err != nil {
		a.limitsNotEnforced(log, err)
		return nil
	}
	return g
}

// limitsNotEnforced says once per agent that limits are only recorded, and
// stops later jobs from trying again.
func (a *agent) limitsNotEnforced(log *slog.Logger, err error) {
	a.noCgroups.Store(true)
	a.limitsOnce.Do(func() {
		log.Info("job resource limits are recorded but not enforced on this node", "vcpus", a.cfg.VCPUs, "memoryMB", a.cfg.MemoryMB, "why", err.Error())
	})
}

func makeCgroup(parent, name string, vcpus, memoryMB int) (g *cgroup, err error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err != nil {
		return nil, errors.New("no cgroup v2 at " + cgroupRoot)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	// Delegate the controllers down to our parent; either write may fail
	// when they are enabled already, so only the result is checked.
	_ = os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644)
	_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644)
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.Remove(dir)
		}
	}()
	if vcpus > 0 {
		v := strconv.Itoa(vcpus*100000) + " 100000"
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(v), 0o644); err != nil {
			return nil, fmt.Errorf("set cpu.max: %w", err)
		}
	}
	if memoryMB > 0 {
		v := strconv.FormatInt(int64(memoryMB)<<20, 10)
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(v), 0o644); err != nil {
			return nil, fmt.Errorf("set memory.max: %w", err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &cgroup{dir: dir, f: f}, nil
}
