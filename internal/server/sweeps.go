package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// sweepSeed is the seed of a sweep's sampling: the one it names, or a
// random one, recorded so that a restart samples the same trials.
func sweepSeed(j api.Job) uint64 {
	if a := j.Properties.SamplingAlgorithm; a != nil && a.Seed != nil {
		return uint64(*a.Seed)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 1
}

// listTrials answers GET …/jobs?parentJobName=NAME: the trials of sweep
// NAME, in the order they were created.
func (s *Server) listTrials(w http.ResponseWriter, r *http.Request, sc api.Scope, sw store.Job) error {
	ctx := r.Context()
	parent := sw.Doc.Name
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
