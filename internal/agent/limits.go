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

// A node's CPU and memory are held to its size with cgroup v2: the node's
// cgroup, cumulus/<node> under cgroupRoot, has the size's cpu.max and
// memory.max, and each job runs in a cgroup of its own inside it. The
// node's figures are then its cgroup's (see usage.go). Where cgroup v2
// with the cpu and memory controllers cannot be had here (cgroup v1, not
// root, controllers not delegated), the limits are not enforced: the agent
// says so once, jobs run without, and the node's figures come from its
// jobs' processes.

// nodeCgroupDir is the node's cgroup folder.
func (a *agent) nodeCgroupDir() string { return filepath.Join(cgroupRoot, "cumulus", a.node()) }

// jobCgroup makes a cgroup for a job inside the node's, or returns nil
// when there are no limits or they cannot be enforced here. Best effort:
// a job never fails for want of a cgroup.
func (a *agent) jobCgroup(uid string, log *slog.Logger) *cgroup {
	if (a.cfg.VCPUs <= 0 && a.cfg.MemoryMB <= 0) || a.noCgroups.Load() {
		return nil
	}
	node, err := makeNodeCgroup(a.nodeCgroupDir(), a.cfg.VCPUs, a.cfg.MemoryMB)
	if err == nil {
		var g *cgroup
		if g, err = makeCgroup(node, uid); err == nil {
			return g
		}
	}
	a.limitsNotEnforced(log, err)
	return nil
}

// limitsNotEnforced says once per agent that limits are only recorded, and
// stops later jobs from trying again.
func (a *agent) limitsNotEnforced(log *slog.Logger, err error) {
	a.noCgroups.Store(true)
	a.limitsOnce.Do(func() {
		log.Info("job resource limits are recorded but not enforced on this node", "vcpus", a.cfg.VCPUs, "memoryMB", a.cfg.MemoryMB, "why", err.Error())
	})
}

// removeNodeCgroup removes the node's cgroup when the agent stops (its
// jobs' are gone by then); nothing when there is none.
func (a *agent) removeNodeCgroup() {
	if a.cfg.VCPUs > 0 || a.cfg.MemoryMB > 0 {
		RemoveNodeCgroup(a.node())
	}
}

// RemoveNodeCgroup removes what is left of a node's cgroup: the cgroups
// of jobs whose processes are gone, then the node's. A provider calls it
// when it deletes a node whose agent could not. Best effort.
func RemoveNodeCgroup(nodeID string) {
	if nodeID == "" || !safeName(nodeID) {
		return
	}
	dir := filepath.Join(cgroupRoot, "cumulus", nodeID)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}

// makeNodeCgroup makes (or finds) the node's cgroup at dir with its
// limits, its controllers passed on to the jobs' cgroups inside it.
func makeNodeCgroup(dir string, vcpus, memoryMB int) (string, error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err != nil {
		return "", errors.New("no cgroup v2 at " + cgroupRoot)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	// Delegate the controllers down to the node's cgroup; either write may
	// fail when they are enabled already, so only the result is checked.
	_ = os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644)
	_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if vcpus > 0 {
		v := strconv.Itoa(vcpus*100000) + " 100000"
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(v), 0o644); err != nil {
			return "", fmt.Errorf("set cpu.max: %w", err)
		}
	}
	if memoryMB > 0 {
		v := strconv.FormatInt(int64(memoryMB)<<20, 10)
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(v), 0o644); err != nil {
			return "", fmt.Errorf("set memory.max: %w", err)
		}
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644)
	return dir, nil
}

// makeCgroup makes a job's cgroup inside the node's and opens it for
// CLONE_INTO_CGROUP.
func makeCgroup(parent, name string) (g *cgroup, err error) {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &cgroup{dir: dir, f: f}, nil
}
