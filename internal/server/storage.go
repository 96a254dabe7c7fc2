package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/blobapi"
	"github.com/cumulus-ml/cumulus/internal/jobdata"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Each workspace's blob store answers as one storage account
// (api.StorageAccountName), reached two ways: path-style on the server's
// own address (<base>/cumulus/blob/<account>/<container>/<blob>: the
// URLs startPendingUpload hands out), and as
// https://<account>.blob.core.windows.net, which azure-ai-ml 1.4.0 builds
// itself from a datastore's account name, through the server acting as
// an HTTPS proxy for that name only (blobproxy.go).
//
// Access is by SAS: listSecrets and startPendingUpload issue them,
// signed with the server's key, scoped to one container of one
// workspace's account, short-lived, with the permissions the caller's
// role gives (Contributor and Owner write, Reader reads). A SAS stops
// working when it expires and also as soon as its holder no longer has a
// role that allows what it asks.

// SAS lifetimes: a datastore's (listSecrets), a pending upload's, and the
// read-only URLs of job logs that Run History answers.
const (
	datastoreSASLifetime = time.Hour
	uploadSASLifetime    = time.Hour
	logSASLifetime       = 30 * time.Minute
)

// storeWorkspace is a workspace whose blob store a request reaches.
type storeWorkspace struct {
	scope   api.Scope
	doc     api.Workspace
	account string
}

func (w storeWorkspace) id() string { return w.scope.WorkspaceID() }

// signer signs the blob store's SAS with the server's key.
func (s *Server) signer() blobapi.Signer {
	return func(msg string) string { return s.box.Tag("blob-sas/" + msg) }
}

// storageOf is the blob store of a stored workspace.
func storageOf(sc api.Scope, ws api.Workspace) storeWorkspace {
	return storeWorkspace{scope: sc, doc: ws, account: api.StorageAccountName(ws.WorkspaceUID())}
}

// workspaceByAccount finds the workspace whose blob store is account.
// ok is false when none is.
func (s *Server) workspaceByAccount(ctx context.Context, account string) (storeWorkspace, bool, error) {
	account = strings.ToLower(account)
	if id, hit := s.accounts.Load(account); hit {
		sc, err := api.ParseWorkspaceID(id.(string))
		if err == nil {
			d, err := store.Get[api.Workspace](ctx, s.db.Q(), store.KindWorkspace, sc.GroupID(), sc.Workspace)
			if err == nil && api.StorageAccountName(d.Value.WorkspaceUID()) == account {
				return storageOf(sc, d.Value), true, nil
			}
		}
		s.accounts.Delete(account)
	}
	after := ""
	for {
		docs, err := store.List[api.Workspace](ctx, s.db.Q(), store.KindWorkspace, "/subscriptions/", false, after, 500)
		if err != nil {
			return storeWorkspace{}, false, err
		}
		for _, d := range docs {
			a := api.StorageAccountName(d.Value.WorkspaceUID())
			s.accounts.Store(a, d.Value.ID)
			if a == account {
				sc, err := api.ParseWorkspaceID(d.Value.ID)
				if err != nil {
					return storeWorkspace{}, false, err
				}
				return storageOf(sc, d.Value), true, nil
			}
		}
		if len(docs) < 500 {
			return storeWorkspace{}, false, nil
		}
		after = docs[len(docs)-1].Key
	}
}

// sasPerms are the SAS permissions a principal's roles give in a
// workspace: all for a role that writes, read and list for one that only
// reads; "" for none.
func (s *Server) sasPerms(ctx context.Context, who, workspaceID string) (string, error) {
	as, err := store.RoleAssignments(ctx, s.db.Q(), who)
	if err != nil {
		return "", err
	}
	roles := make([]rbac.Assignment, 0, len(as))
	for _, a := range as {
		roles = append(roles, rbac.Assignment{Role: a.Role, Scope: a.Scope})
	}
	switch {
	case rbac.Allowed(roles, workspaceID+"/datastores", rbac.Write):
		return "racwdl", nil
	case rbac.Allowed(roles, workspaceID+"/datastores", rbac.Read):
		return "rl", nil
	}
	return "", nil
}

// containerSAS signs a SAS for a container of the workspace's blob store.
func (s *Server) containerSAS(w storeWorkspace, container, perms, who string, life time.Duration) string {
	return blobapi.Sign(s.signer(), w.account, container, "", blobapi.SAS{Resource: blobapi.ResourceContainer, Perms: perms,
		Expiry: s.clock.Now().Add(life), Principal: who})
}

// blobSAS signs a read-only SAS for one blob.
func (s *Server) blobSAS(w storeWorkspace, container, blob, who string, life time.Duration) string {
	return blobapi.Sign(s.signer(), w.account, container, blob, blobapi.SAS{Resource: blobapi.ResourceBlob, Perms: "r",
		Expiry: s.clock.Now().Add(life), Principal: who})
}

// blobBaseURL is the path-style base URL of a workspace's account on this
// server: <base>/cumulus/blob/<account>.
func (s *Server) blobBaseURL(r *http.Request, w storeWorkspace) string {
	return s.baseURL(r) + strings.TrimSuffix(api.BlobPathPrefix, "/") + "/" + w.account
}

// datastoreContainer is the container a datastore of the workspace names;
// a 404 names the datastore when it does not exist.
func (s *Server) datastoreContainer(ctx context.Context, w storeWorkspace, name string) (api.Datastore, error) {
	for _, d := range api.BuiltinDatastores(w.scope, w.doc.WorkspaceUID()) {
		if strings.EqualFold(d.Name, name) {
			return d, nil
		}
	}
	d, err := store.Get[api.Datastore](ctx, s.db.Q(), store.KindDatastore, w.id(), name)
	if isNotFound(err) {
		return api.Datastore{}, api.NotFound("datastore %s was not found in workspace %s", name, w.scope.Workspace)
	}
	return d.Value, err
}

// dataSource reads what job data resolution needs of a workspace.
func (s *Server) dataSource(st storeWorkspace) jobdata.Store {
	return jobdata.Store{Q: s.db.Q(), Scope: st.scope, Workspace: st.doc}
}

// resolvePath reads a data URI of the workspace and checks that something
// is there (jobdata.ResolvePath).
func (s *Server) resolvePath(ctx context.Context, st storeWorkspace, uri string, file bool) (api.BlobPath, error) {
	return jobdata.ResolvePath(ctx, s.dataSource(st), st.scope, uri, file)
}
