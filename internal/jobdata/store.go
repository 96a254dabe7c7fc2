package jobdata

import (
	"context"
	"fmt"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Store is a Source that reads the store, in q (a transaction's or the
// read pool's).
type Store struct {
	Q         store.Querier
	Scope     api.Scope
	Workspace api.Workspace
}

var _ Source = Store{}

// Account is the workspace's blob store account.
func (s Store) Account() string { return api.StorageAccountName(s.Workspace.WorkspaceUID()) }

// Datastore reads a built-in or added datastore.
func (s Store) Datastore(ctx context.Context, name string) (api.Datastore, error) {
	for _, d := range api.BuiltinDatastores(s.Scope, s.Workspace.WorkspaceUID()) {
		if strings.EqualFold(d.Name, name) {
			return d, nil
		}
	}
	d, err := store.Get[api.Datastore](ctx, s.Q, store.KindDatastore, s.Scope.WorkspaceID(), name)
	return d.Value, err
}

// DataVersion reads a data asset version; api.LatestVersion is the one
// created last.
func (s Store) DataVersion(ctx context.Context, name, version string) (api.DataVersion, error) {
	parent := s.Scope.WorkspaceID() + "/data/" + name
	if version != api.LatestVersion {
		d, err := store.Get[api.DataVersion](ctx, s.Q, store.KindDataVersion, parent, version)
		return d.Value, err
	}
	docs, err := store.List[api.DataVersion](ctx, s.Q, store.KindDataVersion, parent, true, "", 100000)
	if err != nil {
		return api.DataVersion{}, err
	}
	var best *store.Doc[api.DataVersion]
	for i := range docs {
		if best == nil || !docs[i].Created.Before(best.Created) {
			best = &docs[i]
		}
	}
	if best == nil {
		return api.DataVersion{}, fmt.Errorf("data %s: %w", name, store.ErrNotFound)
	}
	return best.Value, nil
}

// CodeVersion reads a code asset version.
func (s Store) CodeVersion(ctx context.Context, name, version string) (api.CodeVersion, error) {
	d, err := store.Get[api.CodeVersion](ctx, s.Q, store.KindCodeVersion, s.Scope.WorkspaceID()+"/codes/"+name, version)
	return d.Value, err
}

// Exists reports whether a container holds a blob at path or under it.
func (s Store) Exists(ctx context.Context, container, path string, folder bool) (bool, error) {
	return store.BlobPathExists(ctx, s.Q, s.Scope.WorkspaceID(), container, path, folder)
}
