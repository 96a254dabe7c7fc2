package server

import (
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (s *Server) putWorkspace(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	var ws api.Workspace
	if err := decode(r, &ws); err != nil {
		return err
	}
	if err := api.PrepareWorkspace(&ws, sc, s.cfg.Defaults.Location); err != nil {
		return err
	}
	ifv, err := preconditions(r)
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	status := http.StatusOK
	var version int64
	err = s.tx(r, func(q store.Querier) error {
		old, err := store.Get[api.Workspace](r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace)
		switch {
		case err == nil && old.Value.Properties.ProvisioningState == api.StateDeleting:
			return api.Conflict(api.CodeOperationInProgress, "workspace %s is being deleted", sc.Workspace)
		case err == nil:
			ws.Name = old.Value.Name
			ws.ID = sc.WorkspaceID()
			ws.Properties.WorkspaceID = old.Value.Properties.WorkspaceID
			ws.Properties.CreationTime = old.Value.Properties.CreationTime
			ws.SystemData = api.Touch(old.Value.SystemData, principal(r), now)
			if ws.Location != old.Value.Location {
				return api.BadRequest(api.CodeImmutable, "the location of workspace %s cannot change (%s → %s)", sc.Workspace, old.Value.Location, ws.Location)
			}
			if err := s.checkAssign(r, q, ws.Identity, old.Value.Identity); err != nil {
				return err
			}
		case isNotFound(err):
			if err := s.checkLocation("location", ws.Location); err != nil {
				return err
			}
			status = http.StatusCreated
			ws.Properties.WorkspaceID = secret.NewID()
			ws.Properties.CreationTime = &now
			ws.SystemData = api.Touch(nil, principal(r), now)
			if err := s.checkAssign(r, q, ws.Identity, nil); err != nil {
				return err
			}
		default:
			return err
		}
		version, err = store.Put(r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace, ws, ifv, now)
		return err
	})
	if err != nil {
		return err
	}
	w.Header().Set("ETag", store.ETagOf(version))
	writeJSON(w, status, s.workspaceView(r, ws))
	return nil
}

// patchWorkspace updates a workspace's tags, identity, sku, friendly name
// and description (Azure's Workspaces_Update). It completes at once: 200
// with the workspace, which a long-running-operation poller takes as done.
func (s *Server) patchWorkspace(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	var u api.WorkspaceUpdate
	if err := decode(r, &u); err != nil {
		return err
	}
	ifv, err := preconditions(r)
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	var ws api.Workspace
	var version int64
	err = s.tx(r, func(q store.Querier) error {
		old, err := store.Get[api.Workspace](r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace)
		if isNotFound(err) {
			if perr := missingWithPrecondition(ifv); perr != nil {
				return perr
			}
			return api.NotFound("workspace %s was not found in resource group %s", sc.Workspace, sc.ResourceGroup)
		}
		if err != nil {
			return err
		}
		if old.Value.Properties.ProvisioningState == api.StateDeleting {
			return api.Conflict(api.CodeOperationInProgress, "workspace %s is being deleted", sc.Workspace)
		}
		if ifv > 0 && old.Version != ifv {
			return store.ErrETagMismatch
		}
		ws = old.Value
		if err := api.ApplyWorkspaceUpdate(&ws, u); err != nil {
			return err
		}
		if err := s.checkAssign(r, q, u.Identity, old.Value.Identity); err != nil {
			return err
		}
		ws.SystemData = api.Touch(old.Value.SystemData, principal(r), now)
		version, err = store.Put(r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace, ws, old.Version, now)
		return err
	})
	if err != nil {
		return err
	}
	w.Header().Set("ETag", store.ETagOf(version))
	writeJSON(w, http.StatusOK, s.workspaceView(r, ws))
	return nil
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	d, err := store.Get[api.Workspace](r.Context(), s.db.Q(), store.KindWorkspace, sc.GroupID(), sc.Workspace)
	if isNotFound(err) {
		return api.NotFound("workspace %s was not found in resource group %s", sc.Workspace, sc.ResourceGroup)
	}
	if err != nil {
		return err
	}
	w.Header().Set("ETag", d.ETag())
	writeJSON(w, http.StatusOK, s.workspaceView(r, d.Value))
	return nil
}

// workspace reads the workspace of a scope, with a clear 404.
// workspace reads the workspace of a scope for a request on one of its
// children: a clear 404 when it is missing, 409 while it is being deleted.
func (s *Server) workspace(r *http.Request, q store.Querier, sc api.Scope) (store.Doc[api.Workspace], error) {
	d, err := store.Get[api.Workspace](r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace)
	if isNotFound(err) {
		return d, &api.Error{Status: http.StatusNotFound, Code: api.CodeParentNotFound,
			Message: "workspace " + sc.Workspace + " was not found in resource group " + sc.ResourceGroup + "; create it with 'cumulus workspace create -n " + sc.Workspace + "'"}
	}
	if err == nil && d.Value.Properties.ProvisioningState == api.StateDeleting && r.Method != http.MethodGet && r.Method != http.MethodDelete {
		return d, api.Conflict(api.CodeOperationInProgress, "workspace %s is being deleted", sc.Workspace)
	}
	return d, err
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	return listPage[api.Workspace](s, w, r, store.KindWorkspace, sc.GroupID(), true, func(x api.Workspace) any { return s.workspaceView(r, x) })
}

func (s *Server) listWorkspacesInSubscription(w http.ResponseWriter, r *http.Request, p params) error {
	return listPage[api.Workspace](s, w, r, store.KindWorkspace, "/subscriptions/"+p["sub"], false, func(x api.Workspace) any { return s.workspaceView(r, x) })
}

func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	force := strings.EqualFold(r.URL.Query().Get("forceToPurge"), "true")
	ifv, err := preconditions(r)
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	var opID, location string
	err = s.tx(r, func(q store.Querier) error {
		d, err := store.Get[api.Workspace](r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace)
		if isNotFound(err) {
			if perr := missingWithPrecondition(ifv); perr != nil {
				return perr
			}
		}
		if err != nil {
			return err
		}
		if ifv > 0 && d.Version != ifv {
			return store.ErrETagMismatch
		}
		location = d.Value.Location
		computes, err := store.List[api.Compute](r.Context(), q, store.KindCompute, sc.WorkspaceID(), true, "", 1<<30)
		if err != nil {
			return err
		}
		if len(computes) == 0 {
			if err := store.Delete(r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace, 0); err != nil {
				return err
			}
			return store.DeleteWorkspaceBlobs(r.Context(), q, sc.WorkspaceID())
		}
		if !force {
			return api.ErrWorkspaceHasComputes(sc.Workspace, len(computes))
		}
		// Forced: every compute is deleted by its own operation (which
		// releases its nodes); the workspace goes when they are gone.
		for _, c := range computes {
			if _, err := queueComputeDelete(r.Context(), q, sc, c, now); err != nil {
				return err
			}
		}
		if op, ok, err := store.PendingOperationFor(r.Context(), q, sc.WorkspaceID(), store.OpWorkspaceDelete); err != nil || ok {
			opID = op.ID
			return err
		}
		ws := d.Value
		ws.Properties.ProvisioningState = api.StateDeleting
		if _, err := store.Put(r.Context(), q, store.KindWorkspace, sc.GroupID(), sc.Workspace, ws, d.Version, now); err != nil {
			return err
		}
		opID = secret.NewID()
		return store.InsertOperation(r.Context(), q, store.Operation{ID: opID, Kind: store.OpWorkspaceDelete, Target: sc.WorkspaceID(), Status: api.OpInProgress, Started: now})
	})
	if isNotFound(err) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	if opID == "" {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	s.changed()
	s.setOperationHeaders(w, r, location, opID, true)
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// workspaceView is a workspace as the API answers it: with its
// discoveryUrl (the services the SDKs read logs and outputs from, all on
// this server) and the storage account of its blob store.
func (s *Server) workspaceView(r *http.Request, ws api.Workspace) api.Workspace {
	ws.Properties.DiscoveryURL = s.baseURL(r) + discoveryPath
	if sc, err := api.ParseWorkspaceID(ws.ID); err == nil {
		ws.Properties.StorageAccount = api.StorageAccountID(sc, api.StorageAccountName(ws.WorkspaceUID()))
	}
	return ws
}
