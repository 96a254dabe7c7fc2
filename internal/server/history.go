package server

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The services the SDKs find through a workspace's discoveryUrl: the
// discovery document itself, and the part of Run History that
// azure-ai-ml's jobs.stream and jobs.download read (a run's details with
// its log files, the run, its children, its run data). Every service
// answers on the server's own address. A run is a job, by name.

// historyPrefix begins the Run History paths, dataPrefix the data
// service's.
const (
	historyPrefix = "/history/v1.0"
	dataPrefix    = "/data/v1.0"
)

// discoveryPath is the workspace's discoveryUrl.
const discoveryPath = "/cumulus/discovery"

func (s *Server) historyRoutes() {
	h := &s.history
	run := historyPrefix + ws
	h.handle("GET", run+"/runs/{run}", s.getRun)
	h.handle("GET", run+"/runs/{run}/details", s.getRunDetails)
	h.handle("GET", run+"/runs/{run}/children", s.getRunChildren)
	h.handle("GET", run+"/experiments/{exp}/runs/{run}", s.getRun)
	h.handle("GET", run+"/experiments/{exp}/runs/{run}/details", s.getRunDetails)
	h.handle("GET", run+"/experiments/{exp}/runs/{run}/children", s.getRunChildren)
	h.handle("POST", run+"/rundata", s.getRunData)
	h.handle("POST", dataPrefix+ws+"/dataversion/batchGetResolvedUris", s.resolveDataURIs)
}

// isDataplane reports whether a path is one of the data-plane services'.
func isDataplane(path string) bool {
	return strings.HasPrefix(path, historyPrefix+"/") || strings.HasPrefix(path, dataPrefix+"/")
}

// discovery answers the discovery document: every service is here. It is
// public, as Azure's is: it names addresses, nothing else.
func (s *Server) discovery(w http.ResponseWriter, r *http.Request, _ params) error {
	base := s.baseURL(r)
	out := map[string]string{}
	for _, k := range []string{"api", "catalog", "experimentation", "gallery", "history", "hyperdrive", "labeling", "modelmanagement", "pipelines", "studiocoreservices"} {
		out[k] = base
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// serveHistory serves the Run History paths: authenticated, authorized as
// reads of the workspace path they carry, ARM errors.
func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request, route *string) {
	h, p, pathOK, pattern := s.history.matchRoute(r.Method, r.URL.Path)
	*route = pattern
	if err := s.authenticateRequest(r); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cumulus"`)
		writeError(w, r, s.log, err)
		return
	}
	if h == nil {
		code, status := "NotFound", http.StatusNotFound
		if pathOK {
			code, status = api.CodeMethodNotAllowed, http.StatusMethodNotAllowed
		}
		writeError(w, r, s.log, &api.Error{Status: status, Code: code, Message: r.Method + " " + r.URL.Path + " is not served (Cumulus serves the Run History and data calls of jobs.stream and jobs.download)"})
		return
	}
	if err := checkScope(p); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.allowOperation(r, scopeOf(p).WorkspaceID()+"/jobs", rbac.Read, api.Provider+"/workspaces/jobs/read"); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := h(w, r, p); err != nil {
		writeError(w, r, s.log, err)
	}
}

// runError is RunHistory's ErrorResponse.
type runError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// run is a Run History run: the fields the SDK reads.
type run struct {
	RunID          string                `json:"runId"`
	RunUUID        string                `json:"runUuid"`
	ParentRunID    string                `json:"parentRunId,omitempty"`
	Status         string                `json:"status"`
	Target         string                `json:"target,omitempty"`
	DisplayName    string                `json:"displayName,omitempty"`
	Name           string                `json:"name,omitempty"`
	RunType        string                `json:"runType,omitempty"`
	ExperimentID   string                `json:"experimentId,omitempty"`
	CreatedUtc     *time.Time            `json:"createdUtc,omitempty"`
	CreatedTimeUtc *time.Time            `json:"createdTimeUtc,omitempty"`
	StartTimeUtc   *time.Time            `json:"startTimeUtc,omitempty"`
	EndTimeUtc     *time.Time            `json:"endTimeUtc,omitempty"`
	Error          *runError             `json:"error,omitempty"`
	Warnings       []any                 `json:"warnings"`
	Tags           map[string]string     `json:"tags,omitempty"`
	Properties     map[string]string     `json:"properties,omitempty"`
	LogFiles       map[string]string     `json:"logFiles"`
	Outputs        map[string]typedAsset `json:"outputs,omitempty"`
	Services       map[string]any        `json:"services,omitempty"`
}

func (s *Server) runOf(r *http.Request, p params) (storeWorkspace, store.Job, error) {
	st, err := s.storeOf(r, p)
	if err != nil {
		return st, store.Job{}, err
	}
	j, err := store.GetJob(r.Context(), s.db.Q(), st.id(), p["run"])
	if isNotFound(err) {
		return st, j, api.NotFound("run %s was not found in workspace %s", p["run"], st.scope.Workspace)
	}
	return st, j, err
}

// runView is a job as a run.
func runView(j store.Job) run {
	p := j.Doc.Properties
	created := j.Created
	out := run{RunID: j.Doc.Name, RunUUID: j.UID, ParentRunID: p.ParentJobName, Status: p.Status, Target: computeName(j.Compute),
		DisplayName: p.DisplayName, Name: j.Doc.Name, RunType: "azureml.scriptrun", ExperimentID: p.ExperimentName,
		CreatedUtc: &created, CreatedTimeUtc: &created, StartTimeUtc: p.StartTime, EndTimeUtc: p.EndTime, Warnings: []any{},
		Tags: p.Tags, Properties: p.Properties}
	if j.Doc.IsSweep() {
		out.RunType, out.Target = "hyperdrive", computeName(store.Key(p.ComputeID))
	}
	if p.Status == api.JobFailed || p.Status == api.JobCanceled {
		e := &runError{}
		e.Error.Code, e.Error.Message = "UserError", p.StatusMessage
		if p.Status == api.JobCanceled {
			e.Error.Code = "Canceled"
		}
		if e.Error.Message == "" {
			e.Error.Message = "the job " + strings.ToLower(p.Status)
		}
		out.Error = e
	}
	return out
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, p params) error {
	_, j, err := s.runOf(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, runView(j))
	return nil
}

// getRunDetails answers a run with its log files: each a URL of the log
// in the artifact container with a read-only SAS of its own, which the
// SDK reads with no other credential.
func (s *Server) getRunDetails(w http.ResponseWriter, r *http.Request, p params) error {
	st, j, err := s.runOf(r, p)
	if err != nil {
		return err
	}
	v := runView(j)
	logs, err := s.logBlobs(r.Context(), st, api.ArtifactPath(j.Doc.Name))
	if err != nil {
		return err
	}
	v.LogFiles = map[string]string{}
	base := s.blobBaseURL(r, st) + "/" + api.ArtifactContainer + "/"
	for _, b := range logs {
		rel := strings.TrimPrefix(b.Name, api.ArtifactPath(j.Doc.Name))
		v.LogFiles[rel] = base + escapeBlobName(b.Name) + "?" + s.blobSAS(st, api.ArtifactContainer, b.Name, principal(r), logSASLifetime)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// escapeBlobName escapes each segment of a blob name for a URL path.
func escapeBlobName(name string) string {
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return strings.Join(segs, "/")
}

// getRunChildren answers a sweep's trials as runs.
func (s *Server) getRunChildren(w http.ResponseWriter, r *http.Request, p params) error {
	st, j, err := s.runOf(r, p)
	if err != nil {
		return err
	}
	page := struct {
		Value []run `json:"value"`
	}{Value: []run{}}
	if sp := j.Doc.Properties.Sweep; j.Doc.IsSweep() && sp != nil {
		for i := range sp.TrialsCreated {
			t, err := store.GetJob(r.Context(), s.db.Q(), st.id(), api.TrialName(j.Doc.Name, i))
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			if t.Doc.Properties.ParentJobName == j.Doc.Name {
				page.Value = append(page.Value, runView(t))
			}
		}
	}
	sort.SliceStable(page.Value, func(a, b int) bool { return page.Value[a].RunID < page.Value[b].RunID })
	writeJSON(w, http.StatusOK, page)
	return nil
}

// getRunData answers a run's metadata (GetRunDataResult). It names no
// output assets: the SDK then finds a job's outputs at their datastore
// paths (azureml/<job>/<output>/ of the default datastore).
func (s *Server) getRunData(w http.ResponseWriter, r *http.Request, p params) error {
	var req struct {
		RunID string `json:"runId"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.RunID == "" {
		return api.BadRequest(api.CodeBadRequest, "runId is required")
	}
	p["run"] = req.RunID
	_, j, err := s.runOf(r, p)
	if err != nil {
		return err
	}
	v := runView(j)
	// Its outputs as assets whose ids the data service resolves to their
	// datastore paths (resolveDataURIs): jobs.download(all=True) finds
	// the named outputs this way.
	for name, o := range j.Doc.Properties.Outputs {
		if o.BlobPath == nil {
			continue
		}
		if v.Outputs == nil {
			v.Outputs = map[string]typedAsset{}
		}
		v.Outputs[name] = typedAsset{AssetID: outputAssetID(j.Doc.Name, name), Type: "UriFolder"} // the data type as Run History spells it
	}
	writeJSON(w, http.StatusOK, map[string]any{"runMetadata": v})
	return nil
}

// typedAsset is Run History's TypedAssetReference.
type typedAsset struct {
	AssetID string `json:"assetId"`
	Type    string `json:"type"`
}

// outputAssetID names a job's output as an asset (an opaque id the data
// service resolves).
func outputAssetID(job, output string) string { return "azureml://jobs/" + job + "/outputs/" + output }

// resolveDataURIs is the data service's batchGetResolvedUris for the
// output asset ids getRunData answers: each one's datastore path.
func (s *Server) resolveDataURIs(w http.ResponseWriter, r *http.Request, p params) error {
	var req struct {
		Values []string `json:"values"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	type uri struct {
		URI  string `json:"uri"`
		Type string `json:"type"`
	}
	out := map[string]uri{}
	for _, id := range req.Values {
		rest, ok := strings.CutPrefix(id, "azureml://jobs/")
		job, output, ok2 := strings.Cut(rest, "/outputs/")
		if !ok || !ok2 {
			return api.BadRequest(api.CodeBadRequest, "%.200q is not a job output's asset id (azureml://jobs/<job>/outputs/<output>)", id)
		}
		j, err := store.GetJob(r.Context(), s.db.Q(), st.id(), job)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if o, ok := j.Doc.Properties.Outputs[output]; ok && o.BlobPath != nil && o.BlobPath.Datastore != "" {
			out[id] = uri{URI: o.BlobPath.URI(), Type: "UriFolder"}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"values": out})
	return nil
}
