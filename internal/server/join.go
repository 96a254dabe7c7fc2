package server

import (
	"encoding/base64"
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

func (s *Server) joinToken(w http.ResponseWriter, r *http.Request, p params) error {
	d, err := s.computeOf(r, p)
	if err != nil {
		return err
	}
	id := d.Value.ID
	tok := prefixComputeJoin + base64.RawURLEncoding.EncodeToString([]byte(id)) + "." + secret.NewToken("")
	if err := store.PutSecret(r.Context(), s.db.W(), "join:"+id, []byte(secret.Hash(tok))); err != nil {
		return err
	}
	s.log.Info("join token issued", "compute", id, "by", principal(r))
	writeJSON(w, http.StatusOK, api.JoinToken{Token: tok, Command: "cumulus agent --server " + s.baseURL(r) + " --join-token " + tok})
	return nil
}
