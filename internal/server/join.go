package server

import (
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/dispatch"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (s *Server) joinToken(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	id := d.Value.ID
	var tok string
	err = s.tx(r, func(q store.Querier) error {
		var err error
		tok, err = dispatch.IssueComputeJoinToken(r.Context(), q, id)
		return err
	})
	if err != nil {
		return err
	}
	s.log.Info("join token issued", "compute", id, "by", principal(r))
	writeJSON(w, http.StatusOK, api.JoinToken{Token: tok, Command: "cumulus agent --server " + s.baseURL(r) + " --join-token " + tok})
	return nil
}
