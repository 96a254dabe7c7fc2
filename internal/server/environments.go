package server

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// KindEnvironment holds environment versions; parent is the environment's id.
const KindEnvironment = "environment"

func (s *Server) environmentRoutes() {
	r := &s.router
	r.handle("PUT", ws+"/environments/{env}/versions/{version}", s.putEnvironment)
	r.handle("GET", ws+"/environments/{env}/versions/{version}", s.getEnvironment)
	r.handle("GET", ws+"/environments/{env}/versions", s.listEnvironmentVersions)
	r.handle("GET", ws+"/environments", s.listEnvironments)
}

func envParent(sc api.Scope, name string) string { return sc.WorkspaceID() + "/environments/" + name }

func (s *Server) putEnvironment(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	var e api.Environment
	if err := decode(r, &e); err != nil {
		return err
	}
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	if err := api.PrepareEnvironment(&e, p["env"], p["version"]); err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	e.ID = envParent(sc, p["env"]) + "/versions/" + p["version"]
	e.Name, e.Type = p["version"], api.TypeEnvironment
	status := http.StatusCreated
	err := s.tx(r, func(q store.Querier) error {
		old, err := store.Get[api.Environment](r.Context(), q, KindEnvironment, envParent(sc, p["env"]), p["version"])
		if err == nil {
			status = http.StatusOK
			e.SystemData = api.Touch(old.Value.SystemData, principal(r), now)
		} else if isNotFound(err) {
			e.SystemData = api.Touch(nil, principal(r), now)
		} else {
			return err
		}
		_, err = store.Put(r.Context(), q, KindEnvironment, envParent(sc, p["env"]), p["version"], e, 0, now)
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, status, e)
	return nil
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	e, err := s.environment(r.Context(), sc, p["env"], p["version"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) environment(ctx context.Context, sc api.Scope, name, version string) (api.Environment, error) {
	d, err := store.Get[api.Environment](ctx, s.db.Q(), KindEnvironment, envParent(sc, name), version)
	if isNotFound(err) {
		return api.Environment{}, api.NotFound("environment %s version %s was not found in workspace %s", name, version, sc.Workspace)
	}
	return d.Value, err
}

func (s *Server) listEnvironmentVersions(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	return listPage[api.Environment](s, w, r, KindEnvironment, envParent(sc, p["env"]), true, func(e api.Environment) any { return e })
}

// jobImage resolves a job's environmentId to the image it runs in ("" for
// none: the node's own environment), with a 400 that says what is wrong.
// An environment the workspace has wins; a name of Azure's curated
// environments (AzureML-…) that the workspace has not registered runs in
// the node's own environment, and note says so for the job's log.
func (s *Server) jobImage(ctx context.Context, sc api.Scope, envID string) (image, note string, err error) {
	if envID == "" {
		return "", "", nil
	}
	name, version, image, err := api.ParseEnvironmentRef(envID)
	if err != nil {
		return "", "", api.BadRequest(api.CodeValidationError, "environmentId: %s", err)
	}
	if image != "" {
		return image, "", nil
	}
	var e api.Environment
	if version == api.LatestVersion {
		var latest *api.Environment
		if latest, err = s.latestEnvironment(ctx, sc, name); err != nil {
			return "", "", err
		}
		if latest == nil {
			err = api.NotFound("no versions")
		} else {
			e = *latest
		}
	} else {
		e, err = s.environment(ctx, sc, name, version)
	}
	if err != nil {
		if api.IsCuratedEnvironment(name) {
			return "", api.CuratedEnvironmentNote(name, sc.Workspace), nil
		}
		if version == api.LatestVersion {
			return "", "", api.BadRequest(api.CodeValidationError, "environmentId: environment %s has no versions in workspace %s; create one with 'cumulus environment create'", name, sc.Workspace)
		}
		return "", "", api.BadRequest(api.CodeValidationError, "environmentId: environment %s:%s does not exist in workspace %s; create it with 'cumulus environment create'", name, version, sc.Workspace)
	}
	return e.Properties.Image, "", nil
}

// environmentVersions reads every version of every environment of the
// workspace, by environment name.
func (s *Server) environmentVersions(ctx context.Context, sc api.Scope) (map[string][]store.Doc[api.Environment], error) {
	out := map[string][]store.Doc[api.Environment]{}
	prefix := sc.WorkspaceID() + "/environments/"
	after := ""
	for {
		docs, err := store.List[api.Environment](ctx, s.db.Q(), KindEnvironment, prefix, false, after, 500)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			_, rest, _ := strings.Cut(d.Value.ID, "/environments/")
			name, _, _ := strings.Cut(rest, "/")
			out[name] = append(out[name], d)
		}
		if len(docs) < 500 {
			return out, nil
		}
		after = docs[len(docs)-1].Key
	}
}

// newestVersion is the version created last (Azure's @latest).
func newestVersion(docs []store.Doc[api.Environment]) *api.Environment {
	var best *store.Doc[api.Environment]
	for i := range docs {
		if best == nil || !docs[i].Created.Before(best.Created) {
			best = &docs[i]
		}
	}
	if best == nil {
		return nil
	}
	return &best.Value
}

// latestEnvironment is the newest version of an environment, nil if it has none.
func (s *Server) latestEnvironment(ctx context.Context, sc api.Scope, name string) (*api.Environment, error) {
	docs, err := store.List[api.Environment](ctx, s.db.Q(), KindEnvironment, envParent(sc, name), true, "", 10000)
	if err != nil {
		return nil, err
	}
	return newestVersion(docs), nil
}

// listEnvironments lists the workspace's environments (ARM's environment
// containers), each with its latest version, by name.
func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	byName, err := s.environmentVersions(r.Context(), sc)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	page := api.Page[api.EnvironmentContainer]{Value: []api.EnvironmentContainer{}}
	for _, n := range names {
		latest := newestVersion(byName[n])
		page.Value = append(page.Value, api.EnvironmentContainer{ID: envParent(sc, n), Name: n, Type: api.TypeEnvironmentContainer,
			Properties: api.EnvironmentContainerProperties{LatestVersion: latest.Name, LatestImage: latest.Properties.Image, Versions: len(byName[n])}})
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
