package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// putSweep stores a validated sweep job (api.PrepareJob). A sweep holds no
// nodes: its row names no compute, so the scheduler never sees it; the
// sweep controller creates its trials, command jobs on its compute.
func (s *Server) putSweep(w http.ResponseWriter, r *http.Request, sc api.Scope, name string, j api.Job) error {
	csc, cname, err := api.ParseComputeID(j.Properties.ComputeID, sc)
	if err != nil {
		return api.BadRequest(api.CodeValidationError, "computeId: %s", err)
	}
	if csc != sc {
		return api.BadRequest(api.CodeValidationError, "computeId must name a compute of workspace %s", sc.Workspace)
	}
	trial := j.Trial(api.TrialName(name, 0), nil)
	if err := s.checkJobBlobs(r.Context(), sc, trial.Properties); err != nil {
		return err
	}
	image, note, err := s.jobImage(r.Context(), sc, j.Properties.Trial.EnvironmentID)
	if err != nil {
		return err
	}
	j.Properties.Image, j.Properties.EnvironmentNote = image, note
	seed := uint64(0)
	if a := j.Properties.SamplingAlgorithm; a.Seed != nil {
		seed = uint64(*a.Seed)
	} else {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	now := s.clock.Now().UTC()
	status := http.StatusCreated
	var out store.Job
	err = s.tx(r, func(q store.Querier) error {
		c, err := s.computeFor(r.Context(), q, sc, cname, trial.InstanceCount(), "trial.resources.instanceCount")
		if err != nil {
			return err
		}
		old, err := store.GetJob(r.Context(), q, sc.WorkspaceID(), name)
		if err == nil {
			if !old.Doc.IsSweep() {
				return api.Conflict(api.CodeImmutable, "job %s exists and is a command job; submit the sweep with another name", name)
			}
			status = http.StatusOK
			o, n := &old.Doc.Properties, &j.Properties
			o.Description, o.Tags, o.DisplayName, o.IsArchived = n.Description, n.Tags, n.DisplayName, n.IsArchived
			out = old
			return store.UpdateJob(r.Context(), q, &out)
		}
		if !isNotFound(err) {
			return err
		}
		j.ID, j.Name, j.Type = sc.JobID(name), name, api.TypeJob
		j.Properties.ComputeID = c.ID
		j.Properties.Status, j.Properties.History, j.Properties.Attempts = "", nil, nil
		j.Properties.StartTime, j.Properties.EndTime = nil, nil
		j.Properties.Sweep = &api.SweepStatus{Seed: seed}
		j.SystemData = touch(nil, principal(r), now)
		j.SetStatus(api.JobNotStarted, now, "")
		j.SetStatus(api.JobQueued, now, "")
		out = store.Job{UID: secret.NewID(), Parent: sc.WorkspaceID(), Compute: "", Created: now, Doc: j}
		return store.InsertJob(r.Context(), q, &out)
	})
	if err != nil {
		return err
	}
	s.changed()
	writeJSON(w, status, s.jobView(r, out, nil))
	return nil
}

// listTrials answers GET …/jobs?parentJobName=NAME: the trials of sweep
// NAME, in the order they were created.
func (s *Server) listTrials(w http.ResponseWriter, r *http.Request, sc api.Scope, parent string) error {
	ctx := r.Context()
	sw, err := store.GetJob(ctx, s.db.Q(), sc.WorkspaceID(), parent)
	if isNotFound(err) {
		return api.NotFound("job %s was not found in workspace %s", parent, sc.Workspace)
	}
	if err != nil {
		return err
	}
	page := api.Page[api.Job]{Value: []api.Job{}}
	if !sw.Doc.IsSweep() || sw.Doc.Properties.Sweep == nil {
		writeJSON(w, http.StatusOK, page)
		return nil
	}
	computes := map[string]*jobCompute{}
	for i := range sw.Doc.Properties.Sweep.TrialsCreated {
		t, err := store.GetJob(ctx, s.db.Q(), sc.WorkspaceID(), api.TrialName(parent, i))
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted
		}
		if err != nil {
			return err
		}
		if t.Doc.Properties.ParentJobName != sw.Doc.Name {
			continue
		}
		v := s.jobView(r, t, computes)
		if v.Properties.Metrics, err = s.latestMetrics(ctx, t.UID); err != nil {
			return err
		}
		page.Value = append(page.Value, v)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
