package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/endpoints"
)

// identity is what a registered agent keeps on disk, so that a restarted
// agent process is the same node.
type identity struct {
	NodeID            string              `json:"nodeId"`
	NodeToken         string              `json:"nodeToken"`
	Server            string              `json:"server"`
	HeartbeatInterval time.Duration       `json:"heartbeatInterval,omitempty"`
	PollTimeout       time.Duration       `json:"pollTimeout,omitempty"`
	UsageInterval     time.Duration       `json:"usageInterval,omitempty"`
	SSH               *agentapi.SSHConfig `json:"ssh,omitempty"`
}

func (a *agent) identityPath() string { return filepath.Join(a.cfg.WorkDir, "identity.json") }

// loadIdentity returns the saved identity, if there is one for this node
// and control plane: saved with a server list that shares a URL with
// ours (replicas added, removed or reordered keep the identity).
func (a *agent) loadIdentity() (identity, bool) {
	var id identity
	b, err := os.ReadFile(a.identityPath())
	if errors.Is(err, fs.ErrNotExist) {
		return id, false
	}
	if err == nil {
		err = json.Unmarshal(b, &id)
	}
	if err != nil {
		a.logger().Warn("ignoring an unreadable saved identity", "path", a.identityPath(), "err", err)
		return identity{}, false
	}
	if id.NodeToken == "" || (a.cfg.NodeID != "" && id.NodeID != a.cfg.NodeID) || !endpoints.Overlap(id.Server, a.cfg.ServerURL) {
		return identity{}, false
	}
	return id, true
}

func (a *agent) saveIdentity(id identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(a.identityPath(), b, 0o600)
}

// register joins the control plane with the join token, retrying with
// backoff until ctx ends. A refused join token falls back to the identity
// a previous agent process saved; without one the refusal is final.
func (a *agent) register(ctx context.Context) error {
	saved, haveSaved := a.loadIdentity()
	if haveSaved && a.nodeID == "" {
		a.mu.Lock()
		a.nodeID = saved.NodeID
		a.mu.Unlock()
		a.setLogger()
	}
	useIdentity := func(why string) {
		a.mu.Lock()
		a.nodeID = saved.NodeID
		a.pollTimeout, a.heartbeat = saved.PollTimeout, saved.HeartbeatInterval
		a.usageEvery = saved.UsageInterval
		a.mu.Unlock()
		a.setLogger()
		a.c.setToken(saved.NodeToken)
		a.logger().Info(why)
		a.startSSH(saved.SSH)
	}
	if a.cfg.JoinToken == "" {
		if haveSaved {
			useIdentity("no join token; using the saved node identity")
			return nil
		}
		return errors.New("no join token and no saved identity: pass --join-token or set CUMULUS_JOIN_TOKEN")
	}
	b := a.newBackoff()
	for n := 1; ; n++ {
		req := agentapi.RegisterRequest{
			NodeID:       a.node(),
			Hostname:     a.cfg.Hostname,
			Address:      a.cfg.Address,
			GPUs:         a.gpus,
			AgentVersion: a.cfg.Version,
			Jobs:         a.jobStates(),
		}
		var resp agentapi.RegisterResponse
		err := a.c.do(ctx, request{method: http.MethodPost, path: agentapi.Prefix + "/register",
			token: a.cfg.JoinToken, json: req}, &resp)
		if err == nil && resp.NodeToken == "" {
			err = errors.New("register: the server answered without a node token")
		}
		if err == nil {
			a.mu.Lock()
			a.nodeID = resp.NodeID
			a.pollTimeout = resp.PollTimeout
			a.heartbeat = resp.HeartbeatInterval
			a.usageEvery = resp.UsageInterval
			a.mu.Unlock()
			a.setLogger()
			a.c.setToken(resp.NodeToken)
			id := identity{NodeID: resp.NodeID, NodeToken: resp.NodeToken, Server: a.cfg.ServerURL,
				HeartbeatInterval: resp.HeartbeatInterval, PollTimeout: resp.PollTimeout, UsageInterval: resp.UsageInterval, SSH: resp.SSH}
			a.startSSH(resp.SSH)
			if err := a.saveIdentity(id); err != nil {
				a.logger().Warn("could not save the node identity; a restarted agent will need a new join token", "err", err)
			}
			a.logger().Info("registered", "address", a.cfg.Address, "gpus", len(a.gpus), "pollTimeout", resp.PollTimeout)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isStatus(err, http.StatusUnauthorized) || isStatus(err, http.StatusForbidden) {
			if haveSaved {
				useIdentity("the join token was refused (already used?); using the saved node identity")
				return nil
			}
			return fmt.Errorf("register: the server refused the join token: %w", err)
		}
		if n == 1 {
			a.logger().Warn("register failed; retrying", "err", err)
		} else {
			a.logger().Debug("register failed", "err", err, "attempt", n)
		}
		if err := sleep(ctx, a.clk, b.next()); err != nil {
			return err
		}
	}
}

// detectAddress returns this machine's address in the range within, or its
// first non-loopback IPv4 address (see pickAddress).
func detectAddress(within string) (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		addrs = nil
	}
	return pickAddress(addrs, within)
}

// pickAddress is the node's address among its interfaces' addresses: the
// first IPv4 one in the range within (a CIDR, e.g. its subnet's), or,
// when within is "", the first that is neither loopback nor link-local
// (127.0.0.1 when there is none).
func pickAddress(addrs []net.Addr, within string) (string, error) {
	var want *net.IPNet
	if within != "" {
		_, nw, err := net.ParseCIDR(within)
		if err != nil {
			return "", fmt.Errorf("--address %s: neither an IP address nor a range: %w", within, err)
		}
		want = nw
	}
	for _, ad := range addrs {
		ipn, ok := ad.(*net.IPNet)
		if !ok {
			continue
		}
		ip := ipn.IP.To4()
		switch {
		case ip == nil:
		case want != nil && want.Contains(ip):
			return ip.String(), nil
		case want == nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast():
			return ip.String(), nil
		}
	}
	if want != nil {
		return "", fmt.Errorf("--address %s: this machine has no address in that range", within)
	}
	return "127.0.0.1", nil
}

// writeFileAtomic writes b to path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
