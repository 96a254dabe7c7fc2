package server

import (
	"context"
	"net/http"

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
			e.SystemData = touch(old.Value.SystemData, principal(r), now)
		} else if isNotFound(err) {
			e.SystemData = touch(nil, principal(r), now)
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
// none), with a 400 that says what is wrong.
func (s *Server) jobImage(ctx context.Context, sc api.Scope, envID string) (string, error) {
	if envID == "" {
		return "", nil
	}
	name, version, image, err := api.ParseEnvironmentRef(envID)
	if err != nil {
		return "", api.BadRequest(api.CodeValidationError, "environmentId: %s", err)
	}
	if image != "" {
		return image, nil
	}
	if version == api.LatestVersion {
		e, err := s.latestEnvironment(ctx, sc, name)
		if err != nil {
			return "", err
		}
		return e.Properties.Image, nil
	}
	e, err := s.environment(ctx, sc, name, version)
	if err != nil {
		return "", api.BadRequest(api.CodeValidationError, "environmentId: environment %s:%s does not exist in workspace %s; create it with 'cumulus environment create'", name, version, sc.Workspace)
	}
	return e.Properties.Image, nil
}

// latestEnvironment is the most recently created version of an
// environment, as Azure resolves NAME@latest.
func (s *Server) latestEnvironment(ctx context.Context, sc api.Scope, name string) (api.Environment, error) {
	var latest *store.Doc[api.Environment]
	after := ""
	for {
		page, err := store.List[api.Environment](ctx, s.db.Q(), KindEnvironment, envParent(sc, name), true, after, 500)
		if err != nil {
			return api.Environment{}, err
		}
		for i := range page {
			if latest == nil || !page[i].Created.Before(latest.Created) {
				latest = &page[i]
			}
		}
		if len(page) < 500 {
			break
		}
		after = page[len(page)-1].Key
	}
	if latest == nil {
		return api.Environment{}, api.BadRequest(api.CodeValidationError, "environmentId: environment %s has no version in workspace %s; create one with 'cumulus environment create'", name, sc.Workspace)
	}
	return latest.Value, nil
}
