package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (s *Server) putCompute(w http.ResponseWriter, r *http.Request, p params) error {
	sc, name := scopeOf(p), p["name"]
	var c api.Compute
	if err := decode(r, &c); err != nil {
		return err
	}
	ifv, err := preconditions(r)
	if err != nil {
		return err
	}
	wsd, err := s.workspace(r, s.db.Q(), sc)
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	var (
		created bool
		version int64
		opID    string
	)
	err = s.tx(r, func(q store.Querier) error {
		old, err := store.Get[api.Compute](r.Context(), q, store.KindCompute, sc.WorkspaceID(), name)
		var existing *api.Compute
		switch {
		case err == nil:
			existing = &old.Value
			if st := existing.Properties.ProvisioningState; st == api.StateCreating || st == api.StateDeleting {
				return api.Conflict(api.CodeOperationInProgress, "compute %s is %s; wait for that operation to finish", existing.Name, strings.ToLower(st))
			}
		case !isNotFound(err):
			return err
		}
		was := ""
		if existing != nil {
			was = lifecycle.Grouping(existing)
		}
		if err := api.PrepareCompute(&c, name, existing, wsd.Value.Location); err != nil {
			return err
		}
		if err := s.checkGPUs(c); err != nil {
			return err
		}
		if existing == nil { // an existing compute's location and network cannot change
			if err := s.checkNetwork(c); err != nil {
				return err
			}
			if err := s.checkLocation("location", c.Location); err != nil {
				return err
			}
			if err := s.checkLocation("properties.computeLocation", c.Properties.ComputeLocation); err != nil {
				return err
			}
		}
		if s.cfg.CheckCompute != nil && (existing == nil || !reflect.DeepEqual(c.Aml().Slurm, existing.Aml().Slurm)) {
			if err := s.cfg.CheckCompute(r.Context(), c); err != nil {
				return err
			}
		}
		if err := s.checkAssign(r, q, c.Identity, existingIdentity(existing)); err != nil {
			return err
		}
		if err := s.keepCredentials(r.Context(), q, sc.ComputeID(name), &c, existing); err != nil {
			return err
		}
		s.fillIdentity(sc, c.Identity, existingIdentity(existing))
		c.ID, c.Type = sc.ComputeID(name), api.TypeCompute
		c.Properties.IsAttachedCompute = false
		c.Properties.ProvisioningErrors = nil
		a := c.Aml()
		a.Errors, a.Blocked, a.CurrentNodeCount, a.NodeStateCounts, a.ActiveSchedule, a.NetworkIsolation = nil, nil, 0, api.NodeStateCounts{}, nil, ""
		if existing == nil {
			created = true
			c.Name = name
			if err := s.checkMinimumQuota(r.Context(), q, sc.Subscription, &c); err != nil {
				return err
			}
			c.Properties.CreatedOn, c.Properties.ModifiedOn = &now, &now
			c.Properties.ProvisioningState = api.StateCreating
			a.AllocationState, a.AllocationStateTransitionTime = api.AllocationSteady, &now
			a.TargetNodeCount = 0
			c.SystemData = api.Touch(nil, principal(r), now)
			opID = secret.NewID()
			if err := store.InsertOperation(r.Context(), q, store.Operation{ID: opID, Kind: store.OpComputeCreate, Target: c.ID, Status: api.OpInProgress, Started: now}); err != nil {
				return err
			}
		} else {
			c.Name = existing.Name
			c.Properties.CreatedOn, c.Properties.ModifiedOn = existing.Properties.CreatedOn, &now
			c.Properties.ProvisioningState = existing.Properties.ProvisioningState
			ea := existing.Aml()
			a.AllocationState, a.AllocationStateTransitionTime, a.TargetNodeCount = ea.AllocationState, ea.AllocationStateTransitionTime, ea.TargetNodeCount
			a.Errors, a.Blocked, a.ActiveSchedule = ea.Errors, ea.Blocked, ea.ActiveSchedule
			c.SystemData = api.Touch(existing.SystemData, principal(r), now)
		}
		if version, err = store.Put(r.Context(), q, store.KindCompute, sc.WorkspaceID(), name, c, ifv, now); err != nil {
			return err
		}
		if existing == nil {
			return nil // a new compute has no jobs to group
		}
		return regroup(r.Context(), q, was, c)
	})
	if err != nil {
		return err
	}
	s.changed()
	view, err := s.computeView(r.Context(), c)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", store.ETagOf(version))
	if created {
		s.setOperationHeaders(w, r, c.Location, opID, false)
		writeJSON(w, http.StatusCreated, view)
		return nil
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// keepCredentials seals a new admin password, keeps the stored one when
// the PUT repeats the same user without a password, and strips the
// password from the document that is stored.
func (s *Server) keepCredentials(ctx context.Context, q store.Querier, id string, c *api.Compute, existing *api.Compute) error {
	cred := c.Aml().UserAccountCredentials
	if cred == nil {
		return store.DeleteSecret(ctx, q, id)
	}
	if cred.AdminUserPassword != "" {
		if err := store.PutSecret(ctx, q, id, s.box.Seal([]byte(cred.AdminUserPassword))); err != nil {
			return err
		}
		cred.AdminUserPassword = ""
		return nil
	}
	if existing == nil || existing.Aml().UserAccountCredentials == nil || existing.Aml().UserAccountCredentials.AdminUserName != cred.AdminUserName {
		return store.DeleteSecret(ctx, q, id)
	}
	return nil
}

func existingIdentity(c *api.Compute) *api.Identity {
	if c == nil {
		return nil
	}
	return c.Identity
}

// fillIdentity gives a system-assigned identity its principal (kept
// across updates) and user-assigned entries their ids.
func (s *Server) fillIdentity(sc api.Scope, id, old *api.Identity) {
	if id == nil {
		return
	}
	if strings.Contains(id.Type, api.IdentitySystem) {
		if old != nil && old.PrincipalID != "" {
			id.PrincipalID = old.PrincipalID
		} else {
			id.PrincipalID = secret.NewID()
		}
		id.TenantID = stableUUID("tenant/" + sc.Subscription)
	} else {
		id.PrincipalID, id.TenantID = "", ""
	}
	for k, v := range id.UserAssignedIdentities {
		if v == nil {
			v = &api.UserAssignedIdentity{}
			id.UserAssignedIdentities[k] = v
		}
		v.PrincipalID = stableUUID("principal/" + strings.ToLower(k))
		v.ClientID = stableUUID("client/" + strings.ToLower(k))
	}
}

// stableUUID derives a UUID-shaped id from a name.
func stableUUID(name string) string {
	h := sha256.Sum256([]byte("cumulus/" + name))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func (s *Server) getCompute(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	view, err := s.computeView(r.Context(), d.Value)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", d.ETag())
	writeJSON(w, http.StatusOK, view)
	return nil
}

// computeOf reads the compute a request's path names (workspace first).
func (s *Server) computeOf(r *http.Request, p params) (store.Doc[api.Compute], error) {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return store.Doc[api.Compute]{}, err
	}
	return s.compute(r.Context(), s.db.Q(), sc, p["name"])
}

// compute reads one compute with a 404 that names it.
func (s *Server) compute(ctx context.Context, q store.Querier, sc api.Scope, name string) (store.Doc[api.Compute], error) {
	d, err := store.Get[api.Compute](ctx, q, store.KindCompute, sc.WorkspaceID(), name)
	if isNotFound(err) {
		return d, api.NotFound("compute %s was not found in workspace %s", name, sc.Workspace)
	}
	return d, err
}

func (s *Server) listComputes(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	var viewErr error
	err := listPage[api.Compute](s, w, r, store.KindCompute, sc.WorkspaceID(), true, func(c api.Compute) any {
		v, err := s.computeView(r.Context(), c)
		if err != nil && viewErr == nil {
			viewErr = err
		}
		return v
	})
	if viewErr != nil {
		s.log.Error("compute view", "err", viewErr)
	}
	return err
}

func (s *Server) patchCompute(w http.ResponseWriter, r *http.Request, p params) error {
	sc, name := scopeOf(p), p["name"]
	var u api.ClusterUpdateParameters
	if err := decode(r, &u); err != nil {
		return err
	}
	if pp := u.Properties; pp == nil || pp.Properties == nil || (pp.Properties.ScaleSettings == nil && pp.Properties.IdlePolicy == nil && pp.Properties.Schedules == nil && pp.Properties.QueuePolicy == nil) {
		return api.BadRequest(api.CodeValidationError, `the PATCH body must be {"properties":{"properties":{"scaleSettings":{…}}}} (and/or "idlePolicy":{…}, "schedules":[…], "queuePolicy":{…})`)
	}
	ifv, err := preconditions(r)
	if err != nil {
		return err
	}
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	var c api.Compute
	var version int64
	err = s.tx(r, func(q store.Querier) error {
		d, err := s.compute(r.Context(), q, sc, name)
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
		c = d.Value
		was := lifecycle.Grouping(&c) // before the update changes it in place
		if c.Properties.ProvisioningState == api.StateDeleting {
			return api.Conflict(api.CodeOperationInProgress, "compute %s is being deleted", c.Name)
		}
		if err := api.ApplyUpdate(&c, u.Properties.Properties); err != nil {
			return err
		}
		c.Properties.ModifiedOn = &now
		c.SystemData = api.Touch(c.SystemData, principal(r), now)
		if version, err = store.Put(r.Context(), q, store.KindCompute, sc.WorkspaceID(), name, c, d.Version, now); err != nil {
			return err
		}
		return regroup(r.Context(), q, was, c)
	})
	if err != nil {
		return err
	}
	s.changed()
	view, err := s.computeView(r.Context(), c)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", store.ETagOf(version))
	writeJSON(w, http.StatusOK, view)
	return nil
}

func (s *Server) deleteCompute(w http.ResponseWriter, r *http.Request, p params) error {
	sc, name := scopeOf(p), p["name"]
	action := r.URL.Query().Get("underlyingResourceAction")
	switch {
	case action == "":
		return api.BadRequest(api.CodeBadRequest, "the underlyingResourceAction query parameter is required: Delete or Detach")
	case !strings.EqualFold(action, "Delete") && !strings.EqualFold(action, "Detach"):
		return api.BadRequest(api.CodeBadRequest, "underlyingResourceAction %q is not one of Delete, Detach", action)
	}
	ifv, err := preconditions(r)
	if err != nil {
		return err
	}
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	var opID, location string
	err = s.tx(r, func(q store.Querier) error {
		d, err := store.Get[api.Compute](r.Context(), q, store.KindCompute, sc.WorkspaceID(), name)
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
		opID, err = queueComputeDelete(r.Context(), q, sc, d, now)
		return err
	})
	if isNotFound(err) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	s.changed()
	s.setOperationHeaders(w, r, location, opID, true)
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// queueComputeDelete marks a compute Deleting and queues its delete
// operation, or returns the one already queued. A create still in
// progress is superseded: the delete finishes it.
func queueComputeDelete(ctx context.Context, q store.Querier, sc api.Scope, d store.Doc[api.Compute], now time.Time) (string, error) {
	c := d.Value
	if op, ok, err := store.PendingOperationFor(ctx, q, c.ID, store.OpComputeDelete); err != nil {
		return "", err
	} else if ok {
		return op.ID, nil
	}
	c.Properties.ProvisioningState = api.StateDeleting
	c.Properties.ModifiedOn = &now
	if _, err := store.Put(ctx, q, store.KindCompute, sc.WorkspaceID(), c.Name, c, d.Version, now); err != nil {
		return "", err
	}
	id := secret.NewID()
	return id, store.InsertOperation(ctx, q, store.Operation{ID: id, Kind: store.OpComputeDelete, Target: c.ID, Status: api.OpInProgress, Started: now})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	out := api.ComputeSecrets{ComputeType: api.ComputeTypeSecrets}
	if cred := d.Value.Aml().UserAccountCredentials; cred != nil {
		c := *cred
		sealed, err := store.GetSecret(r.Context(), s.db.Q(), d.Value.ID)
		if err == nil {
			plain, err := s.box.Open(sealed)
			if err != nil {
				return fmt.Errorf("list keys: %w", err)
			}
			c.AdminUserPassword = string(plain)
		} else if !isNotFound(err) {
			return err
		}
		out.UserAccountCredentials = &c
		out.AdministratorAccount = &api.AdministratorAccount{Username: c.AdminUserName, Password: c.AdminUserPassword, PublicKeyData: c.AdminUserSSHPublicKey}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// unsupportedComputeAction answers an action Azure has only for other
// compute types (start, stop and restart are compute instances'): 400
// UserError, worded as Azure words it ("ComputeListNodes with computeType
// ComputeInstance is not supported.").
func (s *Server) unsupportedComputeAction(action string) handler {
	return func(w http.ResponseWriter, r *http.Request, p params) error {
		d, err := s.computeOf(r, p)
		if err != nil {
			return err
		}
		return &api.Error{Status: http.StatusBadRequest, Code: api.CodeUserError,
			Message: "Compute" + action + " with computeType " + d.Value.Properties.ComputeType + " is not supported."}
	}
}

// setOperationHeaders points the client at the operation's status (and,
// for DELETE, at its result).
func (s *Server) setOperationHeaders(w http.ResponseWriter, r *http.Request, location, opID string, withLocation bool) {
	if location == "" {
		location = s.cfg.Defaults.Location
	}
	base := fmt.Sprintf("%s/subscriptions/%s/providers/%s/locations/%s", s.baseURL(r), scopeOfPath(r), api.Provider, location)
	v := r.URL.Query().Get("api-version")
	w.Header().Set("Azure-AsyncOperation", base+"/operationStatuses/"+opID+"?api-version="+v)
	if withLocation {
		w.Header().Set("Location", base+"/operationResults/"+opID+"?api-version="+v)
	}
	w.Header().Set("Retry-After", "1")
}

// scopeOfPath is the subscription segment of the request path.
func scopeOfPath(r *http.Request) string {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(segs) > 1 {
		return segs[1]
	}
	return ""
}

// jobsChanged wakes the controllers after a write of jobs or nodes that
// starts no operation (a submit, an agent's report): the operations' loop
// looks only if it has operations in progress, which may wait on it.
func (s *Server) jobsChanged() {
	NotifyIfPending(s.ops)
	if s.clusters != nil {
		s.clusters.Notify()
	}
}

// changed wakes the controllers after a write they act on.
func (s *Server) changed() {
	if s.ops != nil {
		s.ops.Notify()
	}
	if s.clusters != nil {
		s.clusters.Notify()
	}
}
