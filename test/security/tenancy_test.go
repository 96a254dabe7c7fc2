package security

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// Attacks of one tenant on the others: a path spelling that skips the
// lock check, jobs of two workspaces that see each other's files and
// command lines, a job user without a name, a job that grows the database
// without bound, a token with no role that signs every studio user out,
// and budget webhooks aimed at the control plane's own loopback services.

// contributorEverywhere makes a principal with Contributor at "/" and
// returns its token.
func (s *server) contributorEverywhere(name string) string {
	s.t.Helper()
	if _, err := s.admin.CreatePrincipal(bctx, name, "User"); err != nil {
		s.t.Fatal(err)
	}
	tok, err := s.admin.CreateToken(bctx, name, "")
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.admin.AssignRole(bctx, name, "Contributor", "/"); err != nil {
		s.t.Fatal(err)
	}
	return tok.Token
}

// TestDoubleSlashSkipsNoLock: the attack of a Contributor at "/" who put
// a second slash before the path (curl --path-as-is -X DELETE
// "$URL//subscriptions/…/computes/lk3"): before, it deleted a CanNotDelete
// compute (202), read a ReadOnly compute's admin password (listKeys, 200)
// and made a job in a ReadOnly workspace (201). Every spelling is now
// refused as the canonical path is, and nothing changes.
func TestDoubleSlashSkipsNoLock(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.workspace("frozen")
	compute(t, s.admin, "lk3", 1)
	compute(t, s.admin, "ro1", 1)
	fz := s.as(s.admin.Token, "frozen")
	compute(t, fz, "cpu", 1)
	admin := "Bearer " + s.admin.Token
	lock := func(scope, level string) {
		t.Helper()
		body := []byte(`{"properties":{"level":"` + level + `"}}`)
		if st, b := s.sendAuth(t, "PUT", scope+"/providers/Microsoft.Authorization/locks/keep?api-version=2016-09-01", admin, body); st != 201 {
			t.Fatalf("lock %s: %d %s", scope, st, b)
		}
	}
	lock(s.admin.Scope.ComputeID("lk3"), "CanNotDelete")
	lock(s.admin.Scope.ComputeID("ro1"), "ReadOnly")
	lock(fz.Scope.WorkspaceID(), "ReadOnly")
	attacker := "Bearer " + s.contributorEverywhere("everywhere")
	job := []byte(`{"properties":{"jobType":"Command","command":"true","computeId":"` + fz.Scope.ComputeID("cpu") + `"}}`)
	for _, spell := range []func(string) string{
		func(p string) string { return "/" + p },
		func(p string) string { return strings.Replace(p, "/providers/", "/./providers/", 1) },
		func(p string) string { return strings.Replace(p, "/providers/", "%2Fproviders/", 1) },
		strings.ToUpper,
		func(p string) string { return p + "/" },
	} {
		for _, c := range []struct {
			method, path string
			body         []byte
		}{
			{"DELETE", s.admin.Scope.ComputeID("lk3"), nil}, // with underlyingResourceAction, below
			{"POST", s.admin.Scope.ComputeID("ro1") + "/listKeys", nil},
			{"PUT", fz.Scope.WorkspaceID() + "/jobs/sneaky", job},
		} {
			p := spell(c.path) + "?api-version=2024-04-01"
			if c.method == "DELETE" {
				p += "&underlyingResourceAction=Delete"
			}
			st, b := s.sendAuth(t, c.method, p, attacker, c.body)
			if st != http.StatusConflict || armErrCode(t, p, b) != api.CodeScopeLocked {
				t.Errorf("%s %s: %d %s; want 409 ScopeLocked", c.method, p, st, b)
			}
		}
	}
	if _, err := s.admin.GetCompute(bctx, "lk3"); err != nil {
		t.Errorf("the CanNotDelete compute: %v", err)
	}
	if _, err := fz.GetJob(bctx, "sneaky"); err == nil {
		t.Error("a job was made in the ReadOnly workspace")
	}
}

// TestJobsOfTwoWorkspacesSeeNothingOfEachOther: a job of workspace B
// writes /tmp/leak-b.txt and /dev/shm/leak-b.txt and sleeps with a secret
// on its command line; a job of workspace A, on another node, looks for
// all three. Before, it printed them; now it finds none, and B's files
// are not the machine's either.
func TestJobsOfTwoWorkspacesSeeNothingOfEachOther(t *testing.T) {
	needRoot(t)
	s := startServer(t)
	killNodesAtEnd(t, s)
	t.Cleanup(func() { os.Remove("/tmp/leak-b.txt"); os.Remove("/dev/shm/leak-b.txt") })
	s.workspace("team-a")
	s.workspace("team-b")
	a, b := s.as(s.admin.Token, "team-a"), s.as(s.admin.Token, "team-b")
	compute(t, a, "cpu", 1)
	compute(t, b, "cpu", 1)
	const secret = "SECRET-B-4242"
	vj := api.Job{Name: "victim", Properties: api.JobProperties{JobType: api.JobTypeCommand, ComputeID: b.Scope.ComputeID("cpu"),
		Command: `echo b-data > /tmp/leak-b.txt && echo b-data > /dev/shm/leak-b.txt && touch "$CUMULUS_OUTPUT_DIR/ready" && python3 -c 'import time; time.sleep(300)' --api-key=` + secret}}
	if _, err := b.PutJob(bctx, vj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the victim to run", 90*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(s.dataDir+"-nodes", "*", "work", "jobs", "*", "outputs", "ready"))
		return len(m) == 1
	})
	got, log := runJob(t, a, "attacker", "cpu", `cat /tmp/leak-b.txt /dev/shm/leak-b.txt 2>/dev/null
for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null; echo; done | grep -c "SECRET-B-424[2]" || true
echo "processes seen: $(ls -d /proc/[0-9]* | wc -l)"`)
	t.Logf("the attacker's log:\n%s", log)
	if got.Properties.Status != api.JobCompleted {
		t.Fatalf("attacker: %s %s", got.Properties.Status, got.Properties.StatusMessage)
	}
	if strings.Contains(log, "b-data") {
		t.Error("workspace A's job read B's /tmp or /dev/shm")
	}
	if !strings.HasPrefix(log, "0\n") {
		t.Error("workspace A's job saw B's command line in /proc")
	}
	for _, p := range []string{"/tmp/leak-b.txt", "/dev/shm/leak-b.txt"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("B's job wrote the machine's %s", p)
		}
	}
	if _, err := b.CancelJob(bctx, "victim"); err != nil {
		t.Error(err)
	}
}

// TestJobUserIsAUser: jobs run as a uid of their own, and anything that
// asks who it runs as gets an answer (before, getpwuid failed, and
// PyTorch's getpass.getuser() crashed every DDP job): getent, id,
// Python's getpass and pwd, USER and LOGNAME.
func TestJobUserIsAUser(t *testing.T) {
	needRoot(t)
	t.Parallel()
	s := startServer(t)
	killNodesAtEnd(t, s)
	compute(t, s.admin, "cpu", 1)
	got, log := runJob(t, s.admin, "whoami", "cpu", `set -e
echo "getent: $(getent passwd "$(id -u)")"
echo "id: $(id -un) $(id -gn)"
echo "env: $USER $LOGNAME $HOME"
echo "python: $(python3 -c 'import getpass, pwd, os; print(getpass.getuser(), pwd.getpwuid(os.getuid()).pw_name)')"
echo "bare python: $(env -u USER -u LOGNAME python3 -c 'import getpass; print(getpass.getuser())')"`)
	t.Logf("log:\n%s", log)
	if got.Properties.Status != api.JobCompleted {
		t.Fatalf("job: %s %s\n%s", got.Properties.Status, got.Properties.StatusMessage, log)
	}
	for _, want := range []string{"\nid: cumulus-job cumulus-job\n", "\npython: cumulus-job cumulus-job\n", "\nbare python: cumulus-job\n"} {
		if !strings.Contains("\n"+log, want) {
			t.Errorf("log lacks %q", strings.TrimSpace(want))
		}
	}
	if !strings.Contains(log, "getent: cumulus-job:x:") || !strings.Contains(log, "env: cumulus-job cumulus-job /") {
		t.Errorf("getent or the environment does not name the job user:\n%s", log)
	}
}

// TestJobCannotGrowTheDatabase: a job sends 60 log-batch calls of 100 tags
// of 8,000 bytes each with its own MLFLOW_TRACKING_TOKEN (48 MB; before,
// all were stored). A job keeps at most 1,000 tags: the batches past them
// are RESOURCE_LIMIT_EXCEEDED, and the job's metrics stay small.
func TestJobCannotGrowTheDatabase(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	killNodesAtEnd(t, s)
	compute(t, s.admin, "cpu", 1)
	got, log := runJob(t, s.admin, "flood", "cpu", `python3 - <<'EOF'
import json, os, urllib.request, urllib.error, collections
url = os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/log-batch"
tok = os.environ["MLFLOW_TRACKING_TOKEN"]
run = os.environ["MLFLOW_RUN_ID"]
seen = collections.Counter()
for b in range(60):
    body = json.dumps({"run_id": run, "tags": [{"key": "t%d-%d" % (b, i), "value": "x" * 8000} for i in range(100)]}).encode()
    req = urllib.request.Request(url, data=body, headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req).read()
        seen["200"] += 1
    except urllib.error.HTTPError as e:
        seen["%d %s" % (e.code, json.loads(e.read())["error_code"])] += 1
print("answers:", dict(seen))
EOF`)
	t.Logf("log:\n%s", log)
	if got.Properties.Status != api.JobCompleted {
		t.Fatalf("job: %s %s\n%s", got.Properties.Status, got.Properties.StatusMessage, log)
	}
	if !strings.Contains(log, "answers: {'200': 10, '400 RESOURCE_LIMIT_EXCEEDED': 50}") {
		t.Errorf("want 10 batches stored and 50 refused with RESOURCE_LIMIT_EXCEEDED")
	}
	var m api.JobMetrics
	if _, err := s.admin.Do(bctx, "GET", s.admin.Scope.WorkspaceID()+"/jobs/flood/metrics?api-version=2024-04-01", nil, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Tags) > 1000 {
		t.Errorf("the job keeps %d tags", len(m.Tags))
	}
}

// signIn posts a token to the studio's sign-in form; it returns the status
// and the session cookie, if any.
func (s *server) signIn(t *testing.T, token string) (int, *http.Cookie) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+s.addr+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "cumulus_session" {
			return res.StatusCode, c
		}
	}
	return res.StatusCode, nil
}

// sessionAlive says whether a studio session cookie still signs in.
func (s *server) sessionAlive(t *testing.T, c *http.Cookie) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+s.addr+"/ui/session", nil)
	req.AddCookie(c)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode == 200
}

// TestNoRoleTokenCannotSignOutStudioUsers: before, 10,050 sign-ins with a
// token of a principal with no role dropped every other session (the
// server kept 10,000 and dropped the oldest). A principal with no role
// gets no session; one with a role that signs in again and again ends
// only its own oldest sessions.
func TestNoRoleTokenCannotSignOutStudioUsers(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	st, owner := s.signIn(t, s.admin.Token)
	if st != 200 || owner == nil {
		t.Fatalf("the owner's sign-in: %d", st)
	}
	if _, err := s.admin.CreatePrincipal(bctx, "nobody", "User"); err != nil {
		t.Fatal(err)
	}
	tok, err := s.admin.CreateToken(bctx, "nobody", "")
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if st, c := s.signIn(t, tok.Token); st != http.StatusForbidden || c != nil {
			t.Fatalf("sign-in with no role: %d, cookie %v", st, c)
		}
	}
	reader := s.principal("reader", "Reader", "")
	var first *http.Cookie
	for i := range 100 {
		st, c := s.signIn(t, reader.Token)
		if st != 200 {
			t.Fatalf("the reader's sign-in %d: %d", i, st)
		}
		if first == nil {
			first = c
		}
	}
	if !s.sessionAlive(t, owner) {
		t.Error("the owner was signed out")
	}
	if s.sessionAlive(t, first) {
		t.Error("the reader's first of 100 sessions lives on: sessions per principal are not bounded")
	}
}

// hookListener is a loopback HTTP listener that counts what it is sent.
func hookListener(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts, &n
}

// putBudget writes a budget with a webhook as c; it returns the status.
func putBudget(t *testing.T, s *server, c *client.Client, name, webhook string, amount float64) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"properties": map[string]any{"amount": amount, "webhook": webhook}})
	return s.sendAuth(t, "PUT", c.Scope.WorkspaceID()+"/budgets/"+name+"?api-version=2024-04-01", "Bearer "+c.Token, body)
}

// TestBudgetWebhookCannotReachLoopback: a Contributor's budget webhook
// aimed at the control plane's own loopback services (127.0.0.1,
// localhost, [::ffff:127.0.0.1], the server's own port, a URL with a
// password, the metadata address) is refused (before, each was POSTed
// to). An operator who allows loopback (--webhook-allow) gets the
// notices there, and a redirect is not followed to a second listener.
func TestBudgetWebhookCannotReachLoopback(t *testing.T) {
	t.Parallel()
	hook, hits := hookListener(t, nil)
	_, port, _ := strings.Cut(strings.TrimPrefix(hook.URL, "http://"), ":")
	s := startServer(t)
	_, serverPort, _ := strings.Cut(s.addr, ":")
	contributor := s.principal("team", "Contributor", "")
	for _, u := range []string{hook.URL + "/x", "http://localhost:" + port + "/x", "http://[::ffff:127.0.0.1]:" + port + "/x",
		"http://127.0.0.1:" + serverPort + "/cumulus/v1/auth/tokens", "http://user:pass@example.com/x", "http://169.254.169.254/latest/meta-data/",
		"http://[::1]:" + port + "/x", "http://0.0.0.0:" + port + "/x", "http://10.0.0.1/x"} {
		st, b := putBudget(t, s, contributor, "b", u, 1)
		if st != 400 || armErrCode(t, u, b) != api.CodeValidationError {
			t.Errorf("webhook %s: %d %s; want 400", u, st, b)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the loopback listener got %d requests", hits.Load())
	}

	// Allowed by the operator: notices arrive; a redirect is not followed.
	second, secondHits := hookListener(t, nil)
	redirect, redirectHits := hookListener(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, second.URL+"/stolen", http.StatusTemporaryRedirect)
	})
	s2 := startServer(t, "--webhook-allow", "127.0.0.1/32")
	killNodesAtEnd(t, s2)
	one := int32(1)
	c := api.Compute{Name: "cpu"}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &one, MaxNodeCount: &one, NodeIdleTimeBeforeScaleDown: "PT30S"}
	if _, resp, err := s2.admin.PutCompute(bctx, c); err != nil {
		t.Fatal(err)
	} else if err := s2.admin.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node to run", 90*time.Second, func() bool {
		ns, err := s2.admin.ListNodes(bctx, "cpu")
		return err == nil && len(ns) == 1 && ns[0].NodeState == api.NodeIdle
	})
	if st, b := putBudget(t, s2, s2.admin, "allowed", hook.URL+"/x", 1e-9); st != 201 {
		t.Fatalf("an allowed webhook: %d %s", st, b)
	}
	if st, b := putBudget(t, s2, s2.admin, "redirected", redirect.URL+"/x", 1e-9); st != 201 {
		t.Fatalf("an allowed webhook that redirects: %d %s", st, b)
	}
	waitFor(t, "the notices", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(s2.dataDir, "serve.log"))
		return hits.Load() > 0 && redirectHits.Load() > 0 && strings.Contains(string(b), "307 Temporary Redirect")
	})
	if n := secondHits.Load(); n != 0 {
		t.Errorf("the redirect was followed: its target got %d requests", n)
	}
}

// TestSSHSessionIsTheJobUser: on a node that isolates its jobs, the
// cluster's admin account logs in with a real OpenSSH client as the jobs'
// user, in their space: `id` names it, and the control plane's files are
// out of reach (before, a session ran as the agent's user, root).
func TestSSHSessionIsTheJobUser(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("ssh"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("openssh-client is required in CI")
		}
		t.Skip("skipping: no ssh client here")
	}
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t)
	killNodesAtEnd(t, s)
	one := int32(1)
	c := api.Compute{Name: "debug"}
	c.Properties.ComputeType = api.ComputeTypeAml
	a := c.Aml()
	a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &one, MaxNodeCount: &one, NodeIdleTimeBeforeScaleDown: "PT30S"}
	a.UserAccountCredentials = &api.UserAccountCredentials{AdminUserName: "azureuser", AdminUserSSHPublicKey: strings.TrimSpace(string(pub))}
	if _, resp, err := s.admin.PutCompute(bctx, c); err != nil {
		t.Fatal(err)
	} else if err := s.admin.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	var node string
	waitFor(t, "the node's SSH port", 90*time.Second, func() bool {
		ns, err := s.admin.ListNodes(bctx, "debug")
		if err != nil || len(ns) != 1 || ns[0].Port == 0 {
			return false
		}
		node = ns[0].NodeID
		return true
	})
	cmd := exec.Command(binary, "compute", "connect-ssh", "-n", "debug", "--node-id", node, "--private-key-file", key, "--",
		"-o", "UserKnownHostsFile="+filepath.Join(dir, "known_hosts"), "-o", "BatchMode=yes",
		"id -un; getent passwd $(id -u) | cut -d: -f1; echo $USER; if cat "+filepath.Join(s.dataDir, "config.yaml")+" >/dev/null 2>&1; then echo READ; else echo DENIED; fi")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CUMULUS_CONFIG="+filepath.Join(s.dataDir, "config.yaml"))
	out, err := cmd.Output()
	if err != nil || string(out) != "cumulus-job\ncumulus-job\ncumulus-job\nDENIED\n" {
		t.Errorf("an SSH session on an isolated node: %v, %q; want the job user, who cannot read the data dir", err, out)
	}
}
