package server

import (
	"encoding/base64"
	"net/http"

	"github.com/cumulus-ml/cumulus/internal/secret"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// JoinToken is the answer of POST …/computes/{name}/joinToken, a Cumulus
// extension: a token with which any machine running `cumulus agent` joins
// the cluster as a node. Each call replaces the previous token.
type JoinToken struct {
	Token   string `json:"token"`
	Command string `json:"command"`
}

func (s *Server) joinToken(w http.ResponseWriter, r *http.Request, p params) error {
	sc := scopeOf(p)
	if _, err := s.workspace(r, s.db.Q(), sc); err != nil {
		return err
	}
	d, err := s.compute(r.Context(), s.db.Q(), sc, p["name"])
	if err != nil {
		return err
	}
	id := d.Value.ID
	tok := prefixComputeJoin + base64.RawURLEncoding.EncodeToString([]byte(id)) + "." + secret.NewToken("")
	if err := store.PutSecret(r.Context(), s.db.W(), "join:"+id, []byte(secret.Hash(tok))); err != nil {
		return err
	}
	s.log.Info("join token issued", "compute", id, "by", principal(r))
	writeJSON(w, http.StatusOK, JoinToken{Token: tok, Command: "cumulus agent --server " + s.baseURL(r) + " --join-token " + tok})
	return nil
}
