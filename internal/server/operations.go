package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/rbac"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// operationStatus reads an operation for a caller who may read what it
// acts on (its workspace, compute or job); to anyone else it is not found,
// as if it did not exist, whoever knows its id.
func (s *Server) operationStatus(r *http.Request, id string) (api.OperationStatus, error) {
	notFound := api.NotFound("operation %s was not found (finished operations are kept for 24 hours)", id)
	op, err := store.GetOperation(r.Context(), s.db.Q(), id)
	if isNotFound(err) {
		return api.OperationStatus{}, notFound
	}
	if err != nil {
		return api.OperationStatus{}, err
	}
	scope, err := s.operationScope(r, op)
	if err != nil {
		return api.OperationStatus{}, err
	}
	if err := s.allow(r, scope, rbac.Read); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
			return api.OperationStatus{}, notFound
		}
		return api.OperationStatus{}, err
	}
	st := api.OperationStatus{ID: r.URL.Path, Name: op.ID, Status: op.Status, StartTime: &op.Started}
	if !op.Ended.IsZero() {
		st.EndTime = &op.Ended
	}
	if op.Error != "" {
		var e api.Error
		if json.Unmarshal([]byte(op.Error), &e) == nil {
			st.Error = &e
		}
	}
	return st, nil
}

// operationScope is the resource an operation acts on: a workspace's or a
// compute's id, or a job's ("/" when the job is gone: only a reader of
// everything may see the operation then).
func (s *Server) operationScope(r *http.Request, op store.Operation) (string, error) {
	uid, ok := strings.CutPrefix(op.Target, "job:")
	if !ok {
		return op.Target, nil
	}
	j, err := store.GetJobByUID(r.Context(), s.db.Q(), uid)
	if isNotFound(err) {
		return "/", nil
	}
	if err != nil {
		return "", err
	}
	return j.Parent + "/jobs/" + j.Doc.Name, nil
}

func (s *Server) getOperation(w http.ResponseWriter, r *http.Request, p params) error {
	st, err := s.operationStatus(r, p["id"])
	if err != nil {
		return err
	}
	if st.Status == api.OpInProgress {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// getOperationResult answers the Location URL: 202 while running, 204
// when done, the operation's error when it failed.
func (s *Server) getOperationResult(w http.ResponseWriter, r *http.Request, p params) error {
	st, err := s.operationStatus(r, p["id"])
	if err != nil {
		return err
	}
	switch st.Status {
	case api.OpInProgress:
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Location", s.baseURL(r)+r.URL.RequestURI())
		w.WriteHeader(http.StatusAccepted)
	case api.OpSucceeded:
		w.WriteHeader(http.StatusNoContent)
	default:
		if st.Error != nil {
			e := *st.Error
			if e.Status == 0 {
				e.Status = http.StatusConflict
			}
			return &e
		}
		return api.Conflict(api.CodeConflict, "the operation ended %s", st.Status)
	}
	return nil
}
