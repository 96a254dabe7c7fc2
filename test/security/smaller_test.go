package security

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Smaller holes of tenancy: a sign-in link that signs a victim in as its
// maker, another workspace's operations, a randint past any integer, lock
// names that read as something else, ambiguous JSON bodies.

// TestLoginLinkSignsInOnlyItsOwnBrowser: an attacker makes a one-time
// sign-in link with its own token, as `cumulus ui` does (from its own
// browser's start of the sign-in where the server has one), and gets a
// victim to open it. Before, the victim's browser was signed in as the
// attacker (login CSRF); now the link signs in only the browser that
// asked for it.
func TestLoginLinkSignsInOnlyItsOwnBrowser(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	attacker := s.principal("mallory", "Contributor", "")
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	own, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: own, CheckRedirect: noRedirect}
	binding := ""
	if res, err := browser.Get("http://" + s.addr + "/ui/login/begin?port=45678&state=state-0123456789abcdef"); err == nil {
		res.Body.Close()
		if loc, err := url.Parse(res.Header.Get("Location")); err == nil {
			binding = loc.Query().Get("binding")
		}
	}
	body, _ := json.Marshal(map[string]string{"binding": binding})
	st, b := s.sendAuth(t, "POST", "/ui/codes", "Bearer "+attacker.Token, body)
	if st != 200 {
		t.Fatalf("the attacker's link: %d %s", st, b)
	}
	var link struct{ Path string }
	if err := json.Unmarshal(b, &link); err != nil {
		t.Fatal(err)
	}
	victimJar, _ := cookiejar.New(nil)
	victim := &http.Client{Jar: victimJar, CheckRedirect: noRedirect}
	res, err := victim.Get("http://" + s.addr + link.Path)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "cumulus_session" {
			t.Fatalf("the victim's browser was signed in as the link's maker (%d)", res.StatusCode)
		}
	}
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the victim's browser: %d, want 401", res.StatusCode)
	}
}

// TestOtherWorkspacesOperationIsHidden: anyone signed in who knew an
// operation's id read its status (200) and result (204) whatever
// workspace it acted on; now a caller who may not read the compute gets
// 404, as for an id that does not exist.
func TestOtherWorkspacesOperationIsHidden(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.workspace("other")
	outsider := s.principal("outsider", "Contributor", "other")
	zero, one := int32(0), int32(1)
	c := api.Compute{Name: "secret-cpu"}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &one}
	_, resp, err := s.admin.PutCompute(bctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.admin.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	status := resp.Header.Get("Azure-AsyncOperation")
	u, err := url.Parse(status)
	if err != nil || status == "" {
		t.Fatalf("Azure-AsyncOperation %q", status)
	}
	for _, p := range []string{u.RequestURI(), strings.Replace(u.RequestURI(), "/operationStatuses/", "/operationResults/", 1)} {
		st, b := s.sendAuth(t, "GET", p, "Bearer "+outsider.Token, nil)
		if st != http.StatusNotFound {
			t.Errorf("GET %s by another workspace's Contributor: %d %s; want 404", p, st, b)
		}
		if st, _ := s.sendAuth(t, "GET", p, "Bearer "+s.admin.Token, nil); st != 200 && st != 204 {
			t.Errorf("GET %s by the owner: %d", p, st)
		}
	}
}

// TestAbsurdInputRefused: a randint whose upper no integer holds (before:
// grid sampling made no trials, random ones drew -2.87e18), lock names
// that read as a path, another text or an option, and bodies that two
// JSON readers read differently are 400s that change nothing.
func TestAbsurdInputRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	compute(t, s.admin, "cpu", 1)
	admin := "Bearer " + s.admin.Token
	ws := s.admin.Scope.WorkspaceID()

	sweep := func(upper string) []byte {
		return []byte(`{"properties":{"jobType":"Sweep","computeId":"` + s.admin.Scope.ComputeID("cpu") + `",
			"trial":{"command":"echo ${{search_space.n}}"},"searchSpace":{"n":["randint",[` + upper + `]]},
			"samplingAlgorithm":{"samplingAlgorithmType":"Random"},"objective":{"goal":"maximize","primaryMetric":"acc"},
			"limits":{"maxTotalTrials":2,"maxConcurrentTrials":1}}}`)
	}
	if st, b := s.sendAuth(t, "PUT", ws+"/jobs/huge?api-version=2024-04-01", admin, sweep("1e300")); st != 400 {
		t.Errorf("randint 1e300: %d %s", st, b)
	}
	if _, err := s.admin.GetJob(bctx, "huge"); err == nil {
		t.Error("the refused sweep exists")
	}

	for _, name := range []string{"..", "a..b", "evil%E2%80%AEtxt", "raw%FFbyte", "-rf", "keep."} {
		p := s.admin.Scope.ComputeID("cpu") + "/providers/Microsoft.Authorization/locks/" + name + "?api-version=2016-09-01"
		st, b := s.sendAuth(t, "PUT", p, admin, []byte(`{"properties":{"level":"CanNotDelete"}}`))
		if st != 400 {
			t.Errorf("lock name %q: %d %s", name, st, b)
		}
	}
	if st, b := s.sendAuth(t, "GET", s.admin.Scope.ComputeID("cpu")+"/providers/Microsoft.Authorization/locks?api-version=2016-09-01", admin, nil); st != 200 || strings.Contains(string(b), `"name"`) {
		t.Errorf("locks after the refusals: %d %s", st, b)
	}

	for _, body := range []string{`{"location":"local","location":"elsewhere"}`, `{"location":"local","tags":{"a":"1","a":"2"}}`, `{"location":"local","x":1e999}`} {
		if st, b := s.sendAuth(t, "PUT", workspaceURL(s, "ambiguous"), admin, []byte(body)); st != 400 {
			t.Errorf("PUT %s: %d %s", body, st, b)
		}
	}
	if _, err := s.admin.GetWorkspace(bctx, "ambiguous"); err == nil {
		t.Error("a refused PUT made its workspace")
	}
}
