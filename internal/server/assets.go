package server

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Data assets (…/data/{name}/versions/{version}) and code assets
// (…/codes/{name}/versions/{version}): versions of a named thing whose
// content is a path in the workspace's blob store. A version's path
// cannot change once created (as in Azure); its description and tags can.
// The containers (…/data/{name}, …/codes/{name}) are derived from the
// versions: an asset exists while it has a version.

func (s *Server) assetRoutes() {
	r := &s.router
	r.handle("GET", ws+"/data", s.listDataAssets)
	r.handle("GET", ws+"/data/{name}", s.getDataAsset)
	r.handle("GET", ws+"/data/{name}/versions", s.listDataVersions)
	r.handle("GET", ws+"/data/{name}/versions/{version}", s.getDataVersion)
	r.handle("PUT", ws+"/data/{name}/versions/{version}", s.putDataVersion)
	r.handle("DELETE", ws+"/data/{name}/versions/{version}", s.deleteDataVersion)
	r.handle("GET", ws+"/codes", s.listCodeAssets)
	r.handle("GET", ws+"/codes/{name}", s.getCodeAsset)
	r.handle("GET", ws+"/codes/{name}/versions", s.listCodeVersions)
	r.handle("GET", ws+"/codes/{name}/versions/{version}", s.getCodeVersion)
	r.handle("PUT", ws+"/codes/{name}/versions/{version}", s.putCodeVersion)
	r.handle("POST", ws+"/codes/{name}/versions/{version}/startPendingUpload", s.startPendingUpload)
}

// assetKind is what tells data from code assets apart.
type assetKind struct {
	kind, segment, what    string
	versionType, assetType string
}

var (
	dataAssets = assetKind{store.KindDataVersion, "data", "data asset", api.TypeDataVersion, api.TypeDataContainer}
	codeAssets = assetKind{store.KindCodeVersion, "codes", "code asset", api.TypeCodeVersion, api.TypeCodeContainer}
)

func (k assetKind) parent(sc api.Scope, name string) string {
	return sc.WorkspaceID() + "/" + k.segment + "/" + name
}

// assetVersions reads every version of one asset, oldest first.
func assetVersions[T any](ctx context.Context, q store.Querier, k assetKind, sc api.Scope, name string) ([]store.Doc[T], error) {
	docs, err := store.List[T](ctx, q, k.kind, k.parent(sc, name), true, "", 100000)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].Created.Before(docs[j].Created) })
	return docs, nil
}

// assetsByName reads every version of every asset of the workspace.
func assetsByName[T any](ctx context.Context, q store.Querier, k assetKind, sc api.Scope) (map[string][]store.Doc[T], error) {
	out := map[string][]store.Doc[T]{}
	prefix := sc.WorkspaceID() + "/" + k.segment + "/"
	after := ""
	for {
		docs, err := store.List[T](ctx, q, k.kind, prefix, false, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			parent := d.Key[:strings.LastIndex(d.Key, "/")]
			name := parent[strings.LastIndex(parent, "/")+1:]
			out[name] = append(out[name], d)
		}
		if len(docs) < 1000 {
			break
		}
		after = docs[len(docs)-1].Key
	}
	for n := range out {
		sort.SliceStable(out[n], func(i, j int) bool { return out[n][i].Created.Before(out[n][j].Created) })
	}
	return out, nil
}

// containerOf is an asset's container: its latest version (the one made
// last) and the next numeric version.
func containerOf[T any](k assetKind, sc api.Scope, name string, docs []store.Doc[T], latest func(T) (version, dataType, desc string)) api.AssetContainer {
	versions := make([]string, 0, len(docs))
	var lv, dt, desc string
	for _, d := range docs {
		v, t, ds := latest(d.Value)
		versions = append(versions, v)
		lv, dt, desc = v, t, ds
	}
	return api.AssetContainer{ID: k.parent(sc, name), Name: name, Type: k.assetType,
		Properties: api.AssetContainerProperties{DataType: dt, Description: desc, LatestVersion: lv, NextVersion: api.NextVersion(versions), Versions: len(docs)}}
}

func dataLatest(d api.DataVersion) (string, string, string) {
	return d.Name, d.Properties.DataType, d.Properties.Description
}
func codeLatest(c api.CodeVersion) (string, string, string) {
	return c.Name, "", c.Properties.Description
}

// listAssets answers an asset kind's containers, by name.
func listAssets[T any](s *Server, w http.ResponseWriter, r *http.Request, p params, k assetKind, latest func(T) (string, string, string)) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	byName, err := assetsByName[T](r.Context(), s.db.Q(), k, sc)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	page := api.Page[api.AssetContainer]{Value: []api.AssetContainer{}}
	for _, n := range names {
		page.Value = append(page.Value, containerOf(k, sc, n, byName[n], latest))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// getAsset answers one asset's container.
func getAsset[T any](s *Server, w http.ResponseWriter, r *http.Request, p params, k assetKind, latest func(T) (string, string, string)) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	docs, err := assetVersions[T](r.Context(), s.db.Q(), k, sc, p["name"])
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return api.NotFound("%s %s was not found in workspace %s", k.what, p["name"], sc.Workspace)
	}
	writeJSON(w, http.StatusOK, containerOf(k, sc, p["name"], docs, latest))
	return nil
}

// listVersions answers an asset's versions: newest first with
// $orderBy=createdtime desc (how azure-ai-ml finds @latest), oldest first
// otherwise; $top bounds the page. keep filters them.
func listVersions[T any](s *Server, w http.ResponseWriter, r *http.Request, p params, k assetKind, keep func(T) bool) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	docs, err := assetVersions[T](r.Context(), s.db.Q(), k, sc, p["name"])
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if ob := strings.ToLower(strings.TrimSpace(q.Get("$orderBy"))); ob != "" {
		switch strings.Join(strings.Fields(ob), " ") {
		case "createdtime desc", "createdat desc":
			for i, j := 0, len(docs)-1; i < j; i, j = i+1, j-1 {
				docs[i], docs[j] = docs[j], docs[i]
			}
		case "createdtime asc", "createdtime", "createdat asc", "createdat":
		default:
			return api.BadRequest(api.CodeBadRequest, "$orderBy %q is not supported (createdtime desc or createdtime asc)", q.Get("$orderBy"))
		}
	}
	top := len(docs)
	if t := q.Get("$top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 {
			return api.BadRequest(api.CodeBadRequest, "$top must be a positive integer")
		}
		top = n
	}
	page := api.Page[T]{Value: []T{}}
	for _, d := range docs {
		if len(page.Value) == top {
			break
		}
		if keep == nil || keep(d.Value) {
			page.Value = append(page.Value, d.Value)
		}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) listDataAssets(w http.ResponseWriter, r *http.Request, p params) error {
	return listAssets(s, w, r, p, dataAssets, dataLatest)
}

func (s *Server) getDataAsset(w http.ResponseWriter, r *http.Request, p params) error {
	return getAsset(s, w, r, p, dataAssets, dataLatest)
}

func (s *Server) listDataVersions(w http.ResponseWriter, r *http.Request, p params) error {
	// azure-ai-ml 1.4.0 looks up the input azureml:NAME@latest as the
	// versions of "azureml:NAME": the prefix is not part of the name (a
	// name holds no ':').
	p["name"] = strings.TrimPrefix(p["name"], "azureml:")
	return listVersions[api.DataVersion](s, w, r, p, dataAssets, nil)
}

func (s *Server) listCodeAssets(w http.ResponseWriter, r *http.Request, p params) error {
	return listAssets(s, w, r, p, codeAssets, codeLatest)
}

func (s *Server) getCodeAsset(w http.ResponseWriter, r *http.Request, p params) error {
	return getAsset(s, w, r, p, codeAssets, codeLatest)
}

// listCodeVersions also answers ?hash=<sha256>&hashVersion=…: the
// versions whose upload had that content hash (how the SDKs reuse an
// upload).
func (s *Server) listCodeVersions(w http.ResponseWriter, r *http.Request, p params) error {
	hash, hv := r.URL.Query().Get("hash"), r.URL.Query().Get("hashVersion")
	var keep func(api.CodeVersion) bool
	if hash != "" {
		keep = func(c api.CodeVersion) bool {
			return strings.EqualFold(c.Properties.Properties["hash_sha256"], hash) &&
				(hv == "" || c.Properties.Properties["hash_version"] == hv)
		}
	}
	return listVersions(s, w, r, p, codeAssets, keep)
}

// getVersion answers one asset version.
func getVersion[T any](s *Server, w http.ResponseWriter, r *http.Request, p params, k assetKind) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	d, err := store.Get[T](r.Context(), s.db.Q(), k.kind, k.parent(sc, p["name"]), p["version"])
	if isNotFound(err) {
		return api.NotFound("%s %s version %s was not found in workspace %s", k.what, p["name"], p["version"], sc.Workspace)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d.Value)
	return nil
}

func (s *Server) getDataVersion(w http.ResponseWriter, r *http.Request, p params) error {
	return getVersion[api.DataVersion](s, w, r, p, dataAssets)
}

func (s *Server) getCodeVersion(w http.ResponseWriter, r *http.Request, p params) error {
	return getVersion[api.CodeVersion](s, w, r, p, codeAssets)
}

// putVersion stores an asset version. path reads its blob-store path;
// update copies what may change onto the stored version.
func putVersion[T any](s *Server, w http.ResponseWriter, r *http.Request, p params, k assetKind, v *T, path func(T) string,
	sysData func(*T) **api.SystemData, update func(old *T, new T)) error {
	sc := scopeOf(p)
	name, version := p["name"], p["version"]
	now := s.clock.Now().UTC()
	status := http.StatusCreated
	out := *v
	err := s.tx(r, func(q store.Querier) error {
		old, err := store.Get[T](r.Context(), q, k.kind, k.parent(sc, name), version)
		switch {
		case err == nil:
			if path(old.Value) != path(*v) {
				return api.Conflict(api.CodeConflict, "%s %s version %s exists with another path (%s); a version's path cannot change: create a new version", k.what, name, version, path(old.Value))
			}
			status = http.StatusOK
			out = old.Value
			update(&out, *v)
			*sysData(&out) = api.Touch(*sysData(&old.Value), principal(r), now)
		case isNotFound(err):
			*sysData(&out) = api.Touch(nil, principal(r), now)
		default:
			return err
		}
		_, err = store.Put(r.Context(), q, k.kind, k.parent(sc, name), version, out, 0, now)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, status, out)
	return nil
}

// checkAssetPath refuses an asset whose path holds nothing yet: it must be
// uploaded first (a folder with at least one blob, or the blob).
func (s *Server) checkAssetPath(ctx context.Context, st storeWorkspace, what, uri string, file bool) (api.BlobPath, error) {
	b, err := s.resolvePath(ctx, st, uri, file)
	if err != nil {
		return b, api.BadRequest(api.CodeValidationError, "%s: %s", what, err)
	}
	return b, nil
}

func (s *Server) putDataVersion(w http.ResponseWriter, r *http.Request, p params) error {
	var d api.DataVersion
	if err := decode(r, &d); err != nil {
		return err
	}
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	if err := api.PrepareDataVersion(&d, p["name"], p["version"], st.account); err != nil {
		return err
	}
	if _, err := s.checkAssetPath(r.Context(), st, "dataUri", d.Properties.DataURI, d.Properties.DataType == api.DataURIFile); err != nil {
		return err
	}
	d.ID, d.Name, d.Type = dataAssets.parent(st.scope, p["name"])+"/versions/"+p["version"], p["version"], api.TypeDataVersion
	return putVersion(s, w, r, p, dataAssets, &d, func(x api.DataVersion) string { return x.Properties.DataURI },
		func(x *api.DataVersion) **api.SystemData { return &x.SystemData },
		func(old *api.DataVersion, n api.DataVersion) {
			old.Properties.Description, old.Properties.Tags, old.Properties.IsArchived = n.Properties.Description, n.Properties.Tags, n.Properties.IsArchived
		})
}

func (s *Server) putCodeVersion(w http.ResponseWriter, r *http.Request, p params) error {
	var c api.CodeVersion
	if err := decode(r, &c); err != nil {
		return err
	}
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	if err := api.PrepareCodeVersion(&c, p["name"], p["version"], st.account); err != nil {
		return err
	}
	if _, err := s.checkAssetPath(r.Context(), st, "codeUri", c.Properties.CodeURI, false); err != nil {
		return err
	}
	c.ID, c.Name, c.Type = codeAssets.parent(st.scope, p["name"])+"/versions/"+p["version"], p["version"], api.TypeCodeVersion
	return putVersion(s, w, r, p, codeAssets, &c, func(x api.CodeVersion) string { return x.Properties.CodeURI },
		func(x *api.CodeVersion) **api.SystemData { return &x.SystemData },
		func(old *api.CodeVersion, n api.CodeVersion) {
			old.Properties.Description, old.Properties.Tags, old.Properties.IsArchived = n.Properties.Description, n.Properties.Tags, n.Properties.IsArchived
		})
}

func (s *Server) deleteDataVersion(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	err := s.tx(r, func(q store.Querier) error {
		return store.Delete(r.Context(), q, dataAssets.kind, dataAssets.parent(sc, p["name"]), p["version"], 0)
	})
	if isNotFound(err) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// startPendingUpload answers a container of its own, with a SAS that
// writes it for an hour, where the caller uploads the code version's
// files before it PUTs the version with codeUri in that container.
func (s *Server) startPendingUpload(w http.ResponseWriter, r *http.Request, p params) error {
	var req api.PendingUploadRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	if err := api.CheckAssetName("code name", p["name"]); err != nil {
		return api.BadRequest(api.CodeInvalidName, "%s", err)
	}
	if t := req.PendingUploadType; t != "" && t != api.PendingUploadTemporary && t != "None" {
		return api.BadRequest(api.CodeValidationError, "pendingUploadType %q is not supported (%s)", t, api.PendingUploadTemporary)
	}
	perms, err := s.sasPerms(r.Context(), principal(r), st.id())
	if err != nil {
		return err
	}
	if !strings.ContainsRune(perms, 'w') {
		return forbiddenOn(r, st.id()+"/codes/"+p["name"], "write")
	}
	id := req.PendingUploadID
	if id == "" || api.CheckContainerName("upload-"+strings.ToLower(id)) != nil {
		id = newUploadID()
	}
	container := "upload-" + strings.ToLower(id)
	blobURI := s.blobBaseURL(r, st) + "/" + container
	writeJSON(w, http.StatusOK, api.PendingUploadResponse{
		BlobReferenceForConsumption: api.BlobReferenceForConsumption{BlobURI: blobURI, StorageAccountArmID: api.StorageAccountID(st.scope, st.account),
			Credential: api.PendingUploadCredential{CredentialType: "SAS", SASURI: blobURI + "?" + s.containerSAS(st, container, "racwdl", principal(r), uploadSASLifetime)}},
		PendingUploadID: id, PendingUploadType: api.PendingUploadTemporary})
	return nil
}
