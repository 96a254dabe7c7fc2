package server

import (
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
)

func (s *Server) joinToken(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	id := d.Value.ID
	tok, err := dispatch.IssueComputeJoinToken(r.Context(), s.db.W(), id)
	if err != nil {
		return err
	}
	s.log.Info("join token issued", "compute", id, "by", principal(r))
	writeJSON(w, http.StatusOK, api.JoinToken{Token: tok, Command: "cumulus agent --server " + s.baseURL(r) + " --join-token " + tok})
	return nil
}
