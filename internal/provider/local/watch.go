package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agent"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

var _ provider.Watcher = (*Provider)(nil)

// watchEvery is how often Watch looks for agents that died.
const watchEvery = time.Second

// Watch reports a node whose agent process ended without Delete (killed,
// crashed) as Gone, once, so that the control plane frees what it held
// (its devices first of all) at once instead of after a heartbeat
// timeout. It looks every second until ctx ends.
func (p *Provider) Watch(ctx context.Context, fn func(provider.Event)) error {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	reported := map[string]int{} // node → the pid whose end was reported
	for {
		for _, ev := range p.deadAgents(reported) {
			fn(ev)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// deadAgents are the nodes whose folder names an agent pid that no longer
// runs, or a host that no longer runs them, not reported before.
func (p *Provider) deadAgents(reported map[string]int) []provider.Event {
	p.mu.Lock() // not while Create or Delete is under way
	defer p.mu.Unlock()
	ents, err := os.ReadDir(p.o.BaseDir)
	if err != nil {
		return nil
	}
	var out []provider.Event
	seen := map[string]bool{}
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !provider.ValidNodeID(id) || id == hostsDir {
			continue
		}
		if host, ok := p.hostOf(id); ok {
			seen[id] = true
			if agent.HostedNodeRuns(filepath.Join(p.o.BaseDir, id)) {
				delete(reported, id) // it runs (again): its next end is news
				continue
			}
			pid, _ := readPID(filepath.Join(host, hostPIDFile))
			if reported[id] == pid {
				continue
			}
			reported[id] = pid
			out = append(out, provider.Event{NodeID: id, Kind: provider.EventGone,
				Reason: "the node's agent (in node host pid " + strconv.Itoa(pid) + ") ended"})
			continue
		}
		pid, ok := readPID(filepath.Join(p.o.BaseDir, id, pidFile))
		if !ok {
			continue
		}
		seen[id] = true
		if isAgent(pid, id) || reported[id] == pid {
			continue
		}
		reported[id] = pid
		out = append(out, provider.Event{NodeID: id, Kind: provider.EventGone,
			Reason: "the node's agent process (pid " + strconv.Itoa(pid) + ") ended"})
	}
	for id := range reported {
		if !seen[id] {
			delete(reported, id)
		}
	}
	return out
}
