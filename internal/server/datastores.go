package server

import (
	"net/http"
	"sort"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Datastores (…/workspaces/{ws}/datastores): the two every workspace has
// (api.BuiltinDatastores, not stored) and those a user adds, each a
// container of the workspace's blob store. listSecrets issues a SAS for
// the container (storage.go); nothing else ever answers a secret.

func (s *Server) datastoreRoutes() {
	r := &s.router
	r.handle("GET", ws+"/datastores", s.listDatastores)
	r.handle("GET", ws+"/datastores/{name}", s.getDatastore)
	r.handle("PUT", ws+"/datastores/{name}", s.putDatastore)
	r.handle("DELETE", ws+"/datastores/{name}", s.deleteDatastore)
	r.handle("POST", ws+"/datastores/{name}/listSecrets", s.listDatastoreSecrets)
}

// storeOf reads the request's workspace and its blob store.
func (s *Server) storeOf(r *http.Request, p params) (storeWorkspace, error) {
	sc := scopeOf(p)
	d, err := s.workspace(r, s.db.Q(), sc)
	if err != nil {
		return storeWorkspace{}, err
	}
	return storageOf(sc, d.Value), nil
}

// datastores lists every datastore of the workspace, by name.
func (s *Server) datastores(r *http.Request, w storeWorkspace) ([]api.Datastore, error) {
	out := api.BuiltinDatastores(w.scope, w.doc.WorkspaceUID())
	docs, err := store.List[api.Datastore](r.Context(), s.db.Q(), store.KindDatastore, w.id(), true, "", 10000)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		out = append(out, d.Value)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out, nil
}

func (s *Server) listDatastores(w http.ResponseWriter, r *http.Request, p params) error {
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	all, err := s.datastores(r, st)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	names := map[string]bool{}
	for _, n := range q["names"] {
		for _, x := range strings.Split(n, ",") {
			names[strings.ToLower(strings.TrimSpace(x))] = true
		}
	}
	page := api.Page[api.Datastore]{Value: []api.Datastore{}}
	for _, d := range all {
		if v := q.Get("isDefault"); v != "" && strings.EqualFold(v, "true") != d.Properties.IsDefault {
			continue
		}
		if len(names) > 0 && !names[strings.ToLower(d.Name)] {
			continue
		}
		page.Value = append(page.Value, d)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getDatastore(w http.ResponseWriter, r *http.Request, p params) error {
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	d, err := s.datastoreContainer(r.Context(), st, p["name"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) putDatastore(w http.ResponseWriter, r *http.Request, p params) error {
	var d api.Datastore
	if err := decode(r, &d); err != nil {
		return err
	}
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	name := p["name"]
	if err := api.PrepareDatastore(&d, name, st.account); err != nil {
		return err
	}
	d.ID, d.Name, d.Type = st.id()+"/datastores/"+name, name, api.TypeDatastore
	now := s.clock.Now().UTC()
	status := http.StatusCreated
	err = s.tx(r, func(q store.Querier) error {
		old, err := store.Get[api.Datastore](r.Context(), q, store.KindDatastore, st.id(), name)
		switch {
		case err == nil:
			status = http.StatusOK
			d.SystemData = api.Touch(old.Value.SystemData, principal(r), now)
		case isNotFound(err):
			d.SystemData = api.Touch(nil, principal(r), now)
		default:
			return err
		}
		_, err = store.Put(r.Context(), q, store.KindDatastore, st.id(), name, d, 0, now)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, status, d)
	return nil
}

// deleteDatastore removes a datastore a user added: the name only, as in
// Azure; the container's blobs stay.
func (s *Server) deleteDatastore(w http.ResponseWriter, r *http.Request, p params) error {
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	if api.IsBuiltinDatastore(p["name"]) {
		return api.BadRequest(api.CodeValidationError, "datastore %s is built into every workspace and cannot be deleted", p["name"])
	}
	err = s.tx(r, func(q store.Querier) error {
		return store.Delete(r.Context(), q, store.KindDatastore, st.id(), p["name"], 0)
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

// listDatastoreSecrets answers a SAS for the datastore's container, with
// the permissions the caller's role gives (the route needs read). It is
// a secret: never logged, never stored, and a GET never answers it.
func (s *Server) listDatastoreSecrets(w http.ResponseWriter, r *http.Request, p params) error {
	st, err := s.storeOf(r, p)
	if err != nil {
		return err
	}
	d, err := s.datastoreContainer(r.Context(), st, p["name"])
	if err != nil {
		return err
	}
	perms, err := s.sasPerms(r.Context(), principal(r), st.id())
	if err != nil {
		return err
	}
	if d.Properties.ContainerName == api.ArtifactContainer {
		perms = strings.Map(func(c rune) rune { // job artifacts are Cumulus's to write
			if c == 'r' || c == 'l' {
				return c
			}
			return -1
		}, perms)
	}
	if perms == "" {
		return forbiddenOn(r, st.id()+"/datastores/"+d.Name, "read")
	}
	writeJSON(w, http.StatusOK, api.DatastoreSecrets{SecretsType: "Sas",
		SASToken: s.containerSAS(st, d.Properties.ContainerName, perms, principal(r), datastoreSASLifetime)})
	return nil
}

// forbiddenOn is the 403 of a principal whose roles do not give action.
func forbiddenOn(r *http.Request, resource, action string) error {
	return &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
		Message: "principal '" + principal(r) + "' does not have authorization over scope '" + resource +
			"' (it needs a role that allows " + action + "; see 'cumulus auth role list')"}
}
