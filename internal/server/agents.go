package server

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/lifecycle"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Token prefixes: a node's join token and node token carry the node id so
// the server finds the node without scanning; a compute's join token
// (for machines joined by hand) carries the compute id.
const (
	prefixJoin        = "cjt_"
	prefixNode        = "cnt_"
	prefixComputeJoin = "cjc_"
	maxUpload         = 4 << 30
)

// NewNodeJoinToken makes the one-time token a provider hands a new node's agent.
func NewNodeJoinToken(nodeID string) (token, hash string) {
	t := prefixJoin + nodeID + "." + secret.NewToken("")
	return t, secret.Hash(t)
}

func (s *Server) agentRoutes() {
	a := &s.agents
	a.handle("POST", agentapi.Prefix+"/register", s.agentRegister)
	a.handle("POST", agentapi.Prefix+"/poll", s.agentPoll)
	a.handle("POST", agentapi.Prefix+"/jobs/{uid}/events", s.agentEvent)
	a.handle("POST", agentapi.Prefix+"/jobs/{uid}/logs", s.agentLogs)
	a.handle("PUT", agentapi.Prefix+"/jobs/{uid}/outputs/{name}", s.agentOutput)
	a.handle("GET", agentapi.Prefix+"/jobs/{uid}/checkpoint", s.agentCheckpoint)
	a.handle("POST", agentapi.Prefix+"/leaving", s.agentLeaving)
	a.handle("POST", agentapi.Prefix+"/ssh", s.agentSSH)
	s.identityRoutes()
	a.handle("GET", agentapi.BlobPrefix+"/{digest}", s.getBlob)
	a.handle("PUT", agentapi.BlobPrefix+"/{digest}", s.putBlob)
}

// serveCumulus serves the /cumulus/ paths: the agent protocol and blobs.
func (s *Server) serveCumulus(w http.ResponseWriter, r *http.Request) {
	h, p, pathOK := s.agents.match(r.Method, r.URL.Path)
	if h == nil {
		code, status := "NotFound", http.StatusNotFound
		if pathOK {
			code, status = api.CodeMethodNotAllowed, http.StatusMethodNotAllowed
		}
		writeError(w, r, s.log, &api.Error{Status: status, Code: code, Message: r.Method + " " + r.URL.Path + " is not served"})
		return
	}
	if err := h(w, r, p); err != nil {
		writeError(w, r, s.log, err)
	}
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
	tok := bearer(r)
	rest, ok := strings.CutPrefix(tok, prefixNode)
	id, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return store.Node{}, unauthorized("a node token is required")
	}
	n, err := store.GetNode(r.Context(), s.db.Q(), id)
	if isNotFound(err) {
		return n, err
	}
	if err != nil {
		return n, err
	}
	if n.TokenHash == "" || n.TokenHash != secret.Hash(tok) {
		return n, unauthorized("the node token is not valid")
	}
	return n, nil
}

func (s *Server) agentRegister(w http.ResponseWriter, r *http.Request, _ params) error {
	var req agentapi.RegisterRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	tok := bearer(r)
	now := s.clock.Now().UTC()
	nodeToken := ""
	var node store.Node
	err := s.db.Tx(r.Context(), func(q store.Querier) error {
		var err error
		switch {
		case strings.HasPrefix(tok, prefixJoin):
			node, err = s.nodeForJoinToken(r.Context(), q, tok)
		case strings.HasPrefix(tok, prefixComputeJoin):
			node, err = s.nodeForComputeJoin(r.Context(), q, tok, now)
		default:
			err = unauthorized("register needs a join token")
		}
		if err != nil {
			return err
		}
		nodeToken = prefixNode + node.ID + "." + secret.NewToken("")
		node.TokenHash, node.JoinHash = secret.Hash(nodeToken), ""
		node.State, node.Ready, node.IdleSince, node.Heartbeat = api.NodeIdle, now, now, now
		node.Address, node.GPUs = req.Address, nil
		for _, g := range req.GPUs {
			node.GPUs = append(node.GPUs, g.Index)
		}
		return store.PutNode(r.Context(), q, node)
	})
	if err != nil {
		return err
	}
	s.hub.Seen(node.ID, now)
	sshCfg, err := s.sshConfig(r.Context(), node.Compute)
	if err != nil {
		s.log.Warn("no SSH for the node", "node", node.ID, "err", err)
	}
	s.log.Info("node registered", "node", node.ID, "compute", node.Compute, "address", req.Address, "gpus", len(req.GPUs))
	s.changed()
	writeJSON(w, http.StatusOK, agentapi.RegisterResponse{NodeID: node.ID, NodeToken: nodeToken,
		HeartbeatInterval: s.cfg.HeartbeatInterval, PollTimeout: s.cfg.PollTimeout, SSH: sshCfg})
	return nil
}

func (s *Server) nodeForJoinToken(ctx context.Context, q store.Querier, tok string) (store.Node, error) {
	id, _, _ := strings.Cut(strings.TrimPrefix(tok, prefixJoin), ".")
	n, err := store.GetNode(ctx, q, id)
	if isNotFound(err) || (err == nil && (n.JoinHash == "" || n.JoinHash != secret.Hash(tok))) {
		return n, unauthorized("the join token is not valid (it is used once, by the node it was made for)")
	}
	if err != nil {
		return n, err
	}
	if n.State != api.NodePreparing {
		return n, api.Conflict(api.CodeConflict, "node %s is %s and cannot register", n.ID, n.State)
	}
	return n, nil
}

// nodeForComputeJoin makes a node record for a machine joining by hand.
func (s *Server) nodeForComputeJoin(ctx context.Context, q store.Querier, tok string, now time.Time) (store.Node, error) {
	enc, _, _ := strings.Cut(strings.TrimPrefix(tok, prefixComputeJoin), ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return store.Node{}, unauthorized("the join token is not valid")
	}
	computeID := string(raw)
	sealed, err := store.GetSecret(ctx, q, "join:"+computeID)
	if err != nil || string(sealed) != secret.Hash(tok) {
		return store.Node{}, unauthorized("the join token is not valid (it may have been rotated)")
	}
	sc, name, err := api.ParseComputeID(computeID, api.Scope{})
	if err != nil {
		return store.Node{}, err
	}
	d, err := store.Get[api.Compute](ctx, q, store.KindCompute, sc.WorkspaceID(), name)
	if err != nil {
		return store.Node{}, api.Conflict(api.CodeConflict, "the compute of this join token no longer exists")
	}
	a := d.Value.Aml()
	return store.Node{ID: NewNodeID(d.Value.Name, now), Compute: d.Value.ID, State: api.NodePreparing, Priority: a.VMPriority,
		VMSize: a.VMSize, Provider: "manual", Created: now}, nil
}

// NewNodeID makes a node id in Azure's style: tvm-<cluster>-<random>_<time>.
func NewNodeID(compute string, now time.Time) string {
	return "tvm-" + strings.ToLower(compute) + "-" + secret.NewID()[:8] + "_" + now.UTC().Format("20060102t150405z")
}

func (s *Server) agentPoll(w http.ResponseWriter, r *http.Request, _ params) error {
	node, err := s.nodeAuth(r)
	if isNotFound(err) {
		writeJSON(w, http.StatusOK, agentapi.PollResponse{Unknown: true})
		return nil
	}
	if err != nil {
		return err
	}
	var req agentapi.PollRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	s.hub.Seen(node.ID, s.clock.Now())
	for _, st := range req.Jobs {
		if err := s.applyJobState(r.Context(), node.ID, st); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(s.cfg.PollTimeout)
	for last := false; ; {
		resp, err := s.instructions(r.Context(), node.ID, req.Jobs)
		if err != nil {
			return err
		}
		left := time.Until(deadline)
		if resp.Assign != nil || len(resp.Cancel) > 0 || len(resp.Preempt) > 0 || resp.Shutdown || resp.Unknown || left <= 0 || last {
			writeJSON(w, http.StatusOK, resp)
			return nil
		}
		// Hold the poll until there is news for this node; when the wait
		// ends without any (timeout, shutdown), look once more and answer.
		last = !s.hub.Wait(r.Context(), node.ID, left)
		if r.Context().Err() != nil {
			return nil
		}
		s.hub.Seen(node.ID, s.clock.Now())
	}
}

// instructions decides what a polling agent should do now, given what it
// reported it runs.
func (s *Server) instructions(ctx context.Context, nodeID string, reported []agentapi.JobState) (agentapi.PollResponse, error) {
	var resp agentapi.PollResponse
	n, err := store.GetNode(ctx, s.db.Q(), nodeID)
	if isNotFound(err) {
		resp.Unknown = true
		return resp, nil
	}
	if err != nil {
		return resp, err
	}
	runs := false
	for _, st := range reported {
		if st.Phase != agentapi.PhaseRunning {
			continue
		}
		j, err := store.GetJobByUID(ctx, s.db.Q(), st.UID)
		if err != nil && !isNotFound(err) {
			return resp, err
		}
		stop := err != nil || st.UID != n.JobID || st.Attempt != j.Attempt || api.JobTerminal(j.Doc.Properties.Status) ||
			j.Doc.Properties.Status == api.JobCancelRequested || !slices.Contains(j.Nodes, nodeID)
		switch {
		case stop:
			resp.Cancel = append(resp.Cancel, st.UID)
		case !n.Evicted.IsZero():
			resp.Preempt = append(resp.Preempt, st.UID)
			resp.PreemptGrace = s.preemptGrace(ctx, n)
			runs = true
		default:
			runs = true
		}
	}
	switch {
	case n.JobID != "" && !runs:
		j, err := store.GetJobByUID(ctx, s.db.Q(), n.JobID)
		if err != nil && !isNotFound(err) {
			return resp, err
		}
		if err == nil && reportedAttempt(reported, n.JobID, j.Attempt) {
			break // it runs (or just ended) this attempt
		}
		if err == nil && !api.JobTerminal(j.Doc.Properties.Status) && j.Doc.Properties.Status != api.JobCancelRequested &&
			slices.Contains(j.Nodes, nodeID) && n.Evicted.IsZero() {
			a, err := s.assignment(j, nodeID)
			if err != nil {
				return resp, err
			}
			resp.Assign = &a
			break
		}
		// The node still holds a job that no longer runs there (requeued,
		// ended, preempted) and its agent does not run it: an agent reports
		// every job it has, and a poll is never in flight while it takes
		// an assignment. Free the node now rather than wait for a report
		// that will not come.
		if err := s.releaseStale(ctx, nodeID, n.JobID); err != nil {
			return resp, err
		}
	case n.JobID == "" && (n.State == api.NodeLeaving || n.State == api.NodeUnusable || n.State == api.NodePreempted):
		resp.Shutdown = true
	}
	return resp, nil
}

// reportedAttempt reports whether the agent reported this attempt of a job.
func reportedAttempt(reported []agentapi.JobState, uid string, attempt int) bool {
	for _, st := range reported {
		if st.UID == uid && st.Attempt == attempt {
			return true
		}
	}
	return false
}

// assignment is what a node needs to run its part of a job.
func (s *Server) assignment(j store.Job, nodeID string) (agentapi.Assignment, error) {
	p := j.Doc.Properties
	rank := slices.Index(j.Nodes, nodeID)
	env := map[string]string{}
	for k, v := range p.EnvironmentVariables {
		env[k] = v
	}
	inputs := map[string]string{}
	for k, in := range p.Inputs {
		switch digest, isBlob := strings.CutPrefix(in.URI, "cumulus://blobs/"); {
		case strings.EqualFold(in.JobInputType, "literal"):
			env["AZUREML_INPUT_"+k] = in.Value
		case isBlob:
			inputs[k] = digest // the agent unpacks it and sets AZUREML_INPUT_<name>
		default:
			env["AZUREML_INPUT_"+k] = in.URI
		}
	}
	env["AZUREML_RUN_ID"] = j.Doc.Name
	env["AZUREML_EXPERIMENT_NAME"] = p.ExperimentName
	ips := make([]string, len(j.Nodes))
	for i, id := range j.Nodes {
		if n, err := store.GetNode(context.Background(), s.db.Q(), id); err == nil {
			ips[i] = n.Address
		}
	}
	var outputs []string
	for k := range p.Outputs {
		outputs = append(outputs, k)
	}
	slices.Sort(outputs)
	n, err := store.GetNode(context.Background(), s.db.Q(), nodeID)
	if err != nil {
		return agentapi.Assignment{}, err
	}
	codeBlob := ""
	if p.CodeID != "" {
		codeBlob = p.CodeID[strings.LastIndex(p.CodeID, "/")+1:]
	}
	a := agentapi.Assignment{UID: j.UID, Name: j.Doc.Name, Attempt: j.Attempt, Command: expandBindings(p.Command, p), CodeBlob: codeBlob, Inputs: inputs,
		Env: env, Timeout: j.Doc.Timeout(), Grace: 10 * time.Second, Outputs: outputs, GPUs: n.GPUs,
		InstanceIndex: rank, NodeIPs: ips}
	a.Checkpoint = s.outputs.Has(j.UID, agentapi.CheckpointOutput)
	a.Image = p.Image
	if comp, err := s.computeOfJob(context.Background(), j); err == nil && s.identity != nil {
		if ids := identitiesOf(comp); len(ids) > 0 {
			a.Identity, a.DefaultClientID = true, ids[0].client
		}
	}
	if d := p.Distribution; d != nil {
		a.Distribution = &agentapi.Distribution{Type: strings.ToLower(d.DistributionType), ProcessesPerNode: int(d.ProcessCountPerInstance),
			MasterPort: MasterPort(j.Seq), WorkerCount: int(d.WorkerCount), ParameterServers: int(d.ParameterServerCount)}
	}
	if size, ok := catalog.Lookup(n.VMSize); ok && len(n.GPUs) > size.GPUs {
		a.GPUs = n.GPUs[:size.GPUs] // a node gives a job the GPUs its size has, no more
	}
	return a, nil
}

// applyJobState records a phase an agent reports (poll or event).
func (s *Server) applyJobState(ctx context.Context, nodeID string, st agentapi.JobState) error {
	var changed bool
	var nodes []string // the job's nodes before the change: they may have to stop
	err := s.db.Tx(ctx, func(q store.Querier) error {
		j, err := store.GetJobByUID(ctx, q, st.UID)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		nodes = j.Nodes
		now := s.clock.Now().UTC()
		switch st.Phase {
		case agentapi.PhaseRunning:
			at := st.Started
			if at.IsZero() {
				at = now
			}
			before := j.Doc.Properties.Status
			if err := lifecycle.Started(ctx, q, j, nodeID, st.Attempt, at.UTC()); err != nil {
				return err
			}
			changed = before != api.JobRunning
		case agentapi.PhaseExited:
			at := st.Ended
			if at.IsZero() {
				at = now
			}
			changed = true
			n, err := store.GetNode(ctx, q, nodeID)
			current := err == nil && n.JobID == j.UID && st.Attempt == j.Attempt
			switch {
			case current && !n.Evicted.IsZero():
				return lifecycle.Preempted(ctx, q, nodeID, s.cfg.MaxPreemptions, at.UTC())
			case current && st.NodeStopped:
				// The machine went away under the job (its leaving notice may
				// not have reached a server that was down): requeue, not fail.
				return lifecycle.MachineGone(ctx, q, n, "the node was stopped while the job ran", s.cfg.MaxAttempts, s.cfg.MaxPreemptions, at.UTC())
			}
			return lifecycle.Exited(ctx, q, j, nodeID, st.Attempt, st.ExitCode, st.Reason, at.UTC())
		}
		return nil
	})
	if errors.Is(err, store.ErrETagMismatch) {
		return s.applyJobState(ctx, nodeID, st) // raced with another writer: read again
	}
	if err == nil && changed {
		s.changed()
		for _, id := range nodes {
			s.hub.Wake(id)
		}
	}
	return err
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
	if err := s.applyJobState(r.Context(), node.ID, ev); err != nil {
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

// nodeJob checks that a node takes part in a job and returns its rank and attempt.
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
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentapi.LogAck{Size: size})
	return nil
}

func (s *Server) agentOutput(w http.ResponseWriter, r *http.Request, p params) error {
	_, j, _, err := s.nodeJob(r, p)
	if err != nil {
		return err
	}
	name := p["name"]
	if _, declared := j.Doc.Properties.Outputs[name]; name != "default" && name != agentapi.CheckpointOutput && !declared {
		return api.BadRequest(api.CodeBadRequest, "job %s declares no output %q", j.Doc.Name, name)
	}
	if err := s.outputs.Put(j.UID, name, r.Body, maxUpload); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// blobAuth accepts a user token or a node token.
func (s *Server) blobAuth(r *http.Request) error {
	if strings.HasPrefix(bearer(r), prefixNode) {
		_, err := s.nodeAuth(r)
		return asUnauthorized(err)
	}
	return s.authenticate(r)
}

func (s *Server) getBlob(w http.ResponseWriter, r *http.Request, p params) error {
	if err := s.blobAuth(r); err != nil {
		return err
	}
	f, err := s.blobs.Open(p["digest"])
	if errors.Is(err, files.ErrNotFound) {
		return api.NotFound("blob %s is not stored", p["digest"])
	}
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	_, err = io.Copy(w, f)
	return err
}

func (s *Server) putBlob(w http.ResponseWriter, r *http.Request, p params) error {
	if err := s.authenticate(r); err != nil {
		return err
	}
	err := s.blobs.Put(p["digest"], r.Body, maxUpload)
	if errors.Is(err, files.ErrDigest) {
		return api.BadRequest(api.CodeBadRequest, "%s", err)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// expandBindings turns Azure's ${{inputs.x}} and ${{outputs.y}} into the
// environment variables the node sets (literal inputs become their value).
func expandBindings(cmd string, p api.JobProperties) string {
	var b strings.Builder
	for {
		i := strings.Index(cmd, "${{")
		if i < 0 {
			b.WriteString(cmd)
			return b.String()
		}
		j := strings.Index(cmd[i:], "}}")
		if j < 0 {
			b.WriteString(cmd)
			return b.String()
		}
		b.WriteString(cmd[:i])
		ref := strings.TrimSpace(cmd[i+3 : i+j])
		switch {
		case strings.HasPrefix(ref, "inputs."):
			name := strings.TrimPrefix(ref, "inputs.")
			if in, ok := p.Inputs[name]; ok && strings.EqualFold(in.JobInputType, "literal") {
				b.WriteString(in.Value)
			} else {
				b.WriteString("${AZUREML_INPUT_" + name + "}")
			}
		case strings.HasPrefix(ref, "outputs."):
			b.WriteString("${AZUREML_OUTPUT_" + strings.TrimPrefix(ref, "outputs.") + "}")
		default:
			b.WriteString(cmd[i : i+j+2])
		}
		cmd = cmd[i+j+2:]
	}
}

// MasterPort is the port rank 0 of a distributed job listens on. Jobs get
// blocks of 64 ports (TensorFlow tasks use MasterPort+1+rank) so that jobs
// sharing a machine (local provider) do not collide.
func MasterPort(seq int64) int { return 20000 + int(seq%600)*64 }

// preemptGrace is the grace of a node's compute for preempted jobs.
func (s *Server) preemptGrace(ctx context.Context, n store.Node) time.Duration {
	sc, name, err := api.ParseComputeID(n.Compute, api.Scope{})
	if err == nil {
		if d, err := store.Get[api.Compute](ctx, s.db.Q(), store.KindCompute, sc.WorkspaceID(), name); err == nil {
			return d.Value.PreemptionGrace()
		}
	}
	g, _ := api.ParseDuration(api.DefaultPreemptionGrace)
	return g
}

// agentCheckpoint serves the checkpoint an earlier attempt of a job saved.
func (s *Server) agentCheckpoint(w http.ResponseWriter, r *http.Request, p params) error {
	_, j, _, err := s.nodeJob(r, p)
	if err != nil {
		return err
	}
	f, err := s.outputs.Open(j.UID, agentapi.CheckpointOutput)
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
// container was stopped from outside). On a low-priority cluster that is a
// preemption: the job is requeued when the agent reports it stopped. On a
// dedicated one the node is unusable and its job is requeued now. A node
// Cumulus itself is removing (leaving) is not news.
func (s *Server) agentLeaving(w http.ResponseWriter, r *http.Request, _ params) error {
	node, err := s.nodeAuth(r)
	if err != nil {
		return asUnauthorized(err)
	}
	now := s.clock.Now().UTC()
	nodes := []string{node.ID}
	err = s.db.Tx(r.Context(), func(q store.Querier) error {
		n, err := store.GetNode(r.Context(), q, node.ID)
		if err != nil || n.State == api.NodeLeaving || n.JobID == "" {
			return err
		}
		if n.Priority == api.PriorityLowPriority {
			_, err := lifecycle.Evict(r.Context(), q, n.ID, now)
			return err
		}
		if j, err := store.GetJobByUID(r.Context(), q, n.JobID); err == nil {
			nodes = j.Nodes
		}
		return lifecycle.NodeLost(r.Context(), q, n, api.NodeUnusable, "the node was shut down from outside", s.cfg.MaxAttempts, now)
	})
	if err != nil && !errors.Is(err, lifecycle.ErrNotEvictable) {
		return err
	}
	s.log.Info("node leaving", "node", node.ID, "compute", node.Compute)
	for _, id := range nodes {
		s.hub.Wake(id)
	}
	s.changed()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// releaseStale frees a node from a job its agent does not run: a preempted
// node's part counts as preempted, a canceled job's part as stopped.
func (s *Server) releaseStale(ctx context.Context, nodeID, uid string) error {
	released := false
	now := s.clock.Now().UTC()
	err := s.db.Tx(ctx, func(q store.Querier) error {
		n, err := store.GetNode(ctx, q, nodeID)
		if err != nil || n.JobID != uid {
			return err
		}
		released = true
		if !n.Evicted.IsZero() {
			return lifecycle.Preempted(ctx, q, nodeID, s.cfg.MaxPreemptions, now)
		}
		if j, err := store.GetJobByUID(ctx, q, uid); err == nil && slices.Contains(j.Nodes, nodeID) && !api.JobTerminal(j.Doc.Properties.Status) {
			return lifecycle.Exited(ctx, q, j, nodeID, j.Attempt, exitNeverStarted, "the node never started it", now)
		}
		n.JobID = ""
		if n.State == api.NodeRunning {
			n.State, n.IdleSince = api.NodeIdle, now
		}
		return store.PutNode(ctx, q, n)
	})
	if released {
		s.changed()
	}
	return err
}

// exitNeverStarted is the exit code recorded for a part of a job that a
// node never started.
const exitNeverStarted = -1
