package server

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/crypto/bcrypt"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// sshConfig is what a node of the compute needs to serve SSH for its
// admin account: the public key and a bcrypt hash of the password (never
// the password itself). nil when the compute has no admin account.
func (s *Server) sshConfig(ctx context.Context, computeID string) (*agentapi.SSHConfig, error) {
	sc, name, err := api.ParseComputeID(computeID, api.Scope{})
	if err != nil {
		return nil, err
	}
	d, err := store.Get[api.Compute](ctx, s.db.Q(), store.KindCompute, sc.WorkspaceID(), name)
	if err != nil {
		return nil, err
	}
	cred := d.Value.Aml().UserAccountCredentials
	if cred == nil || cred.AdminUserName == "" {
		return nil, nil
	}
	out := &agentapi.SSHConfig{User: cred.AdminUserName, AuthorizedKey: cred.AdminUserSSHPublicKey}
	if sealed, err := store.GetSecret(ctx, s.db.Q(), d.Value.ID); err == nil {
		pw, err := s.box.Open(sealed)
		if err != nil {
			return nil, fmt.Errorf("admin password: %w", err)
		}
		h, err := bcrypt.GenerateFromPassword(pw, bcrypt.DefaultCost)
		if err != nil {
			return nil, fmt.Errorf("admin password: %w", err)
		}
		out.PasswordHash = string(h)
	}
	return out, nil
}

// agentSSH records a node's SSH port and open sessions. A node with an
// open session is busy (the autoscaler does not remove it); when the last
// session closes its idle time starts again.
func (s *Server) agentSSH(w http.ResponseWriter, r *http.Request, _ params) error {
	node, err := s.nodeAuth(r)
	if err != nil {
		return asUnauthorized(err)
	}
	var req agentapi.PollRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	err = s.db.Tx(r.Context(), func(q store.Querier) error {
		n, err := store.GetNode(r.Context(), q, node.ID)
		if err != nil {
			return err
		}
		if n.SSHOpen > 0 && req.SSHSessions == 0 && n.State == api.NodeIdle {
			n.IdleSince = now
		}
		n.Port, n.SSHOpen = req.SSHPort, max(req.SSHSessions, 0)
		if sc, name, err := api.ParseComputeID(n.Compute, api.Scope{}); err == nil {
			if d, err := store.Get[api.Compute](r.Context(), q, store.KindCompute, sc.WorkspaceID(), name); err == nil {
				n.PublicSSH = d.Value.Aml().RemoteLoginPortPublicAccess == api.RemoteLoginEnabled
			}
		}
		return store.PutNode(r.Context(), q, n)
	})
	if err != nil {
		return err
	}
	s.changed()
	w.WriteHeader(http.StatusNoContent)
	return nil
}
