package cluster

import (
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// jwksKeyfunc fetches the server's OIDC discovery document and JWKS, as a
// relying party would, and resolves a token's kid.
func jwksKeyfunc(t *testing.T, base string) (jwt.Keyfunc, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	get := func(url string, v any) {
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	get(base+"/.well-known/openid-configuration", &disc)
	var set struct {
		Keys []struct{ Kid, N, E string } `json:"keys"`
	}
	get(disc.JWKSURI, &set)
	return func(tok *jwt.Token) (any, error) {
		for _, k := range set.Keys {
			if k.Kid == tok.Header["kid"] {
				n, _ := base64.RawURLEncoding.DecodeString(k.N)
				e, _ := base64.RawURLEncoding.DecodeString(k.E)
				return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
			}
		}
		return nil, jwt.ErrTokenUnverifiable
	}, disc.Issuer
}

// A job on a cluster with a system-assigned identity gets a token with the
// Azure SDK's ManagedIdentityCredential, and anyone can verify it with the
// server's JWKS; a request for another cluster's identity is refused.
func TestJobGetsManagedIdentityToken(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mitoken")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mitoken")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mitoken: %v\n%s", err, out)
	}
	s := startServer(t)
	zero, one := int32(0), int32(1)
	mk := func(name string, id *api.Identity) api.Compute {
		c := api.Compute{Name: name, Identity: id}
		c.Properties.ComputeType = api.ComputeTypeAml
		c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &one, NodeIdleTimeBeforeScaleDown: "PT30S"}
		out, resp, err := s.c.PutCompute(bctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.c.Wait(bctx, resp, nil); err != nil {
			t.Fatal(err)
		}
		return out
	}
	withID := mk("with-identity", &api.Identity{Type: api.IdentitySystem})
	// A user-assigned identity must exist before a compute can use it.
	if _, err := s.c.Do(bctx, http.MethodPut, "/subscriptions/local/resourceGroups/local/providers/Microsoft.ManagedIdentity/userAssignedIdentities/theirs",
		map[string]any{"location": "local"}, nil); err != nil {
		t.Fatal(err)
	}
	other := mk("other-identity", &api.Identity{Type: api.IdentityUser, UserAssignedIdentities: map[string]*api.UserAssignedIdentity{
		"/subscriptions/local/resourceGroups/local/providers/Microsoft.ManagedIdentity/userAssignedIdentities/theirs": {}}})
	mk("no-identity", nil)

	s.submit("token-job", "with-identity", bin)
	s.waitJob("token-job", api.JobCompleted, 60*time.Second)
	log := s.jobLog("token-job")
	i := strings.Index(log, "TOKEN=")
	if i < 0 {
		t.Fatalf("job log has no token: %q", log)
	}
	raw := strings.TrimSpace(strings.SplitN(log[i+len("TOKEN="):], "\n", 2)[0])
	keyfunc, issuer := jwksKeyfunc(t, s.c.BaseURL)
	claims := jwt.MapClaims{}
	parser := jwt.NewParser(jwt.WithIssuer(issuer), jwt.WithAudience("https://storage.azure.com"), jwt.WithValidMethods([]string{"RS256"}), jwt.WithExpirationRequired())
	if _, err := parser.ParseWithClaims(raw, claims, keyfunc); err != nil {
		t.Fatalf("the job's token does not verify with the JWKS: %v", err)
	}
	if claims["sub"] != withID.Identity.PrincipalID {
		t.Fatalf("sub = %v, want the cluster's principal %s", claims["sub"], withID.Identity.PrincipalID)
	}
	if exp, _ := claims.GetExpirationTime(); exp == nil || time.Until(exp.Time) > 20*time.Minute {
		t.Fatalf("token lifetime too long: expires %v", exp)
	}
	// Another cluster's identity, asked for by client id: refused.
	theirs := other.Identity.UserAssignedIdentities["/subscriptions/local/resourceGroups/local/providers/Microsoft.ManagedIdentity/userAssignedIdentities/theirs"].ClientID
	s.submitJob(api.Job{Name: "steal", Properties: api.JobProperties{Command: "WANT_CLIENT_ID=" + theirs + " " + bin, ComputeID: "with-identity"}})
	s.waitJob("steal", api.JobFailed, 60*time.Second)
	if got := s.jobLog("steal"); strings.Contains(got, "TOKEN=") || !strings.Contains(got, "not an identity of compute") {
		t.Fatalf("a job got (or was not clearly refused) another cluster's identity: %q", got)
	}
	// Outside a running job the endpoint refuses: the job hands its
	// endpoint and secret out, and once it has ended they are worth nothing.
	s.submit("leaker", "with-identity", `echo "EP=$MSI_ENDPOINT"; echo "SECRET=$MSI_SECRET"`)
	s.waitJob("leaker", api.JobCompleted, 60*time.Second)
	leaked := s.jobLog("leaker")
	field := func(k string) string {
		i := strings.Index(leaked, k+"=")
		return strings.TrimSpace(strings.SplitN(leaked[i+len(k)+1:], "\n", 2)[0])
	}
	for _, secretHeader := range []string{field("SECRET"), ""} {
		req, _ := http.NewRequest("GET", field("EP")+"?api-version=2017-09-01&resource=https://storage.azure.com", nil)
		req.Header.Set("secret", secretHeader)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatalf("the MSI endpoint gave a token outside a running job (secret %q)", secretHeader)
		}
	}
	// A cluster without identity gives its jobs no endpoint.
	s.submit("no-id-job", "no-identity", `echo "endpoint=[$MSI_ENDPOINT]"`)
	s.waitJob("no-id-job", api.JobCompleted, 60*time.Second)
	if !strings.Contains(s.jobLog("no-id-job"), "endpoint=[]") {
		t.Fatalf("a job without identity saw an MSI endpoint: %q", s.jobLog("no-id-job"))
	}
	// Tokens are never logged by the server or the agents.
	filepath.Walk(s.dataDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".log") && !strings.Contains(p, "/logs/") && !strings.Contains(p, "/jobs/") {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), raw[:40]) {
				t.Errorf("%s contains the token", p)
			}
		}
		return nil
	})
}
