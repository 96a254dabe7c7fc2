package server

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/cost"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (s *Server) jobRoutes() {
	r := &s.router
	r.handle("GET", ws+"/jobs", s.listJobs)
	r.handle("PUT", ws+"/jobs/{name}", s.putJob)
	r.handle("GET", ws+"/jobs/{name}", s.getJob)
	r.handle("DELETE", ws+"/jobs/{name}", s.deleteJob)
	r.handle("POST", ws+"/jobs/{name}/cancel", s.cancelJob)
	r.handle("GET", ws+"/jobs/{name}/logs", s.jobLogs)
	r.handle("GET", ws+"/jobs/{name}/metrics", s.jobMetrics)
	r.handle("GET", ws+"/jobs/{name}/outputs/{output}", s.jobOutput)
}

// jobCompute is a job's compute as jobView reads it: the stored document,
// and with its node counts once a queued job needs them.
type jobCompute struct {
	doc     *api.Compute
	counted bool
}

// jobView is a stored job as the API returns it, with its services (the
// studio's page of the job), what it has cost so far and, for a queued
// job the controllers gave no reason, why it waits as its cluster's
// status says (computes caches the computes read; nil: none).
func (s *Server) jobView(r *http.Request, j store.Job, computes map[string]*jobCompute) api.Job {
	ctx := r.Context()
	doc := j.Doc
	doc.Properties.Services = map[string]api.JobService{
		"Studio": {JobServiceType: "Studio", Endpoint: s.baseURL(r) + "/#/jobs/" + url.PathEscape(doc.Name)},
	}
	if sp := doc.Properties.Sweep; sp != nil && sp.BestTrial != nil {
		// where azure-ai-ml's jobs.download of a sweep finds its best trial
		props := maps.Clone(doc.Properties.Properties)
		if props == nil {
			props = map[string]string{}
		}
		props["best_child_run_id"] = sp.BestTrial.Name
		doc.Properties.Properties = props
	}
	jc, ok := computes[j.Compute]
	if !ok {
		jc = &jobCompute{}
		if d, err := store.Get[api.Compute](ctx, s.db.Q(), store.KindCompute, computeParent(j.Compute), computeName(j.Compute)); err == nil {
			jc.doc = &d.Value
		}
		if computes != nil {
			computes[j.Compute] = jc
		}
	}
	hourly := 0.0
	if jc.doc != nil {
		a := jc.doc.Aml()
		hourly, _ = s.cfg.Prices.Hourly(a.VMSize, a.VMPriority)
	}
	hours := cost.JobNodeHours(doc.Properties, s.clock.Now())
	c := &api.JobCost{Amount: hours * hourly, Currency: s.cfg.Prices.Currency, NodeHours: hours}
	if m := doc.MaxCost(); m > 0 {
		c.MaxCost = &m
	}
	doc.Properties.Cost = c
	if p := &doc.Properties; p.WordsWait() && jc.doc != nil {
		if !jc.counted { // the allocation state as GET of the compute says it
			if counts, err := store.NodeCounts(ctx, s.db.Q(), jc.doc.ID); err == nil {
				v := computeWithCounts(*jc.doc, counts)
				jc.doc = &v
			}
			jc.counted = true
		}
		p.StatusMessage = api.QueueReason(*jc.doc, &doc, j.UID)
	}
	return doc
}

// computeParent and computeName split a compute's ARM id.
func computeParent(id string) string { p, _, _ := strings.Cut(id, "/computes/"); return p }
func computeName(id string) string   { _, n, _ := strings.Cut(id, "/computes/"); return n }

// putJob submits a job (command or sweep) or re-submits one that exists
// (lifecycle.Submit): the handler decodes, checks what only the server can
// (code snapshots uploaded to the workspace), resolves where its code,
// inputs and outputs are (jobdata) and resolves the image.
func (s *Server) putJob(w http.ResponseWriter, r *http.Request, p params) error {
	sc, name := scopeOf(p), p["name"]
	var j api.Job
	if err := decode(r, &j); err != nil {
		return err
	}
	wsd, err := s.workspace(r, s.db.Q(), sc)
	if err != nil {
		return err
	}
	if j.IsParallel() {
		return api.BadRequest(api.CodeValidationError, "a parallel job runs only as a step of a pipeline job: put it in a pipeline's jobs (type: parallel)")
	}
	if j.IsPipeline() {
		if err := s.resolveComponents(r.Context(), sc, &j); err != nil {
			return err
		}
	}
	if err := api.PrepareJob(&j, name); err != nil {
		return err
	}
	if err := s.prepareRuns(r.Context(), sc, wsd.Value, &j, name); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	var out store.Job
	var comp api.Compute
	var jc *jobCompute // the job's compute as the transaction read it (nil: none)
	created := false
	err = s.tx(r, func(q store.Querier) error {
		var err error
		out, created, err = lifecycle.Submit(r.Context(), q, lifecycle.Submission{Workspace: sc, Name: name, Job: j, Principal: principal(r), Compute: &comp}, now)
		if created {
			answering(r, http.StatusCreated)
		}
		if err != nil {
			return err
		}
		jc = nil
		if out.Compute == "" || out.Compute != comp.ID {
			return nil
		}
		jc = &jobCompute{doc: &comp}
		// The answer's queue reason counts the compute's nodes: counted
		// here, by the writer from pages it holds, they need no reader to
		// look into the store again right after this commit.
		if out.Doc.Properties.WordsWait() {
			if counts, err := store.NodeCounts(r.Context(), q, comp.ID); err == nil {
				v := computeWithCounts(comp, counts)
				jc.doc, jc.counted = &v, true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.jobsChanged()
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	var computes map[string]*jobCompute
	if jc != nil { // not read again
		computes = map[string]*jobCompute{out.Compute: jc}
	}
	writeJSON(w, status, s.jobView(r, out, computes))
	return nil
}

// prepareRuns checks what a job runs against what only the server knows
// (code snapshots and input folders uploaded to the workspace) and
// resolves its environment to an image: the job's own, a sweep's trials',
// or each step's of a pipeline (whose inputs are checked too).
func (s *Server) prepareRuns(ctx context.Context, sc api.Scope, ws api.Workspace, j *api.Job, name string) error {
	if j.IsPipeline() {
		if err := s.resolveJobData(ctx, sc, ws, name, &api.JobProperties{Inputs: j.Properties.Inputs}); err != nil {
			return err
		}
		if err := s.checkJobBlobs(ctx, sc, api.JobProperties{Inputs: j.Properties.Inputs}); err != nil {
			return err
		}
		for _, sn := range slices.Sorted(maps.Keys(j.Properties.Jobs)) {
			// The step as its job will be (other steps' outputs standing
			// in): its code, data, blobs and image checked.
			step, err := j.StepJob(sn, api.StepJobName(name, sn), func(string, string) (api.JobInput, error) {
				return api.JobInput{JobInputType: "uri_folder"}, nil
			})
			if err == nil {
				err = s.prepareRuns(ctx, sc, ws, &step, step.Name)
			}
			if err != nil {
				var ae *api.Error
				if errors.As(err, &ae) {
					ae.Message = "step " + sn + ": " + ae.Message
				}
				return err
			}
			// Where its data is is resolved when its job is made (its
			// inputs may be other steps' outputs): keep the step as given.
			j.Properties.Jobs[sn].Image, j.Properties.Jobs[sn].EnvironmentNote = step.Properties.Image, step.Properties.EnvironmentNote
			if step.Properties.Sweep != nil {
				j.Properties.Jobs[sn].Sweep = step.Properties.Sweep
			}
		}
		return nil
	}
	if err := s.resolveJobData(ctx, sc, ws, name, &j.Properties); err != nil {
		return err
	}
	runs := j.Properties // what runs: the job itself, or a sweep's trials
	if j.IsSweep() {
		runs = j.Trial(api.TrialName(name, 0), nil).Properties
		j.Properties.Sweep = &api.SweepStatus{Seed: sweepSeed(*j)}
	}
	if err := s.checkJobBlobs(ctx, sc, runs); err != nil {
		return err
	}
	image, note, err := s.jobImage(ctx, sc, runs.EnvironmentID)
	if err != nil {
		return err
	}
	j.Properties.Image, j.Properties.EnvironmentNote = image, note
	return nil
}

func (s *Server) job(r *http.Request, q store.Querier, p params) (store.Job, error) {
	sc := scopeOf(p)
	if _, err := s.workspace(r, q, sc); err != nil {
		return store.Job{}, err
	}
	j, err := store.GetJob(r.Context(), q, sc.WorkspaceID(), p["name"])
	if isNotFound(err) {
		return j, api.NotFound("job %s was not found in workspace %s", p["name"], sc.Workspace)
	}
	return j, err
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, p params) error {
	j, err := s.job(r, s.db.Q(), p)
	if err != nil {
		return err
	}
	v, err := s.fullJobView(r, j, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	if parent := r.URL.Query().Get("parentJobName"); parent != "" {
		return s.listChildren(w, r, sc, parent)
	}
	status := r.URL.Query().Get("status")
	if status != "" {
		canon := ""
		for _, st := range api.JobStatuses {
			if strings.EqualFold(st, status) {
				canon = st
			}
		}
		if canon == "" {
			return api.BadRequest(api.CodeBadRequest, "status %q is not one of %s", status, strings.Join(api.JobStatuses, ", "))
		}
		status = canon
	}
	after, err := decodeSkipToken(r.URL.Query().Get("$skipToken"))
	if err != nil {
		return err
	}
	size := s.pageSize(r)
	jobs, err := store.ListJobsCached(r.Context(), s.db.Q(), s.jobPages, sc.WorkspaceID(), status, after, size+1)
	if err != nil {
		return err
	}
	page := api.Page[api.Job]{Value: []api.Job{}}
	computes := map[string]*jobCompute{}
	for i, j := range jobs {
		if i == size {
			page.NextLink = s.nextLink(r, "$skipToken", encodeSkipToken(jobs[size-1].Doc.Name))
			break
		}
		page.Value = append(page.Value, s.jobView(r, j, computes))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, p params) error {
	now := s.clock.Now().UTC()
	var opID string
	err := s.tx(r, func(q store.Querier) error {
		j, err := s.job(r, q, p)
		if err != nil {
			return err
		}
		if api.JobTerminal(j.Doc.Properties.Status) {
			return api.Conflict(api.CodeConflict, "job %s already ended (%s); there is nothing to cancel", j.Doc.Name, j.Doc.Properties.Status)
		}
		if err := lifecycle.RequestCancel(r.Context(), q, j, now); err != nil {
			return err
		}
		opID = secret.NewID()
		return store.InsertOperation(r.Context(), q, store.Operation{ID: opID, Kind: store.OpJobCancel, Target: "job:" + j.UID, Status: api.OpInProgress, Started: now})
	})
	if err != nil {
		return err
	}
	s.changed()
	s.hub.WakeAll(s.jobNodes(r, p))
	s.setOperationHeaders(w, r, s.cfg.Defaults.Location, opID, true)
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// jobNodes lists the nodes a job holds now (to wake their polls).
func (s *Server) jobNodes(r *http.Request, p params) []string {
	j, err := s.job(r, s.db.Q(), p)
	if err != nil {
		return nil
	}
	return j.Nodes
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request, p params) error {
	var uid string
	err := s.tx(r, func(q store.Querier) error {
		j, err := s.job(r, q, p)
		if err != nil {
			return err
		}
		if !api.JobTerminal(j.Doc.Properties.Status) {
			return api.Conflict(api.CodeConflict, "job %s is %s; cancel it first ('cumulus job cancel -n %s')", j.Doc.Name, j.Doc.Properties.Status, j.Doc.Name)
		}
		uid = j.UID
		return store.DeleteJob(r.Context(), q, j.UID)
	})
	var e *api.Error
	if errors.As(err, &e) && e.Code == api.CodeNotFound {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	if err := errors.Join(s.logs.Remove(uid), s.outputs.Remove(uid)); err != nil {
		s.log.Warn("job files not removed", "job", p["name"], "err", err)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request, p params) error {
	j, err := s.job(r, s.db.Q(), p)
	if err != nil {
		return err
	}
	qv := r.URL.Query()
	num := func(key string, def int64) (int64, error) {
		v := qv.Get(key)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, api.BadRequest(api.CodeBadRequest, "%s must be a non-negative integer", key)
		}
		return n, nil
	}
	attempt, err := num("attempt", int64(j.Attempt))
	if err != nil {
		return err
	}
	rank, err := num("rank", 0)
	if err != nil {
		return err
	}
	offset, err := num("offset", 0)
	if err != nil {
		return err
	}
	key := logKey(j.UID, int(attempt))
	data, size, err := s.logs.Read(key, int(rank), offset, 1<<20)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.LogChunk{Attempt: int(attempt), Rank: int(rank), Offset: offset, Size: size,
		Content: string(data), Status: j.Doc.Properties.Status, Ranks: s.logs.Ranks(key)})
	return nil
}

func logKey(uid string, attempt int) string { return uid + "/attempt-" + strconv.Itoa(attempt) }

func (s *Server) jobOutput(w http.ResponseWriter, r *http.Request, p params) error {
	j, err := s.job(r, s.db.Q(), p)
	if err != nil {
		return err
	}
	name := p["output"]
	if j.Doc.IsPipeline() { // a pipeline's output is the output of the step that binds it
		if j, name, err = s.pipelineOutput(r.Context(), j, name); err != nil {
			return err
		}
	}
	if err := s.fileParallelRows(r.Context(), j.UID); err != nil {
		return err
	}
	f, err := s.outputs.Open(j.UID, name, dispatch.EmptyParts(j, name)...)
	if errors.Is(err, files.ErrNotFound) {
		return api.NotFound("job %s has no output %q (outputs are uploaded when the job ends; it has: %s)", j.Doc.Name, name, strings.Join(s.outputs.Names(j.UID, dispatch.EmptyNames(j)...), ", "))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/gzip")
	w.WriteHeader(http.StatusOK)
	_, err = io.Copy(w, f)
	if err != nil {
		s.log.Warn("output download interrupted", "job", j.Doc.Name, "err", err)
	}
	return nil
}

// computeFor is the compute a new job (or sweep trial, field naming its
// node count) runs on: it exists, is not being deleted, and can ever have
// the job's nodes.
