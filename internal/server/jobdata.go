package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/jobdata"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// A job's data in the workspace's blob store: where its code, inputs and
// outputs are is resolved once, when it is submitted (jobdata.Resolve);
// its nodes list its code and inputs and download them file by file, and
// each output a node uploads is filed under the output's datastore path
// (and the default output under the job's artifacts), so that what a
// job wrote is addressable as azureml://datastores/<ds>/paths/<p>.

// resolveJobData records where a submitted job's code, inputs and outputs
// are: the one call the submit path makes.
func (s *Server) resolveJobData(ctx context.Context, sc api.Scope, ws api.Workspace, name string, p *api.JobProperties) error {
	return jobdata.Resolve(ctx, jobdata.Store{Q: s.db.Q(), Scope: sc, Workspace: ws}, sc, name, p)
}

// jobStore is the blob store of a job's workspace.
func (s *Server) jobStore(ctx context.Context, j store.Job) (storeWorkspace, error) {
	sc, err := api.ParseWorkspaceID(strings.TrimSuffix(j.Doc.ID, "/jobs/"+j.Doc.Name))
	if err != nil {
		return storeWorkspace{}, err
	}
	d, err := store.Get[api.Workspace](ctx, s.db.Q(), store.KindWorkspace, sc.GroupID(), sc.Workspace)
	if err != nil {
		return storeWorkspace{}, err
	}
	return storageOf(sc, d.Value), nil
}

// jobPaths are the blob paths a job's nodes read: its code's and its
// inputs'.
func jobPaths(p api.JobProperties) []api.BlobPath {
	var out []api.BlobPath
	if p.CodeBlobPath != nil {
		out = append(out, *p.CodeBlobPath)
	}
	for _, in := range p.Inputs {
		if in.BlobPath != nil {
			out = append(out, *in.BlobPath)
		}
	}
	return out
}

// nodeMayReadFile reports whether a blob file is under one of the paths
// the job reads.
func (s *Server) nodeMayReadFile(ctx context.Context, j store.Job, digest string) (bool, error) {
	paths := jobPaths(j.Doc.Properties)
	if len(paths) == 0 {
		return false, nil
	}
	st, err := s.jobStore(ctx, j)
	if err != nil {
		return false, err
	}
	for _, b := range paths {
		container, err := jobdata.Container(ctx, s.dataSource(st), b)
		if err != nil {
			continue
		}
		ok, err := store.BlobDigestUnder(ctx, s.db.Q(), st.id(), container, b.Path, digest, !b.File)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// listFiles lists what a blob path holds, relative to it; a File path's
// one file is listed under its base name.
func (s *Server) listFiles(ctx context.Context, st storeWorkspace, b api.BlobPath) (agentapi.FileList, error) {
	out := agentapi.FileList{Files: []agentapi.ListedFile{}}
	container, err := jobdata.Container(ctx, s.dataSource(st), b)
	if err != nil {
		return out, err
	}
	if b.File {
		e, err := store.GetBlobPath(ctx, s.db.Q(), st.id(), container, b.Path)
		if isNotFound(err) {
			return out, api.NotFound("the input file %s is gone from the blob store", b.Path)
		}
		if err != nil {
			return out, err
		}
		out.Files = append(out.Files, agentapi.ListedFile{Path: path.Base(b.Path), Digest: e.Digest, Size: e.Size})
		return out, nil
	}
	prefix := store.FolderPrefix(b.Path)
	after := ""
	for {
		es, err := store.ListBlobPaths(ctx, s.db.Q(), st.id(), container, prefix, after, 1000)
		if err != nil {
			return out, err
		}
		for _, e := range es {
			out.Files = append(out.Files, agentapi.ListedFile{Path: strings.TrimPrefix(e.Path, prefix), Digest: e.Digest, Size: e.Size})
		}
		if len(es) < 1000 {
			return out, nil
		}
		after = es[len(es)-1].Path
	}
}

// agentCodeFiles lists the files of the job's code (CodeFiles).
func (s *Server) agentCodeFiles(w http.ResponseWriter, r *http.Request, p params) error {
	_, j, _, err := s.nodeJob(r, p)
	if err != nil {
		return err
	}
	b := j.Doc.Properties.CodeBlobPath
	if b == nil {
		return api.NotFound("job %s has no code in the blob store", j.Doc.Name)
	}
	return s.writeFileList(w, r, j, *b)
}

// agentInputFiles lists the files of one of the job's inputs (DataInputs).
func (s *Server) agentInputFiles(w http.ResponseWriter, r *http.Request, p params) error {
	_, j, _, err := s.nodeJob(r, p)
	if err != nil {
		return err
	}
	in, ok := j.Doc.Properties.Inputs[p["name"]]
	if !ok || in.BlobPath == nil {
		return api.NotFound("job %s has no input %q in the blob store", j.Doc.Name, p["name"])
	}
	return s.writeFileList(w, r, j, *in.BlobPath)
}

func (s *Server) writeFileList(w http.ResponseWriter, r *http.Request, j store.Job, b api.BlobPath) error {
	st, err := s.jobStore(r.Context(), j)
	if err != nil {
		return err
	}
	list, err := s.listFiles(r.Context(), st, b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// outputPath is where an output of a job is filed: a declared output's
// blob path, or for the default output (the outputs folder) the job's
// artifacts; ok is false for what is filed nowhere (a checkpoint).
func outputPath(j store.Job, name string) (api.BlobPath, bool) {
	if name == agentapi.CheckpointOutput {
		return api.BlobPath{}, false
	}
	if name == agentapi.DefaultOutput {
		return api.BlobPath{Datastore: api.ArtifactDatastore, Path: api.ArtifactPath(j.Doc.Name) + "outputs/"}, true
	}
	o, ok := j.Doc.Properties.Outputs[name]
	if !ok || o.BlobPath == nil {
		return api.BlobPath{}, false
	}
	return *o.BlobPath, true
}

// fileOutput files an output of a job under its blob path: the files of
// its latest attempt, every rank's merged (files.Outputs.Open; empty are
// the parts its nodes left empty), replace what the path held.
func (s *Server) fileOutput(ctx context.Context, j store.Job, name string, empty ...files.Part) error {
	b, ok := outputPath(j, name)
	if !ok {
		return nil
	}
	st, err := s.jobStore(ctx, j)
	if err != nil {
		return err
	}
	container, err := jobdata.Container(ctx, s.dataSource(st), b)
	if err != nil {
		return err
	}
	s.blobMu.RLock()
	defer s.blobMu.RUnlock()
	ps := s.outputs.Latest(j.UID, name, empty...)
	if len(ps) == 0 {
		return nil // nothing uploaded
	}
	now := s.clock.Now().UTC()
	var entries []store.BlobEntry
	if files.AllEmpty(ps) {
		// Nothing to file (most jobs): only what the path held goes, and
		// a path that holds nothing takes no write.
		held, err := store.BlobPathExists(ctx, s.db.Q(), st.id(), container, b.Path, true)
		if err != nil || !held {
			return err
		}
	} else if entries, err = s.outputEntries(j, ps, st, container, b, now); err != nil {
		return fmt.Errorf("file output %s of job %s: %w", name, j.Doc.Name, err)
	}
	return s.db.Tx(context.WithoutCancel(ctx), func(q store.Querier) error {
		if _, err := store.DeleteBlobFolder(ctx, q, st.id(), container, b.Path); err != nil {
			return err
		}
		for _, e := range entries {
			if err := store.PutBlobOwner(ctx, q, store.BlobOwner{Digest: e.Digest, Workspace: st.id(), Size: e.Size, Uploaded: now, Principal: "job:" + j.Doc.Name}); err != nil {
				return err
			}
			if err := store.PutBlobPath(ctx, q, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// outputEntries stores the files of parts of a job's output (merged) as
// blobs and returns their entries under blob path b, made at now (not
// yet written).
func (s *Server) outputEntries(j store.Job, ps []files.Part, st storeWorkspace, container string, b api.BlobPath, now time.Time) ([]store.BlobEntry, error) {
	f, err := s.outputs.OpenParts(j.UID, ps)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prefix := store.FolderPrefix(b.Path)
	var entries []store.BlobEntry
	err = files.WalkFiles(f, func(rel string, size int64, content io.Reader) error {
		wr, err := s.blobs.PutStream(content, maxUpload)
		if err != nil {
			return err
		}
		entries = append(entries, store.BlobEntry{Workspace: st.id(), Container: container, Path: prefix + rel, Digest: wr.Digest, Size: wr.Size,
			MD5: base64.StdEncoding.EncodeToString(wr.MD5), ContentType: "application/octet-stream", Metadata: map[string]string{}, Created: now, Modified: now, ETag: newETag()})
		return nil
	})
	return entries, err
}

// outputStripe picks the lock that files one output of one job.
func outputStripe(uid, name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid + "/" + name))
	return int(h.Sum32() % 64)
}
