package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/blobapi"
	"github.com/cumulus-ml/cumulus/internal/files"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// The Azure Blob REST subset the SDKs call (storage.go says how it is
// reached and authorized): Get Blob Properties, Get Blob (with ranges),
// Put Blob, Put Block, Put Block List, Set Blob Metadata, Delete Blob,
// List Blobs, Get Container Properties and Create Container (containers
// exist as soon as they are named). Content goes to the server's
// content-addressed blob files; names and properties to the store's
// blob_paths. Errors are Azure's: an XML body and x-ms-error-code.

// blobError is an Azure storage error.
type blobError struct {
	status  int
	code    string
	message string
}

func (e *blobError) Error() string { return e.code + ": " + e.message }

func blobErr(status int, code, format string, args ...any) *blobError {
	return &blobError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

var (
	errBlobNotFound = blobErr(http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
	errBlobExists   = blobErr(http.StatusConflict, "BlobAlreadyExists", "The specified blob already exists.")
	errCondition    = blobErr(http.StatusPreconditionFailed, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.")
)

// blobRequest is one request on a workspace's blob store.
type blobRequest struct {
	w         http.ResponseWriter
	r         *http.Request
	account   string
	container string
	blob      string
	store     storeWorkspace
	sas       blobapi.SAS
	requestID string
}

// serveBlobPath serves the path-style URLs: /cumulus/blob/<account>/<container>[/<blob>].
func (s *Server) serveBlobPath(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, api.BlobPathPrefix)
	account, rest, _ := strings.Cut(rest, "/")
	container, blob, _ := strings.Cut(rest, "/")
	s.serveBlob(w, r, account, container, blob)
}

// serveBlob serves one request on container (and blob) of account.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, account, container, blob string) {
	br := &blobRequest{w: w, r: r, account: strings.ToLower(account), container: container, blob: blob, requestID: newRequestID()}
	h := w.Header()
	h.Set("x-ms-request-id", br.requestID)
	h.Set("x-ms-version", blobapi.Version)
	h.Set("Date", s.clock.Now().UTC().Format(http.TimeFormat))
	if err := s.blobOp(br); err != nil {
		s.writeBlobError(br, err)
	}
}

func (s *Server) writeBlobError(br *blobRequest, err error) {
	var be *blobError
	switch {
	case errors.As(err, &be):
	case errors.Is(err, blobapi.ErrNoAuth):
		be = blobErr(http.StatusUnauthorized, "NoAuthenticationInformation", "%s", strings.TrimPrefix(err.Error(), blobapi.ErrNoAuth.Error()+": "))
	case errors.Is(err, blobapi.ErrAuthFailed):
		be = blobErr(http.StatusForbidden, "AuthenticationFailed", "%s", strings.TrimPrefix(err.Error(), blobapi.ErrAuthFailed.Error()+": "))
	case errors.Is(err, blobapi.ErrPermission):
		be = blobErr(http.StatusForbidden, "AuthorizationPermissionMismatch", "%s", strings.TrimPrefix(err.Error(), blobapi.ErrPermission.Error()+": "))
	case errors.Is(err, files.ErrTooLarge):
		be = blobErr(http.StatusRequestEntityTooLarge, "RequestBodyTooLarge", "The request body is too large and exceeds the maximum permissible limit (%d bytes; cumulus serve --max-blob-size).", s.cfg.MaxBlobSize)
	case isBodyTimeout(err):
		be = blobErr(http.StatusRequestTimeout, "OperationTimedOut", "The request body did not arrive in time.")
	default:
		s.log.Error("blob request failed", "method", br.r.Method, "account", br.account, "container", br.container, "err", err)
		be = blobErr(http.StatusInternalServerError, "InternalError", "The server encountered an internal error. Please retry the request.")
	}
	h := br.w.Header()
	h.Set("x-ms-error-code", be.code)
	if be.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="cumulus"`)
	}
	if br.r.Method == http.MethodHead {
		br.w.WriteHeader(be.status)
		return
	}
	h.Set("Content-Type", "application/xml")
	br.w.WriteHeader(be.status)
	_, _ = br.w.Write(blobapi.ErrorBody(be.code, be.message, br.requestID, s.clock.Now()))
}

// blobOp authorizes a request and runs its operation.
func (s *Server) blobOp(br *blobRequest) error {
	r := br.r
	q := r.URL.Query()
	if br.container == "" || api.CheckContainerName(br.container) != nil {
		return blobErr(http.StatusBadRequest, "InvalidResourceName", "The specifed resource name contains invalid characters.")
	}
	if br.blob != "" {
		if err := api.CheckBlobName(br.blob); err != nil {
			return blobErr(http.StatusBadRequest, "InvalidResourceName", "%s", err)
		}
	}
	comp, restype := q.Get("comp"), q.Get("restype")
	var perm byte
	var op func(*blobRequest) error
	write := false
	switch {
	case br.blob == "" && restype != "container":
		return blobErr(http.StatusBadRequest, "InvalidQueryParameterValue", "Value for one of the query parameters specified in the request URI is invalid: restype must be container.")
	case br.blob == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && comp == "list":
		perm, op = blobapi.PermList, s.listBlobs
	case br.blob == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && comp == "":
		perm, op = blobapi.PermRead, s.containerProperties
	case br.blob == "" && r.Method == http.MethodPut && comp == "":
		perm, op, write = blobapi.PermCreate, s.createContainer, true
	case br.blob == "":
		return blobErr(http.StatusBadRequest, "UnsupportedHttpVerb", "The resource doesn't support the specified HTTP verb or query (%s comp=%s).", r.Method, comp)
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (comp == "" || comp == "metadata"):
		perm, op = blobapi.PermRead, s.getBlob
	case r.Method == http.MethodPut && comp == "":
		perm, op, write = blobapi.PermWrite, s.putBlobContent, true
	case r.Method == http.MethodPut && comp == "block":
		perm, op, write = blobapi.PermWrite, s.putBlock, true
	case r.Method == http.MethodPut && comp == "blocklist":
		perm, op, write = blobapi.PermWrite, s.putBlockList, true
	case r.Method == http.MethodPut && comp == "metadata":
		perm, op, write = blobapi.PermWrite, s.setMetadata, true
	case r.Method == http.MethodDelete && comp == "":
		perm, op, write = blobapi.PermDelete, s.deleteBlobPath, true
	default:
		return blobErr(http.StatusBadRequest, "UnsupportedHttpVerb", "The resource doesn't support the specified HTTP verb or query (%s comp=%s); Cumulus's blob store serves block blobs.", r.Method, comp)
	}
	sas, err := blobapi.Verify(s.signer(), br.account, br.container, br.blob, q, s.clock.Now(), perm)
	if err != nil && errors.Is(err, blobapi.ErrAuthFailed) && q.Get("sr") == blobapi.ResourceContainer && br.blob != "" {
		// a container SAS on one of its blobs: signed without the blob
		sas, err = blobapi.Verify(s.signer(), br.account, br.container, "", q, s.clock.Now(), perm)
	}
	if err != nil {
		return err
	}
	br.sas = sas
	st, ok, err := s.workspaceByAccount(r.Context(), br.account)
	if err != nil {
		return err
	}
	if !ok {
		return blobErr(http.StatusNotFound, "ResourceNotFound", "The specified resource does not exist.")
	}
	br.store = st
	// The holder's roles now, not when the SAS was issued: a principal
	// whose role was taken away loses its SAS with it.
	perms, err := s.sasPerms(r.Context(), sas.Principal, st.id())
	if err != nil {
		return err
	}
	if !strings.ContainsRune(perms, rune(perm)) && !(perm == blobapi.PermCreate && strings.ContainsRune(perms, 'w')) {
		return fmt.Errorf("%w: This request is not authorized to perform this operation using this permission (principal %s has no role in workspace %s that allows it)", blobapi.ErrPermission, sas.Principal, st.scope.Workspace)
	}
	if write && br.container == api.ArtifactContainer {
		return fmt.Errorf("%w: This request is not authorized to perform this operation: container %s holds job artifacts, which Cumulus writes itself", blobapi.ErrPermission, api.ArtifactContainer)
	}
	*r = *r.WithContext(context.WithValue(r.Context(), principalKey{}, sas.Principal))
	if !write {
		return op(br)
	}
	auditAs(r, st.id()+"/blobs/"+br.container+"/"+br.blob, blobWriteOperation)
	return s.audited(br.w, r, func(rec *statusRecorder) error {
		br.w = rec
		return op(br)
	})
}

// etag is a fresh entity tag, as Azure writes them.
func newETag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return `"0x` + strings.ToUpper(hex.EncodeToString(b[:])) + `"`
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newUploadID names a pending upload's container.
func newUploadID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkConditions applies If-Match and If-None-Match to a blob that may
// not exist (old == nil).
func checkConditions(r *http.Request, old *store.BlobEntry) error {
	if inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm != "" {
		if inm == "*" && old != nil {
			return errBlobExists
		}
		if old != nil && inm == old.ETag {
			return errCondition
		}
	}
	if im := strings.TrimSpace(r.Header.Get("If-Match")); im != "" {
		if old == nil {
			return errBlobNotFound
		}
		if im != "*" && im != old.ETag {
			return errCondition
		}
	}
	return nil
}

// checkMD5 compares a Content-MD5 header with what arrived.
func checkMD5(h string, got []byte) error {
	if h == "" {
		return nil
	}
	want, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		return blobErr(http.StatusBadRequest, "InvalidMd5", "The MD5 value specified in the request is invalid. The MD5 value must be 128 bits and Base64-encoded.")
	}
	if !bytes.Equal(want, got) {
		return blobErr(http.StatusBadRequest, "Md5Mismatch", "The MD5 value specified in the request did not match with the MD5 value calculated by the server.")
	}
	return nil
}

// storeContent writes the request body as a blob file and returns it; the
// caller holds s.blobMu for reading until the ownership is recorded.
func (s *Server) storeContent(r *http.Request) (files.Written, error) {
	if r.ContentLength > s.cfg.MaxBlobSize {
		return files.Written{}, fmt.Errorf("blob: %w", files.ErrTooLarge)
	}
	wr, err := s.blobs.PutStream(r.Body, s.cfg.MaxBlobSize)
	if err != nil {
		return wr, err
	}
	return wr, checkMD5(r.Header.Get("Content-MD5"), wr.MD5)
}

// commitBlob names content as the request's blob, within the conditions
// the request sets, and answers 201.
func (s *Server) commitBlob(br *blobRequest, wr files.Written, meta map[string]string, contentType string) error {
	r := br.r
	now := s.clock.Now().UTC()
	e := store.BlobEntry{Workspace: br.store.id(), Container: br.container, Path: br.blob, Digest: wr.Digest, Size: wr.Size,
		MD5: base64.StdEncoding.EncodeToString(wr.MD5), ContentType: contentType, Metadata: meta, Created: now, Modified: now, ETag: newETag()}
	if e.ContentType == "" {
		e.ContentType = "application/octet-stream"
	}
	err := s.tx(r, func(q store.Querier) error {
		old, err := store.GetBlobPath(r.Context(), q, br.store.id(), br.container, br.blob)
		var prev *store.BlobEntry
		switch {
		case err == nil:
			prev = &old
			e.Created = old.Created
		case !isNotFound(err):
			return err
		}
		if err := checkConditions(r, prev); err != nil {
			return err
		}
		if err := store.PutBlobOwner(r.Context(), q, store.BlobOwner{Digest: wr.Digest, Workspace: br.store.id(), Size: wr.Size, Uploaded: now, Principal: principal(r)}); err != nil {
			return err
		}
		if err := store.PutBlobPath(r.Context(), q, e); err != nil {
			return err
		}
		return store.DeleteBlocks(r.Context(), q, br.store.id(), br.container, br.blob)
	})
	if err != nil {
		return err
	}
	h := br.w.Header()
	h.Set("ETag", e.ETag)
	h.Set("Last-Modified", e.Modified.Format(http.TimeFormat))
	h.Set("Content-MD5", e.MD5)
	h.Set("x-ms-request-server-encrypted", "true")
	br.w.WriteHeader(http.StatusCreated)
	return nil
}

// putBlobContent is Put Blob: the body is the whole blob.
func (s *Server) putBlobContent(br *blobRequest) error {
	r := br.r
	if t := r.Header.Get("x-ms-blob-type"); !strings.EqualFold(t, "BlockBlob") {
		return blobErr(http.StatusBadRequest, "InvalidHeaderValue", "The value for one of the HTTP headers is not in the correct format: x-ms-blob-type %q (Cumulus's blob store keeps block blobs).", t)
	}
	if r.Header.Get("x-ms-copy-source") != "" {
		return blobErr(http.StatusBadRequest, "UnsupportedHeader", "One of the HTTP headers specified in the request is not supported: x-ms-copy-source.")
	}
	s.blobMu.RLock()
	defer s.blobMu.RUnlock()
	wr, err := s.storeContent(r)
	if err != nil {
		return err
	}
	return s.commitBlob(br, wr, blobapi.Metadata(r.Header), r.Header.Get("x-ms-blob-content-type"))
}

// putBlock is Put Block: one uncommitted block.
func (s *Server) putBlock(br *blobRequest) error {
	r := br.r
	id := r.URL.Query().Get("blockid")
	raw, err := base64.StdEncoding.DecodeString(id)
	if id == "" || err != nil || len(raw) > 64 {
		return blobErr(http.StatusBadRequest, "InvalidQueryParameterValue", "Value for one of the query parameters specified in the request URI is invalid: blockid must be base64, at most 64 bytes decoded.")
	}
	s.blobMu.RLock()
	defer s.blobMu.RUnlock()
	wr, err := s.storeContent(r)
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	err = s.tx(r, func(q store.Querier) error {
		if err := store.PutBlobOwner(r.Context(), q, store.BlobOwner{Digest: wr.Digest, Workspace: br.store.id(), Size: wr.Size, Uploaded: now, Principal: principal(r)}); err != nil {
			return err
		}
		return store.PutBlock(r.Context(), q, br.store.id(), br.container, br.blob, store.Block{ID: id, Digest: wr.Digest, Size: wr.Size}, now)
	})
	if err != nil {
		return err
	}
	br.w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(wr.MD5))
	br.w.Header().Set("x-ms-request-server-encrypted", "true")
	br.w.WriteHeader(http.StatusCreated)
	return nil
}

// putBlockList is Put Block List: the blob becomes its blocks in order.
func (s *Server) putBlockList(br *blobRequest) error {
	r := br.r
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return err
	}
	refs, err := blobapi.ParseBlockList(body)
	if err != nil {
		return blobErr(http.StatusBadRequest, "InvalidXmlDocument", "XML specified is not syntactically valid: %s", err)
	}
	blocks, err := store.Blocks(r.Context(), s.db.Q(), br.store.id(), br.container, br.blob)
	if err != nil {
		return err
	}
	digests := make([]string, 0, len(refs))
	var size int64
	for _, ref := range refs {
		b, ok := blocks[ref.ID]
		if !ok || ref.From == "Committed" {
			return blobErr(http.StatusBadRequest, "InvalidBlockList", "The specified block list is invalid: block %q is not an uncommitted block of this blob.", ref.ID)
		}
		digests = append(digests, b.Digest)
		size += b.Size
	}
	if size > s.cfg.MaxBlobSize {
		return fmt.Errorf("block list: %w", files.ErrTooLarge)
	}
	s.blobMu.RLock()
	defer s.blobMu.RUnlock()
	wr, err := s.blobs.Concat(digests, s.cfg.MaxBlobSize)
	if err != nil {
		return err
	}
	return s.commitBlob(br, wr, blobapi.Metadata(r.Header), r.Header.Get("x-ms-blob-content-type"))
}

// setMetadata is Set Blob Metadata.
func (s *Server) setMetadata(br *blobRequest) error {
	r := br.r
	etag, now := newETag(), s.clock.Now().UTC()
	err := s.tx(r, func(q store.Querier) error {
		old, err := store.GetBlobPath(r.Context(), q, br.store.id(), br.container, br.blob)
		if isNotFound(err) {
			return errBlobNotFound
		}
		if err != nil {
			return err
		}
		if err := checkConditions(r, &old); err != nil {
			return err
		}
		return store.SetBlobMetadata(r.Context(), q, br.store.id(), br.container, br.blob, blobapi.Metadata(r.Header), now, etag)
	})
	if err != nil {
		return err
	}
	br.w.Header().Set("ETag", etag)
	br.w.Header().Set("Last-Modified", now.Format(http.TimeFormat))
	br.w.Header().Set("x-ms-request-server-encrypted", "true")
	br.w.WriteHeader(http.StatusOK)
	return nil
}

// deleteBlobPath is Delete Blob: the name goes; the content goes with the
// next collection if nothing else names it.
func (s *Server) deleteBlobPath(br *blobRequest) error {
	r := br.r
	err := s.tx(r, func(q store.Querier) error {
		old, err := store.GetBlobPath(r.Context(), q, br.store.id(), br.container, br.blob)
		if isNotFound(err) {
			return errBlobNotFound
		}
		if err != nil {
			return err
		}
		if err := checkConditions(r, &old); err != nil {
			return err
		}
		return store.DeleteBlobPath(r.Context(), q, br.store.id(), br.container, br.blob)
	})
	if err != nil {
		return err
	}
	br.w.WriteHeader(http.StatusAccepted)
	return nil
}

// createContainer is Create Container: containers exist once named, so
// this only answers as Azure does for a new one.
func (s *Server) createContainer(br *blobRequest) error {
	now := s.clock.Now().UTC()
	br.w.Header().Set("ETag", newETag())
	br.w.Header().Set("Last-Modified", now.Format(http.TimeFormat))
	br.w.WriteHeader(http.StatusCreated)
	return nil
}

// containerProperties is Get Container Properties.
func (s *Server) containerProperties(br *blobRequest) error {
	h := br.w.Header()
	h.Set("ETag", `"0x0"`)
	created := time.Unix(0, 0)
	if t := br.store.doc.Properties.CreationTime; t != nil {
		created = *t
	}
	h.Set("Last-Modified", created.UTC().Format(http.TimeFormat))
	h.Set("x-ms-lease-status", "unlocked")
	h.Set("x-ms-lease-state", "available")
	h.Set("x-ms-has-immutability-policy", "false")
	h.Set("x-ms-has-legal-hold", "false")
	br.w.WriteHeader(http.StatusOK)
	return nil
}

// blobContent is a blob to answer: its properties and how to read it.
type blobContent struct {
	blobapi.Blob
	open func() (io.ReadSeekCloser, error)
}

// lookupBlob finds a blob of the request's container: a stored one, or in
// the artifact container a job's log.
func (s *Server) lookupBlob(ctx context.Context, st storeWorkspace, container, name string) (blobContent, error) {
	e, err := store.GetBlobPath(ctx, s.db.Q(), st.id(), container, name)
	if err == nil {
		return blobContent{Blob: entryBlob(e), open: func() (io.ReadSeekCloser, error) { return s.blobs.Open(e.Digest) }}, nil
	}
	if !isNotFound(err) {
		return blobContent{}, err
	}
	if container == api.ArtifactContainer {
		if c, ok, err := s.logBlob(ctx, st, name); err != nil || ok {
			return c, err
		}
	}
	return blobContent{}, errBlobNotFound
}

func entryBlob(e store.BlobEntry) blobapi.Blob {
	return blobapi.Blob{Name: e.Path, Size: e.Size, ContentType: e.ContentType, MD5: e.MD5, ETag: e.ETag,
		Created: e.Created, Modified: e.Modified, Metadata: e.Metadata}
}

// getBlob is Get Blob and Get Blob Properties (HEAD), and Get Blob
// Metadata (comp=metadata).
func (s *Server) getBlob(br *blobRequest) error {
	r := br.r
	c, err := s.lookupBlob(r.Context(), br.store, br.container, br.blob)
	if err != nil {
		return err
	}
	h := br.w.Header()
	h.Set("ETag", c.ETag)
	h.Set("Last-Modified", c.Modified.UTC().Format(http.TimeFormat))
	for k, v := range c.Metadata {
		// As Azure writes it, lower case: azure-storage-blob reads the
		// metadata headers by a case-sensitive "x-ms-meta-" prefix.
		h["x-ms-meta-"+k] = []string{v}
	}
	if r.URL.Query().Get("comp") == "metadata" {
		br.w.WriteHeader(http.StatusOK)
		return nil
	}
	h.Set("x-ms-creation-time", c.Created.UTC().Format(http.TimeFormat))
	h.Set("x-ms-blob-type", "BlockBlob")
	h.Set("x-ms-lease-status", "unlocked")
	h.Set("x-ms-lease-state", "available")
	h.Set("x-ms-server-encrypted", "true")
	h.Set("x-ms-access-tier", "Hot")
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", c.ContentType)
	rangeHeader := r.Header.Get("x-ms-range")
	if rangeHeader == "" {
		rangeHeader = r.Header.Get("Range")
	}
	rg, ranged, err := blobapi.ParseRange(rangeHeader, c.Size)
	if blobapi.IsUnsatisfiable(err) {
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(c.Size, 10))
		return blobErr(http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The range specified is invalid for the current size of the resource.")
	}
	if err != nil {
		return blobErr(http.StatusBadRequest, "InvalidHeaderValue", "%s", err)
	}
	if !ranged {
		rg = blobapi.Range{Start: 0, End: c.Size - 1}
	}
	length := rg.End - rg.Start + 1
	if c.MD5 != "" {
		if ranged {
			h.Set("x-ms-blob-content-md5", c.MD5)
		} else {
			h.Set("Content-MD5", c.MD5)
		}
	}
	h.Set("Content-Length", strconv.FormatInt(max(length, 0), 10))
	status := http.StatusOK
	if ranged {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", rg.Start, rg.End, c.Size))
	}
	if r.Method == http.MethodHead || length <= 0 {
		br.w.WriteHeader(status)
		return nil
	}
	f, err := c.open()
	if errors.Is(err, files.ErrNotFound) {
		return errBlobNotFound
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(rg.Start, io.SeekStart); err != nil {
		return err
	}
	br.w.WriteHeader(status)
	if _, err := io.CopyN(br.w, f, length); err != nil {
		s.log.Warn("blob download interrupted", "container", br.container, "err", err)
	}
	return nil
}

// listBlobs is List Blobs, with prefix, delimiter, marker, maxresults and
// include=metadata.
func (s *Server) listBlobs(br *blobRequest) error {
	r := br.r
	q := r.URL.Query()
	prefix, delim, marker := q.Get("prefix"), q.Get("delimiter"), q.Get("marker")
	maxResults := 5000
	if m := q.Get("maxresults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 {
			return blobErr(http.StatusBadRequest, "OutOfRangeQueryParameterValue", "One of the query parameters specified in the request URI is outside the permissible range: maxresults.")
		}
		maxResults = min(n, 5000)
	}
	res := blobapi.ListResult{ServiceEndpoint: s.baseURL(r) + "/", Container: br.container, Prefix: prefix, Marker: marker,
		MaxResults: maxResults, Delimiter: delim, WithMetadata: strings.Contains(q.Get("include"), "metadata")}
	it := &blobIter{s: s, ctx: r.Context(), st: br.store, container: br.container, prefix: prefix, after: marker, seen: marker}
	if br.container == api.ArtifactContainer {
		logs, err := s.logBlobs(r.Context(), br.store, prefix)
		if err != nil {
			return err
		}
		it.extra = logs
	}
	lastPrefix := ""
	if delim != "" && strings.HasSuffix(marker, delim) {
		lastPrefix = marker // the page before ended on this folder
	}
	count := 0
	for {
		b, ok, err := it.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		name := b.Name
		if lastPrefix != "" && strings.HasPrefix(name, lastPrefix) {
			continue
		}
		if count == maxResults {
			res.NextMarker = prevName(res)
			break
		}
		if delim != "" {
			if i := strings.Index(name[len(prefix):], delim); i >= 0 {
				p := name[:len(prefix)+i+len(delim)]
				res.Prefixes = append(res.Prefixes, p)
				lastPrefix = p
				count++
				continue
			}
		}
		res.Blobs = append(res.Blobs, b)
		count++
	}
	body := blobapi.MarshalList(res)
	br.w.Header().Set("Content-Type", "application/xml")
	br.w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = br.w.Write(body)
	}
	return nil
}

// prevName is the last name a listing page holds (blob or folder).
func prevName(res blobapi.ListResult) string {
	last := ""
	if n := len(res.Blobs); n > 0 {
		last = res.Blobs[n-1].Name
	}
	if n := len(res.Prefixes); n > 0 && res.Prefixes[n-1] > last {
		last = res.Prefixes[n-1]
	}
	return last
}

// blobIter walks a container's blobs under a prefix in name order, the
// stored ones merged with extra (sorted) ones.
type blobIter struct {
	s         *Server
	ctx       context.Context
	st        storeWorkspace
	container string
	prefix    string
	after     string
	batch     []store.BlobEntry
	done      bool
	extra     []blobContent
	seen      string // the last name given (at first the marker)
}

func (it *blobIter) next() (blobapi.Blob, bool, error) {
	if len(it.batch) == 0 && !it.done {
		b, err := store.ListBlobPaths(it.ctx, it.s.db.Q(), it.st.id(), it.container, it.prefix, it.after, 1000)
		if err != nil {
			return blobapi.Blob{}, false, err
		}
		it.batch, it.done = b, len(b) < 1000
		if len(b) > 0 {
			it.after = b[len(b)-1].Path
		}
	}
	for len(it.extra) > 0 && it.extra[0].Name <= it.afterMarker() {
		it.extra = it.extra[1:]
	}
	switch {
	case len(it.batch) > 0 && (len(it.extra) == 0 || it.batch[0].Path <= it.extra[0].Name):
		e := it.batch[0]
		it.batch = it.batch[1:]
		it.markerSeen(e.Path)
		return entryBlob(e), true, nil
	case len(it.extra) > 0:
		e := it.extra[0]
		it.extra = it.extra[1:]
		it.markerSeen(e.Name)
		return e.Blob, true, nil
	}
	return blobapi.Blob{}, false, nil
}

// afterMarker and markerSeen keep the extra entries after the marker the
// listing started from.
func (it *blobIter) afterMarker() string { return it.seen }
func (it *blobIter) markerSeen(name string) {
	if name > it.seen {
		it.seen = name
	}
}
