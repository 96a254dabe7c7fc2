package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// maxUpload bounds an output an agent uploads (blobs: Config.MaxBlobSize).
const maxUpload = 4 << 30

func (s *Server) agentRoutes() {
	a := &s.agents
	a.handle("POST", agentapi.Prefix+"/register", s.agentRegister)
	a.handle("POST", agentapi.Prefix+"/poll", s.agentPoll)
	a.handle("POST", agentapi.Prefix+"/jobs/{uid}/events", s.agentEvent)
	a.handle("POST", agentapi.Prefix+"/jobs/{uid}/logs", s.agentLogs)
	a.handle("PUT", agentapi.Prefix+"/jobs/{uid}/outputs/{name}", s.agentOutput)
	a.handle("GET", agentapi.Prefix+"/jobs/{uid}/checkpoint", s.agentCheckpoint)
	a.handle("GET", agentapi.Prefix+"/jobs/{uid}/code/files", s.agentCodeFiles)
	a.handle("GET", agentapi.Prefix+"/jobs/{uid}/inputs/{name}/files", s.agentInputFiles)
	a.handle("POST", agentapi.Prefix+"/leaving", s.agentLeaving)
	a.handle("POST", agentapi.Prefix+"/ssh", s.agentSSH)
	s.identityRoutes()
	a.handle("GET", agentapi.BlobPrefix+"/{digest}", s.getBlobFile)
	a.handle("PUT", agentapi.BlobPrefix+"/{digest}", s.putBlob)
	a.handle("GET", discoveryPath, s.discovery)
}

// serveCumulus serves the /cumulus/ paths: the agent protocol and blobs.
func (s *Server) serveCumulus(w http.ResponseWriter, r *http.Request, route *string) {
	h, p, pathOK, pattern := s.agents.matchRoute(r.Method, r.URL.Path)
	*route = pattern
	if h == nil {
		code, status := "NotFound", http.StatusNotFound
		if pathOK {
			code, status = api.CodeMethodNotAllowed, http.StatusMethodNotAllowed
		}
		writeError(w, r, s.log, &api.Error{Status: status, Code: code, Message: r.Method + " " + r.URL.Path + " is not served"})
		return
	}
	if err := h(w, r, p); err != nil {
		writeError(w, r, s.log, agentError(err))
	}
}

// agentError maps the agent protocol's refusals to ARM errors.
func agentError(err error) error {
	var de *dispatch.Error
	switch {
	case !errors.As(err, &de):
		return err
	case errors.Is(err, dispatch.ErrUnauthorized):
		return unauthorized(de.Msg)
	case errors.Is(err, dispatch.ErrConflict):
		return api.Conflict(api.CodeConflict, "%s", de.Msg)
	}
	return err
}

func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// nodeAuth finds the node a node token belongs to.
func (s *Server) nodeAuth(r *http.Request) (store.Node, error) {
	return s.dispatch.Authenticate(r.Context(), bearer(r))
}

func (s *Server) agentRegister(w http.ResponseWriter, r *http.Request, _ params) error {
	var req agentapi.RegisterRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	node, nodeToken, err := s.dispatch.Register(r.Context(), bearer(r), req)
	if err != nil {
		return err
	}
	sshCfg, err := s.sshConfig(r.Context(), node.Compute)
	if err != nil {
		s.log.Warn("no SSH for the node", "node", node.ID, "err", err)
	}
	s.log.Info("node registered", "node", node.ID, "compute", node.Compute, "address", req.Address, "gpus", len(req.GPUs))
	writeJSON(w, http.StatusOK, agentapi.RegisterResponse{NodeID: node.ID, NodeToken: nodeToken,
		HeartbeatInterval: s.cfg.HeartbeatInterval, PollTimeout: s.cfg.PollTimeout, SSH: sshCfg, UsageInterval: s.usage.Interval})
	return nil
}

func (s *Server) agentPoll(w http.ResponseWriter, r *http.Request, _ params) error {
	// An unknown node is refused as a wrong token is (401, the same
	// words): answering it {"unknown":true} would tell anyone which node
	// ids exist. Its agent takes the 401 for its own token as the end of
	// its node. (A node removed while its poll is held is still answered
	// unknown: that caller has proved its token.)
	node, err := s.nodeAuth(r)
	if err != nil {
		return asUnauthorized(err)
	}
	var req agentapi.PollRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	hold := s.cfg.PollTimeout
	if req.Usage != nil {
		s.usage.Record(node, req.Usage)
		hold = s.usage.HoldFor(hold, req.Usage)
	}
	resp, err := s.dispatch.PollNode(r.Context(), node, req.Jobs, hold)
	if r.Context().Err() != nil {
		return nil // the agent is gone: nobody reads an answer
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) agentEvent(w http.ResponseWriter, r *http.Request, p params) error {
	node, err := s.nodeAuth(r)
	if err != nil {
		return asUnauthorized(err)
	}
	var ev agentapi.JobEvent
	if err := decode(r, &ev); err != nil {
		return err
	}
	ev.UID = p["uid"]
	if ev.Phase == agentapi.PhaseExited && len(ev.EmptyOutputs) > 0 {
		if err := s.fileEmptyOutputs(r.Context(), node.ID, ev); err != nil {
			return err
		}
	}
	if err := s.dispatch.Report(r.Context(), node.ID, ev); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func asUnauthorized(err error) error {
	if isNotFound(err) {
		return unauthorized("the node is not known to this server")
	}
	return err
}

// nodeJob authenticates the calling node and checks that it takes part in
// the job of the path ({uid}); it returns the node, the job and its rank.
func (s *Server) nodeJob(r *http.Request, p params) (store.Node, store.Job, int, error) {
	node, err := s.nodeAuth(r)
	if err != nil {
		return node, store.Job{}, -1, asUnauthorized(err)
	}
	uid := p["uid"]
	j, err := store.GetJobByUID(r.Context(), s.db.Q(), uid)
	if err != nil {
		return node, j, -1, api.NotFound("job %s is not known", uid)
	}
	rank := slices.Index(j.Nodes, node.ID)
	if rank < 0 {
		return node, j, -1, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: "node " + node.ID + " does not run job " + uid + " now"}
	}
	return node, j, rank, nil
}

func (s *Server) agentLogs(w http.ResponseWriter, r *http.Request, p params) error {
	_, j, rank, err := s.nodeJob(r, p)
	if err != nil {
		return err
	}
	offset, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err != nil || offset < 0 {
		return api.BadRequest(api.CodeBadRequest, "offset must be a non-negative integer")
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return api.BadRequest(api.CodeBadRequest, "read log chunk: %v", err)
	}
	size, err := s.logs.Append(logKey(j.UID, j.Attempt), rank, offset, data)
	if errors.Is(err, files.ErrLogFull) {
		size, err = agentapi.LogFull, nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.LogAck{Size: size})
	return nil
}

// agentOutput stores one node's upload of one output of a job's attempt.
// Every rank uploads its folder (readers get them merged, files.Merge),
// also after the attempt ended: a preempted job's ranks save their
// checkpoint shards while the job already waits for its next attempt.
func (s *Server) agentOutput(w http.ResponseWriter, r *http.Request, p params) error {
	node, err := s.nodeAuth(r)
	if err != nil {
		return asUnauthorized(err)
	}
	j, err := store.GetJobByUID(r.Context(), s.db.Q(), p["uid"])
	if err != nil {
		return api.NotFound("job %s is not known", p["uid"])
	}
	attempt := j.Attempt
	if a := r.URL.Query().Get("attempt"); a != "" {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 || n > j.Attempt {
			return api.BadRequest(api.CodeBadRequest, "attempt must be an attempt of job %s (1 to %d)", j.Doc.Name, j.Attempt)
		}
		attempt = n
	}
	if err := s.storeOutput(r.Context(), node.ID, j, p["name"], attempt, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// storeOutput keeps what node uploaded of output name for attempt of job
// j, and files the output at its datastore path when the attempt is the
// job's latest.
func (s *Server) storeOutput(ctx context.Context, node string, j store.Job, name string, attempt int, body io.Reader) error {
	if name != agentapi.CheckpointOutput && !dispatch.Declares(j, name) {
		return api.BadRequest(api.CodeBadRequest, "job %s declares no output %q", j.Doc.Name, name)
	}
	rank := dispatch.RankIn(j, node, attempt)
	if rank < 0 {
		return &api.Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: fmt.Sprintf("node %s did not run attempt %d of job %s", node, attempt, j.UID)}
	}
	if err := s.outputs.Put(j.UID, name, attempt, rank, body, maxUpload); err != nil {
		return err
	}
	if attempt != j.Attempt {
		return nil
	}
	mu := &s.filing[outputStripe(j.UID, name)]
	mu.Lock()
	defer mu.Unlock()
	return s.fileOutput(ctx, j, name, dispatch.EmptyParts(j, name)...)
}

// fileEmptyOutputs files, for an exit report of the job's current attempt,
// the outputs the node says the job left empty (agentapi.JobState.EmptyOutputs)
// under their blob paths, as their uploads would be: before the exit is
// taken, so that an ended job's outputs are where it says. The exit's
// write keeps them with the job (dispatch.ApplyJobState); a name an upload
// of which would be refused is logged here and left out there.
func (s *Server) fileEmptyOutputs(ctx context.Context, node string, ev agentapi.JobEvent) error {
	j, err := store.GetJobByUID(ctx, s.db.Q(), ev.UID)
	if err != nil || ev.Attempt != j.Attempt {
		return nil // the report itself says that the job is not known, or an earlier attempt's output is not filed
	}
	rank := dispatch.RankIn(j, node, ev.Attempt)
	if rank < 0 {
		return nil // not a node of the attempt: the report changes nothing
	}
	for _, name := range ev.EmptyOutputs {
		if !dispatch.Declares(j, name) {
			if name != agentapi.CheckpointOutput {
				s.log.Warn("an exit report names an empty output the job does not declare", "job", j.Doc.Name, "node", node, "output", name)
			}
			continue
		}
		empty := append(dispatch.EmptyParts(j, name), files.Part{Attempt: ev.Attempt, Rank: rank})
		mu := &s.filing[outputStripe(j.UID, name)]
		mu.Lock()
		err := s.fileOutput(ctx, j, name, empty...)
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// agentCheckpoint serves the checkpoint an earlier attempt of a job saved.
func (s *Server) agentCheckpoint(w http.ResponseWriter, r *http.Request, p params) error {
	_, j, _, err := s.nodeJob(r, p)
	if err != nil {
		return err
	}
	f, err := s.outputs.OpenAll(j.UID, agentapi.CheckpointOutput)
	if errors.Is(err, files.ErrNotFound) {
		return api.NotFound("job %s has no checkpoint", j.Doc.Name)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/gzip")
	_, err = io.Copy(w, f)
	return err
}

// agentLeaving is a node telling that it is going away (its machine or
// container was stopped from outside); see dispatch.Leave.
func (s *Server) agentLeaving(w http.ResponseWriter, r *http.Request, _ params) error {
	node, err := s.nodeAuth(r)
	if err != nil {
		return asUnauthorized(err)
	}
	if err := s.dispatch.Leaving(r.Context(), node.ID); err != nil {
		return err
	}
	s.log.Info("node leaving", "node", node.ID, "compute", node.Compute)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// defaultClientID is the client id of a compute's first managed identity,
// the one a job gets when it asks for none.
func defaultClientID(c api.Compute) (string, bool) {
	if ids := identitiesOf(c); len(ids) > 0 {
		return ids[0].client, true
	}
	return "", false
}
