package server

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// KindComponent holds component versions; parent is the component's id.
const KindComponent = "component"

func (s *Server) componentRoutes() {
	r := &s.router
	r.handle("PUT", ws+"/components/{component}/versions/{version}", s.putComponent)
	r.handle("GET", ws+"/components/{component}/versions/{version}", s.getComponent)
	r.handle("GET", ws+"/components/{component}/versions", s.listComponentVersions)
	s.agents.handle("POST", agentapi.Prefix+"/jobs/{uid}/parallel", s.agentParallel)
}

func componentParent(sc api.Scope, name string) string {
	return sc.WorkspaceID() + "/components/" + name
}

// putComponent creates or replaces a component version (anonymous ones
// too: azure-ai-ml registers each inline step as one).
func (s *Server) putComponent(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	var c api.Component
	if err := decode(r, &c); err != nil {
		return err
	}
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	if err := api.PrepareComponent(&c, p["component"], p["version"]); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	parent := componentParent(sc, p["component"])
	c.ID, c.Name, c.Type = parent+"/versions/"+p["version"], p["version"], api.TypeComponent
	status := http.StatusCreated
	err := s.tx(r, func(q store.Querier) error {
		old, err := store.Get[api.Component](r.Context(), q, KindComponent, parent, p["version"])
		switch {
		case err == nil:
			status = http.StatusOK
			c.SystemData = api.Touch(old.Value.SystemData, principal(r), now)
		case isNotFound(err):
			c.SystemData = api.Touch(nil, principal(r), now)
		default:
			return err
		}
		_, err = store.Put(r.Context(), q, KindComponent, parent, p["version"], c, 0, now)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, status, c)
	return nil
}

func (s *Server) getComponent(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	c, err := s.component(r.Context(), sc, p["component"], p["version"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) component(ctx context.Context, sc api.Scope, name, version string) (api.Component, error) {
	d, err := store.Get[api.Component](ctx, s.db.Q(), KindComponent, componentParent(sc, name), version)
	if isNotFound(err) {
		return api.Component{}, api.NotFound("component %s version %s was not found in workspace %s", name, version, sc.Workspace)
	}
	return d.Value, err
}

func (s *Server) listComponentVersions(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	return listPage[api.Component](s, w, r, KindComponent, componentParent(sc, p["component"]), true, func(c api.Component) any { return c })
}

// resolveComponents fills each step of a pipeline that names a component
// (componentId) from that component version of the workspace.
func (s *Server) resolveComponents(ctx context.Context, sc api.Scope, j *api.Job) error {
	for _, sn := range slices.Sorted(maps.Keys(j.Properties.Jobs)) {
		step := j.Properties.Jobs[sn]
		if step == nil || step.ComponentID == "" {
			continue
		}
		name, version, err := api.ParseComponentRef(step.ComponentID)
		if err != nil {
			return api.BadRequest(api.CodeValidationError, "step %s: %s", sn, err)
		}
		c, err := s.component(ctx, sc, name, version)
		var missing *api.Error
		if errors.As(err, &missing) && missing.Status == http.StatusNotFound {
			return api.BadRequest(api.CodeValidationError, "step %s: componentId: %s", sn, missing.Message)
		}
		if err != nil {
			return err
		}
		if err := step.ApplyComponent(c); err != nil {
			return api.BadRequest(api.CodeValidationError, "step %s: component %s:%s: %s", sn, name, version, err)
		}
	}
	return nil
}

// listChildren answers GET …/jobs?parentJobName=NAME: a sweep's trials in
// the order they were created, or a pipeline's steps' jobs in the order
// the steps can run.
func (s *Server) listChildren(w http.ResponseWriter, r *http.Request, sc api.Scope, parent string) error {
	ctx := r.Context()
	pj, err := store.GetJob(ctx, s.db.Q(), sc.WorkspaceID(), parent)
	if isNotFound(err) {
		return api.NotFound("job %s was not found in workspace %s", parent, sc.Workspace)
	}
	if err != nil {
		return err
	}
	if !pj.Doc.IsPipeline() {
		return s.listTrials(w, r, sc, pj)
	}
	page := api.Page[api.Job]{Value: []api.Job{}}
	st := pj.Doc.Properties.Pipeline
	if st == nil {
		writeJSON(w, http.StatusOK, page)
		return nil
	}
	computes := map[string]*jobCompute{}
	for _, step := range st.Order {
		ss := st.Steps[step]
		if ss == nil || ss.Job == "" {
			continue
		}
		c, err := store.GetJob(ctx, s.db.Q(), sc.WorkspaceID(), ss.Job)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if c.Doc.Properties.ParentJobName != pj.Doc.Name {
			continue
		}
		v, err := s.fullJobView(r, c, computes)
		if err != nil {
			return err
		}
		page.Value = append(page.Value, v)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// fullJobView is jobView with what a single job's GET adds: its metrics and
// a parallel step's progress.
func (s *Server) fullJobView(r *http.Request, j store.Job, computes map[string]*jobCompute) (api.Job, error) {
	v := s.jobView(r, j, computes)
	var err error
	if v.Properties.Metrics, err = s.latestMetrics(r.Context(), j.UID); err != nil {
		return v, err
	}
	if err := dispatch.ParallelView(r.Context(), s.db.Q(), &v, j.UID, s.clock.Now().UTC()); err != nil {
		return v, err
	}
	return v, nil
}

// pipelineOutput is the job whose output a pipeline's output z is: the
// step's job and that step's output name.
func (s *Server) pipelineOutput(ctx context.Context, pj store.Job, z string) (store.Job, string, error) {
	step, out, ok := pj.Doc.PipelineOutput(z)
	if !ok {
		return store.Job{}, "", api.NotFound("pipeline %s has no output %q (it has: %s)", pj.Doc.Name, z, outputNames(pj.Doc.Properties.Outputs))
	}
	st := pj.Doc.Properties.Pipeline
	if st == nil || st.Steps[step] == nil || st.Steps[step].Job == "" {
		return store.Job{}, "", api.NotFound("output %s of pipeline %s is step %s's output %s, and step %s has not run", z, pj.Doc.Name, step, out, step)
	}
	c, err := store.GetJob(ctx, s.db.Q(), pj.Parent, st.Steps[step].Job)
	if isNotFound(err) {
		return c, "", api.NotFound("output %s of pipeline %s is step %s's, whose job %s was deleted", z, pj.Doc.Name, step, st.Steps[step].Job)
	}
	if sw := c.Doc.Properties.Sweep; err == nil && c.Doc.IsSweep() && sw != nil && sw.BestTrial != nil {
		c, err = store.GetJob(ctx, s.db.Q(), pj.Parent, sw.BestTrial.Name) // a sweep step's outputs are its best trial's
	}
	return c, out, err
}

func outputNames(m map[string]api.JobOutput) string {
	if len(m) == 0 {
		return "none"
	}
	out := ""
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			out += ", "
		}
		out += k
	}
	return out
}

// maxParallelBody bounds one exchange of a parallel step's driver.
const maxParallelBody = 96 << 20

// agentParallel is a parallel step's driver on a node, through its agent:
// the mini-batches it ran and its ask for more (dispatch.Parallel).
func (s *Server) agentParallel(w http.ResponseWriter, r *http.Request, p params) error {
	node, err := s.nodeAuth(r)
	if err != nil {
		return asUnauthorized(err)
	}
	// The rows of the mini-batches it ran come with it: more than other
	// requests carry (the driver sends at most a few mini-batches' worth).
	body, err := io.ReadAll(io.LimitReader(r.Body, maxParallelBody+1))
	if err != nil {
		return api.BadRequest(api.CodeInvalidRequest, "cannot read the request body: %v", err)
	}
	if len(body) > maxParallelBody {
		return api.BadRequest(api.CodeInvalidRequest, "the request body is larger than %d bytes", maxParallelBody)
	}
	var req agentapi.ParallelRequest
	if err := decodeBytes(body, &req); err != nil {
		return err
	}
	resp, err := s.dispatch.Parallel(r.Context(), node.ID, p["uid"], req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// parallelPartExited files the rows of a parallel step when one of its
// parts' exit ended it (dispatch.Service.RowsExited).
func (s *Server) parallelPartExited(ctx context.Context, uid string) {
	if err := s.fileParallelRows(ctx, uid); err != nil {
		s.log.Warn("the rows of a parallel step were not filed at its output's datastore path", "job", uid, "err", err)
	}
}

// fileParallelRows writes the rows file of a parallel step that has ended
// into its append_row_to output (once), and files that output at its
// datastore path with the rows in it (again each time: whoever wrote the
// rows file first, the datastore gets it).
func (s *Server) fileParallelRows(ctx context.Context, uid string) error {
	j, err := store.GetJobByUID(ctx, s.db.Q(), uid)
	if err != nil || !j.Doc.IsParallel() || !api.JobTerminal(j.Doc.Properties.Status) {
		return nil
	}
	name, _ := j.Doc.ParallelRows()
	if name == "" {
		return nil
	}
	if err := dispatch.WriteRows(ctx, s.db.Q(), s.outputs, j); err != nil {
		return err
	}
	mu := &s.filing[outputStripe(j.UID, name)]
	mu.Lock()
	defer mu.Unlock()
	return s.fileOutput(ctx, j, name)
}
