package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// Simulated nodes in a process of their own. With Options.Host set, the
// provider starts that command once (again after it died) and asks it for
// nodes over its standard input; the command runs them (ServeHost) as the
// in-process provider would, and tells over its standard output when one
// has stopped. The control plane then spends none of its own processors,
// memory or scheduler on the agents' side of thousands of nodes, as with
// real agents on machines of their own.

// hostRequest is one line the provider writes to the host: its options
// (the first line), a node to start, or a node to stop.
type hostRequest struct {
	Options *hostOptions       `json:"options,omitempty"`
	Create  *provider.NodeSpec `json:"create,omitempty"`
	Delete  string             `json:"delete,omitempty"`
}

type hostOptions struct {
	JobDuration time.Duration `json:"jobDuration"`
	CAFile      string        `json:"caFile,omitempty"`
	HTTP2       bool          `json:"http2,omitempty"`
}

// hostReport is one line the host writes: a node whose agent stopped
// (deleted, or given up as the server told it to).
type hostReport struct {
	Ended string `json:"ended"`
}

// hostStopWait bounds how long Close waits for the host to stop its nodes
// and exit before it is killed.
const hostStopWait = 30 * time.Second

// ServeHost runs the simulated nodes a provider with Options.Host asks
// for on in, reporting on out each one that stops, until in ends: then it
// stops every node and returns.
func ServeHost(in io.Reader, out io.Writer, log *slog.Logger) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	var first hostRequest
	if err := dec.Decode(&first); err != nil || first.Options == nil {
		return fmt.Errorf("sim host: the first request must carry the options (%v)", err)
	}
	o := first.Options
	p, err := New(Options{JobDuration: o.JobDuration, CAFile: o.CAFile, HTTP2: o.HTTP2, Log: log})
	if err != nil {
		return err
	}
	defer p.Close()
	log = p.o.Log // New's default when none was given
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	ended := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(hostReport{Ended: id}) // the provider gone: nothing to tell
	}
	for {
		var r hostRequest
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("sim host: read request: %w", err)
		}
		switch {
		case r.Create != nil:
			id := r.Create.NodeID
			if _, err := p.Create(context.Background(), *r.Create); err != nil {
				log.Warn("sim host: node not started", "node", id, "err", err)
				ended(id)
				continue
			}
			p.mu.Lock()
			n := p.nodes[id]
			p.mu.Unlock()
			go func() {
				<-n.done
				ended(id)
			}()
		case r.Delete != "":
			go func() { _ = p.Delete(context.Background(), r.Delete) }() // its end is reported
		}
	}
}

// host is the provider's side of a running host process.
type host struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	enc  *json.Encoder
	gone chan struct{} // closed once its output ended: every node it ran has stopped
}

// remote is a node running in a host process.
type remote struct {
	h    *host
	done chan struct{} // closed when the host reports it stopped, or the host is gone
}

// startHost starts the host command and tells it the options. p.mu is held.
func (p *Provider) startHost() (*host, error) {
	cmd := exec.Command(p.o.Host[0], p.o.Host[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sim host: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("sim host: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sim host: start %s: %w", p.o.Host[0], err)
	}
	h := &host{cmd: cmd, in: in, enc: json.NewEncoder(in), gone: make(chan struct{})}
	if err := h.enc.Encode(hostRequest{Options: &hostOptions{JobDuration: p.o.JobDuration, CAFile: p.o.CAFile, HTTP2: p.o.HTTP2}}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("sim host: %w", err)
	}
	go p.readHost(h, out)
	return h, nil
}

// readHost ends the nodes the host reports stopped; once its output ends
// (it exited), every node it ran is ended.
func (p *Provider) readHost(h *host, out io.Reader) {
	dec := json.NewDecoder(bufio.NewReader(out))
	for {
		var r hostReport
		if err := dec.Decode(&r); err != nil {
			break
		}
		p.mu.Lock()
		if n, ok := p.remotes[r.Ended]; ok && n.h == h {
			closeOnce(n.done)
		}
		p.mu.Unlock()
	}
	_ = h.cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.remotes {
		if n.h == h {
			closeOnce(n.done)
		}
	}
	if p.host == h {
		p.host = nil
	}
	close(h.gone)
	p.o.Log.Debug("sim host exited", "state", h.cmd.ProcessState)
}

func closeOnce(c chan struct{}) {
	if !ended(c) {
		close(c)
	}
}

// createRemote asks the host (started if need be) for the node.
func (p *Provider) createRemote(spec provider.NodeSpec) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A node that stopped is asked of the host again, which answers as
	// the in-process provider does.
	if n, ok := p.remotes[spec.NodeID]; ok && !ended(n.done) {
		return providerID(spec.NodeID), nil
	}
	if p.host == nil {
		h, err := p.startHost()
		if err != nil {
			return "", err
		}
		p.host = h
	}
	if err := p.host.enc.Encode(hostRequest{Create: &spec}); err != nil {
		return "", fmt.Errorf("sim host: create node %s: %w", spec.NodeID, err)
	}
	p.remotes[spec.NodeID] = &remote{h: p.host, done: make(chan struct{})}
	return providerID(spec.NodeID), nil
}

// deleteRemote asks the host to stop the node and waits until it did.
func (p *Provider) deleteRemote(nodeID string) error {
	p.mu.Lock()
	n, ok := p.remotes[nodeID]
	if ok {
		if err := n.h.enc.Encode(hostRequest{Delete: nodeID}); err != nil {
			closeOnce(n.done) // the host is gone: so is the node
		}
	}
	p.mu.Unlock()
	if !ok {
		return nil
	}
	<-n.done
	p.mu.Lock()
	if p.remotes[nodeID] == n {
		delete(p.remotes, nodeID)
	}
	p.mu.Unlock()
	return nil
}

// closeHost ends the host's input (it stops its nodes and exits), and
// kills it if it has not exited after hostStopWait.
func (p *Provider) closeHost() {
	p.mu.Lock()
	h := p.host
	p.mu.Unlock()
	if h == nil {
		return
	}
	_ = h.in.Close()
	select {
	case <-h.gone:
	case <-time.After(hostStopWait):
		_ = h.cmd.Process.Kill()
		<-h.gone
	}
}
