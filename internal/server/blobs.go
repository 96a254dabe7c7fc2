package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Blobs (code snapshots, input folders) are content-addressed and stored
// once, and belong to the workspaces they were uploaded to:
//
//	PUT /cumulus/v1/blobs/{sha256}?workspace=<workspace id>  write in the workspace (Contributor, Owner)
//	GET /cumulus/v1/blobs/{sha256}?workspace=<workspace id>  read in the workspace, if it owns the blob
//	GET /cumulus/v1/blobs/{sha256}  with a node token        only a blob the node's current job references
//
// An upload proves its sender holds the bytes (the content is verified
// even when the blob is already stored), is audited as
// …/workspaces/blobs/write under <workspace id>/blobs/<sha256>, and is at
// most Config.MaxBlobSize. A blob no job of its workspace references is
// collected Config.BlobGrace after its last upload (CollectBlobs).

// uncommittedBlockLife is how long a block uploaded with Put Block waits
// for the block list that commits it.
const uncommittedBlockLife = 7 * 24 * time.Hour

// Blob defaults (Config.MaxBlobSize, Config.BlobGrace).
const (
	DefaultMaxBlobSize int64 = 1 << 30
	DefaultBlobGrace         = 24 * time.Hour
)

// Operation names of blobs in the audit log and refusals.
const (
	blobWriteOperation = api.Provider + "/workspaces/blobs/write"
	blobReadOperation  = api.Provider + "/workspaces/blobs/read"
	blobGCOperation    = api.Provider + "/workspaces/blobs/delete"
)

// blobScheme is how a job input names a blob.
const blobScheme = "cumulus://blobs/"

// CodeRequestTooLarge answers an upload over its limit (413).
const CodeRequestTooLarge = "RequestEntityTooLarge"

// blobWorkspace reads the workspace a user's blob request names in its
// workspace query parameter (a workspace's ARM id).
func blobWorkspace(r *http.Request) (api.Scope, error) {
	id := r.URL.Query().Get("workspace")
	p := strings.Split(strings.Trim(id, "/"), "/")
	if id == "" || len(p) != 8 || !strings.EqualFold(p[0], "subscriptions") || !strings.EqualFold(p[2], "resourceGroups") ||
		!strings.EqualFold(p[4], "providers") || !strings.EqualFold(p[5], api.Provider) || !strings.EqualFold(p[6], "workspaces") {
		return api.Scope{}, &api.Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Target: "workspace",
			Message: "a blob belongs to a workspace: add ?workspace=/subscriptions/S/resourceGroups/G/providers/" + api.Provider + "/workspaces/W"}
	}
	sc := api.Scope{Subscription: p[1], ResourceGroup: p[3], Workspace: p[7]}
	if err := checkScope(params{"sub": sc.Subscription, "rg": sc.ResourceGroup, "ws": sc.Workspace}); err != nil {
		return api.Scope{}, err
	}
	return sc, nil
}

func blobNotFound(digest string) error {
	return api.NotFound("blob %s is not stored in this workspace", digest)
}

func blobTooLarge(limit int64) error {
	return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: CodeRequestTooLarge,
		Message: fmt.Sprintf("the blob is larger than this server's limit of %d bytes (cumulus serve --max-blob-size)", limit)}
}

// blobQuotaExceeded refuses an upload that would take a workspace's blobs
// past Limits.WorkspaceBlobs.
func (s *Server) blobQuotaExceeded(sc api.Scope, used int64) error {
	return &api.Error{Status: http.StatusConflict, Code: api.CodeQuotaExceeded,
		Message: fmt.Sprintf("workspace %s owns %d bytes of blobs; this upload would take it past its limit of %d bytes (cumulus serve --max-workspace-blobs); blobs no job references are removed after the grace period",
			sc.Workspace, used, s.cfg.Limits.WorkspaceBlobs)}
}

func (s *Server) putBlob(w http.ResponseWriter, r *http.Request, p params) error {
	return s.audited(w, r, func(rec *statusRecorder) error {
		if err := s.authenticateRequest(r); err != nil {
			return err
		}
		digest := p["digest"]
		sc, err := blobWorkspace(r)
		if err != nil {
			return err
		}
		resource := sc.WorkspaceID() + "/blobs/" + digest
		auditAs(r, resource, blobWriteOperation)
		if err := s.allowOperation(r, resource, rbac.Write, blobWriteOperation); err != nil {
			return err
		}
		if !files.ValidDigest(digest) {
			return api.BadRequest(api.CodeBadRequest, "blob name %q is not a lower-case hex sha256", digest)
		}
		if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
			return err
		}
		limit := s.cfg.MaxBlobSize
		if r.ContentLength > limit {
			return blobTooLarge(limit)
		}
		used, err := store.WorkspaceBlobBytes(r.Context(), s.db.Q(), sc.WorkspaceID(), digest)
		if err != nil {
			return err
		}
		room := s.cfg.Limits.WorkspaceBlobs - used
		if r.ContentLength > room || room <= 0 {
			return s.blobQuotaExceeded(sc, used)
		}
		// Held from the first byte written until the ownership is
		// recorded, so that the collector never sees the file unowned.
		s.blobMu.RLock()
		defer s.blobMu.RUnlock()
		size, err := s.blobs.Put(digest, r.Body, min(limit, room))
		switch {
		case errors.Is(err, files.ErrTooLarge) && room < limit:
			return s.blobQuotaExceeded(sc, used)
		case errors.Is(err, files.ErrTooLarge):
			return blobTooLarge(limit)
		case errors.Is(err, files.ErrDigest):
			return api.BadRequest(api.CodeBadRequest, "%s", err)
		case err != nil:
			return fmt.Errorf("put blob: %w", err)
		}
		err = s.tx(r, func(q store.Querier) error {
			return store.PutBlobOwner(r.Context(), q, store.BlobOwner{Digest: digest, Workspace: sc.WorkspaceID(), Size: size,
				Uploaded: s.clock.Now().UTC(), Principal: principal(r)})
		})
		if err != nil {
			return err
		}
		rec.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func (s *Server) getBlobFile(w http.ResponseWriter, r *http.Request, p params) error {
	digest := p["digest"]
	if dispatch.IsNodeToken(bearer(r)) {
		node, err := s.nodeAuth(r)
		if err != nil {
			return asUnauthorized(err)
		}
		if err := s.nodeMayRead(r.Context(), node, digest); err != nil {
			return err
		}
	} else {
		if err := s.authenticateRequest(r); err != nil {
			return err
		}
		sc, err := blobWorkspace(r)
		if err != nil {
			return err
		}
		if err := s.allowOperation(r, sc.WorkspaceID()+"/blobs/"+digest, rbac.Read, blobReadOperation); err != nil {
			return err
		}
		if _, err := store.GetBlobOwner(r.Context(), s.db.Q(), digest, sc.WorkspaceID()); isNotFound(err) {
			return blobNotFound(digest)
		} else if err != nil {
			return err
		}
	}
	f, err := s.blobs.Open(digest)
	if errors.Is(err, files.ErrNotFound) {
		return blobNotFound(digest)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	_, err = io.Copy(w, f)
	return err
}

// nodeMayRead lets a node read a blob only while it runs a job that
// references it, and only if the job's workspace owns it. Every refusal
// is the same 404, so that a node learns nothing of other blobs.
func (s *Server) nodeMayRead(ctx context.Context, node store.Node, digest string) error {
	if node.JobID == "" {
		return blobNotFound(digest)
	}
	j, err := store.GetJobByUID(ctx, s.db.Q(), node.JobID)
	if isNotFound(err) {
		return blobNotFound(digest)
	}
	if err != nil {
		return err
	}
	runs := false
	for _, n := range j.Nodes {
		runs = runs || n == node.ID
	}
	referenced := false
	for _, d := range jobBlobs(j.Doc.Properties) {
		referenced = referenced || d == digest
	}
	if !runs || api.JobTerminal(j.Doc.Properties.Status) {
		return blobNotFound(digest)
	}
	if !referenced {
		// a file of the job's code or inputs in the blob store
		ok, err := s.nodeMayReadFile(ctx, j, digest)
		if err != nil {
			return err
		}
		if !ok {
			return blobNotFound(digest)
		}
		return nil
	}
	if _, err := store.GetBlobOwner(ctx, s.db.Q(), digest, j.Parent); isNotFound(err) {
		return blobNotFound(digest)
	} else if err != nil {
		return err
	}
	return nil
}

// jobBlobs are the digests of the blobs a job references: its code
// snapshot (the last segment of its code id) and its cumulus://blobs/
// inputs.
func jobBlobs(p api.JobProperties) []string {
	var out []string
	if p.CodeID != "" && p.CodeBlobPath == nil {
		out = append(out, p.CodeID[strings.LastIndex(p.CodeID, "/")+1:])
	}
	for _, in := range p.Inputs {
		if d, ok := strings.CutPrefix(in.URI, blobScheme); ok {
			out = append(out, d)
		}
	}
	return out
}

// checkJobBlobs refuses a job whose code snapshot or blob inputs are not
// blobs of its workspace: a job cannot reach another workspace's blobs by
// naming their digests.
func (s *Server) checkJobBlobs(ctx context.Context, sc api.Scope, p api.JobProperties) error {
	if p.CodeID != "" && p.CodeBlobPath == nil {
		d := p.CodeID[strings.LastIndex(p.CodeID, "/")+1:]
		if !files.ValidDigest(d) || !s.ownsBlob(ctx, sc, d) {
			return api.BadRequest(api.CodeValidationError, "codeId %q does not name a code snapshot uploaded to workspace %s (…/codes/NAME/versions/<sha256>); the CLI uploads 'code:' folders itself", p.CodeID, sc.Workspace)
		}
	}
	for name, in := range p.Inputs {
		d, ok := strings.CutPrefix(in.URI, blobScheme)
		if !ok || !files.ValidDigest(d) {
			continue // not a blob, or refused by the job's validation
		}
		if !s.ownsBlob(ctx, sc, d) {
			return api.BadRequest(api.CodeValidationError, "inputs.%s: %s was not uploaded to workspace %s; the CLI uploads local folders itself", name, in.URI, sc.Workspace)
		}
	}
	return nil
}

// ownsBlob reports whether the workspace owns a blob that is stored.
func (s *Server) ownsBlob(ctx context.Context, sc api.Scope, digest string) bool {
	_, err := store.GetBlobOwner(ctx, s.db.Q(), digest, sc.WorkspaceID())
	return err == nil && s.blobs.Has(digest)
}

// CollectBlobs removes what uploads left that no job needs: a workspace's
// ownership of a blob last uploaded more than Config.BlobGrace ago that no
// job, blob path or uncommitted block of the workspace references (each
// removal audited), then every stored blob that no workspace owns. It returns how many blob files it
// removed. Time is the server's clock.
func (s *Server) CollectBlobs(ctx context.Context) (int, error) {
	now := s.clock.Now().UTC()
	cutoff := now.Add(-s.cfg.BlobGrace)
	// Blocks never committed are dropped after a week, as Azure drops
	// them; their blobs then go as any other unnamed blob.
	if _, err := store.DeleteBlocksBefore(ctx, s.db.W(), now.Add(-uncommittedBlockLife)); err != nil {
		return 0, fmt.Errorf("collect blobs: %w", err)
	}
	for {
		var n int
		err := s.db.Tx(ctx, func(q store.Querier) error {
			stale, err := store.UnreferencedBlobOwners(ctx, q, cutoff, 500)
			if err != nil {
				return err
			}
			n = len(stale)
			for _, o := range stale {
				gone, err := store.DeleteBlobOwner(ctx, q, o.Digest, o.Workspace, cutoff)
				if err != nil {
					return err
				}
				if !gone {
					continue
				}
				_, err = store.AppendAudit(ctx, q, store.AuditEntry{Time: now, Principal: "cumulus", Operation: blobGCOperation,
					Resource: o.Workspace + "/blobs/" + o.Digest, Status: http.StatusOK})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("collect blobs: %w", err)
		}
		if n < 500 {
			break
		}
	}
	// Files: only while no upload is between writing a file and recording
	// its owner; when one is, the files wait for the next pass.
	if !s.blobMu.TryLock() {
		return 0, nil
	}
	defer s.blobMu.Unlock()
	stored, err := s.blobs.List()
	if err != nil {
		return 0, fmt.Errorf("collect blobs: %w", err)
	}
	removed := 0
	for _, digest := range stored {
		owned, err := store.BlobOwned(ctx, s.db.Q(), digest)
		if err != nil {
			return removed, fmt.Errorf("collect blobs: %w", err)
		}
		if owned {
			continue
		}
		if err := s.blobs.Remove(digest); err != nil {
			return removed, fmt.Errorf("collect blobs: %w", err)
		}
		removed++
		s.log.Info("blob collected", "digest", digest)
	}
	return removed, nil
}

// RunBlobGC collects blobs until ctx ends: now, then every quarter of the
// grace period (between a minute and an hour).
func (s *Server) RunBlobGC(ctx context.Context) {
	every := max(min(time.Hour, s.cfg.BlobGrace/4), time.Minute)
	for {
		if n, err := s.CollectBlobs(ctx); err != nil {
			s.log.Error("blob collection", "err", err)
		} else if n > 0 {
			s.log.Info("blobs collected", "files", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(every):
		}
	}
}
