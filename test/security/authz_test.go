package security

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/files"
)

// Authorization that holds: identities, locations, the audit log and
// blobs. Workspace team-a belongs to team A, team-b to team B; team B's
// user-assigned identity lives in the resource group both share.

// wantAPIError asserts err is an ARM error with status and code.
func wantAPIError(t *testing.T, what string, err error, status int, code string) *api.Error {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != status || (code != "" && ae.Code != code) {
		t.Fatalf("%s: %v; want %d %s", what, err, status, code)
	}
	return ae
}

const identityBase = "/subscriptions/local/resourceGroups/local/providers/Microsoft.ManagedIdentity/userAssignedIdentities/"

// putIdentity creates a user-assigned identity as the admin.
func (s *server) putIdentity(name string) string {
	s.t.Helper()
	if _, err := s.admin.Do(bctx, http.MethodPut, identityBase+name, map[string]any{"location": "local"}, nil); err != nil {
		s.t.Fatal(err)
	}
	return identityBase + name
}

// identityCompute is a CPU cluster of one node at most that uses the
// user-assigned identity rid.
func identityCompute(name, rid string) api.Compute {
	zero, one := int32(0), int32(1)
	c := api.Compute{Name: name, Identity: &api.Identity{Type: api.IdentityUser,
		UserAssignedIdentities: map[string]*api.UserAssignedIdentity{rid: {}}}}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &one, NodeIdleTimeBeforeScaleDown: "PT30S"}
	return c
}

// TestContributorCannotAttachOtherTeamsIdentity: a Contributor of team A
// could not read team B's identity, yet could attach it to a compute of
// A and have A's jobs act as team B. Attaching needs the assign action at
// the identity (Owner or Contributor over it, or ManagedIdentityOperator,
// which team B's owner grants); without it the PUT is 403 and nothing is
// made.
func TestContributorCannotAttachOtherTeamsIdentity(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.workspace("team-a")
	s.workspace("team-b")
	rid := s.putIdentity("team-b-identity")
	alice := s.principal("alice", "Contributor", "team-a")

	if _, err := alice.Do(bctx, http.MethodGet, rid, nil, nil); err == nil {
		t.Fatal("alice reads team B's identity")
	}
	_, _, err := alice.PutCompute(bctx, identityCompute("borrowed", rid))
	ae := wantAPIError(t, "attach team B's identity", err, http.StatusForbidden, api.CodeForbidden)
	if !strings.Contains(ae.Message, "userAssignedIdentities/assign/action") {
		t.Errorf("the refusal does not name the action it needs: %s", ae.Message)
	}
	if _, err := alice.GetCompute(bctx, "borrowed"); err == nil {
		t.Fatal("the refused compute exists")
	}
	// Team B's owner lets alice use the identity: then she may.
	if _, err := s.admin.AssignRole(bctx, "alice", "ManagedIdentityOperator", rid); err != nil {
		t.Fatal(err)
	}
	out, resp, err := alice.PutCompute(bctx, identityCompute("borrowed", rid))
	if err != nil {
		t.Fatalf("with ManagedIdentityOperator on the identity: %v", err)
	}
	if err := alice.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	if out.Identity == nil || out.Identity.UserAssignedIdentities[rid] == nil {
		t.Errorf("identity not attached: %+v", out.Identity)
	}
}

// TestUnknownIdentityRefused: an identity id that names nothing was
// accepted. It is 400 (ARM shape) for a caller who may assign identities
// there, and nothing is made.
func TestUnknownIdentityRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rid := identityBase + "no-such-identity"
	_, _, err := s.admin.PutCompute(bctx, identityCompute("ghost", rid))
	ae := wantAPIError(t, "attach a missing identity", err, http.StatusBadRequest, api.CodeValidationError)
	if !strings.Contains(ae.Message, "no-such-identity") || !strings.Contains(ae.Message, "does not exist") {
		t.Errorf("the refusal does not say which identity is missing: %s", ae.Message)
	}
	if _, err := s.admin.GetCompute(bctx, "ghost"); err == nil {
		t.Fatal("the refused compute exists")
	}
}

// TestMadeUpLocationRefused: a compute refused in local for quota was
// accepted in "elsewhere", against a fresh default limit. Locations are
// the configured list (--locations): any other is 400, naming the valid
// ones, for computes, workspaces, quotas and usages.
func TestMadeUpLocationRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--locations", "local,westeurope")
	_, err := s.admin.UpdateQuotas(bctx, "local", api.QuotaUpdateRequest{Value: []api.QuotaUpdate{
		{ID: s.admin.Scope.Subscription + "/quotas/standardDSv2Family", Limit: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	bob := s.principal("bob", "Contributor", "default")
	big := func(name, loc string) api.Compute {
		two := int32(2)
		c := api.Compute{Name: name, Location: loc}
		c.Properties.ComputeType = api.ComputeTypeAml
		a := c.Aml()
		a.VMSize = "Standard_DS2_v2"
		a.ScaleSettings = &api.ScaleSettings{MinNodeCount: &two, MaxNodeCount: &two, NodeIdleTimeBeforeScaleDown: "PT30S"}
		return c
	}
	_, _, err = bob.PutCompute(bctx, big("big", "local"))
	wantAPIError(t, "over quota in local", err, http.StatusConflict, api.CodeQuotaExceeded)

	_, _, err = bob.PutCompute(bctx, big("big", "elsewhere"))
	ae := wantAPIError(t, "a made-up location", err, http.StatusBadRequest, "LocationNotAvailableForResourceType")
	if !strings.Contains(ae.Message, "local, westeurope") {
		t.Errorf("the refusal does not name the valid locations: %s", ae.Message)
	}
	if _, err := bob.GetCompute(bctx, "big"); err == nil {
		t.Fatal("the refused compute exists")
	}
	_, err = s.admin.PutWorkspace(bctx, api.Workspace{Name: "away", Location: "elsewhere"})
	wantAPIError(t, "workspace in a made-up location", err, http.StatusBadRequest, "LocationNotAvailableForResourceType")
	_, err = bob.ListUsages(bctx, "elsewhere")
	wantAPIError(t, "usages of a made-up location", err, http.StatusBadRequest, "LocationNotAvailableForResourceType")
	_, err = bob.ListQuotas(bctx, "elsewhere")
	wantAPIError(t, "quotas of a made-up location", err, http.StatusBadRequest, "LocationNotAvailableForResourceType")
	_, err = s.admin.UpdateQuotas(bctx, "elsewhere", api.QuotaUpdateRequest{Value: []api.QuotaUpdate{{ID: "x/quotas/standardDSv2Family", Limit: 1000}}})
	wantAPIError(t, "quota of a made-up location", err, http.StatusBadRequest, "LocationNotAvailableForResourceType")

	// A configured location works.
	zero, one := int32(0), int32(1)
	c := api.Compute{Name: "west", Location: "westeurope"}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &zero, MaxNodeCount: &one}
	if _, resp, err := bob.PutCompute(bctx, c); err != nil {
		t.Fatalf("compute in a configured location: %v", err)
	} else if err := bob.Wait(bctx, resp, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.ListUsages(bctx, "westeurope"); err != nil {
		t.Errorf("usages of a configured location: %v", err)
	}
}

// TestAuditSurvivesClientDisconnect: the audit entry was written after
// the answer with the request's context, so a client that hung up lost
// it (1 in 81 committed PUTs had none). 100 PUTs whose connections are
// all closed at once: every workspace made has exactly one successful
// entry, and no successful entry names a workspace that was not made.
func TestAuditSurvivesClientDisconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const n = 100
	prefix := s.admin.Scope.GroupID() + "/providers/Microsoft.MachineLearningServices/workspaces/dc-"
	var conns []net.Conn
	for i := range n {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		body := `{"location":"local"}`
		fmt.Fprintf(c, "PUT %s%03d?api-version=%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			prefix, i, client.APIVersion, s.addr, s.admin.Token, len(body), body)
		conns = append(conns, c)
	}
	// Close them all at once, as soon as the server has made the first
	// workspace: the rest are read, in flight or waiting.
	waitFor(t, "the first workspace", 30*time.Second, func() bool {
		_, err := s.admin.GetWorkspace(bctx, fmt.Sprintf("dc-%03d", 0))
		return err == nil
	})
	for _, c := range conns {
		c.Close()
	}
	// Wait until the server has settled: the entries stop changing.
	count := func() int {
		es, err := s.admin.ListAudit(bctx, "", prefix, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	last, since := -1, time.Now()
	waitFor(t, "the audit log to settle", 60*time.Second, func() bool {
		if c := count(); c != last {
			last, since = c, time.Now()
		}
		return time.Since(since) > 2*time.Second
	})

	made := map[string]bool{}
	wss, err := s.admin.ListWorkspaces(bctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wss {
		if strings.HasPrefix(w.Name, "dc-") {
			made[strings.ToLower(prefix+strings.TrimPrefix(w.Name, "dc-"))] = true
		}
	}
	es, err := s.admin.ListAudit(bctx, "", prefix, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	succeeded := map[string]int{}
	for _, e := range es {
		if e.Status >= 200 && e.Status < 300 {
			succeeded[strings.ToLower(e.Resource)]++
			if e.Principal != "admin" {
				t.Errorf("entry %+v: principal %q, want admin", e, e.Principal)
			}
		}
	}
	if len(made) == 0 {
		t.Fatal("no workspace was made: the test proves nothing")
	}
	for id := range made {
		if succeeded[id] != 1 {
			t.Errorf("workspace %s was made; it has %d successful audit entries, want 1", id, succeeded[id])
		}
	}
	for id := range succeeded {
		if !made[id] {
			t.Errorf("an audit entry says %s was written, but it does not exist", id)
		}
	}
	t.Logf("%d of %d workspaces made, %d audit entries", len(made), n, len(es))
	if b, _ := os.ReadFile(filepath.Join(s.dataDir, "serve.log")); strings.Contains(string(b), "audit record lost") {
		t.Error("the server lost an audit record")
	}
}

// TestReaderCannotUploadBlob: a Reader could upload blobs (any valid
// token could), unaudited. Uploads need a write role in the workspace the
// blob is for, and are audited, the refused ones too.
func TestReaderCannotUploadBlob(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.workspace("team-a")
	reader := s.principal("rita", "Reader", "team-a")
	writer := s.principal("wes", "Contributor", "team-a")
	data := []byte("a code snapshot")
	_, err := reader.UploadBlob(bctx, data)
	wantAPIError(t, "a Reader uploads", err, http.StatusForbidden, api.CodeForbidden)
	digest, err := writer.UploadBlob(bctx, data)
	if err != nil {
		t.Fatalf("a Contributor uploads: %v", err)
	}
	es, err := s.admin.ListAudit(bctx, "", writer.Scope.WorkspaceID()+"/blobs/"+digest, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, fmt.Sprintf("%s %d", e.Principal, e.Status))
	}
	if strings.Join(got, ",") != "rita 403,wes 204" {
		t.Errorf("audit of the blob: %q, want the refused and the accepted upload", got)
	}
}

// TestBlobNotReadableFromOtherWorkspace: any valid token downloaded any
// blob by its digest. A blob is read only in the workspace it was
// uploaded to, and by the nodes of a job of that workspace that uses it;
// a job of another workspace cannot name it.
func TestBlobNotReadableFromOtherWorkspace(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.workspace("team-a")
	s.workspace("team-b")
	alice := s.principal("alice", "Contributor", "team-a")
	reader := s.principal("rita", "Reader", "team-a")
	bob := s.principal("bob", "Contributor", "team-b")

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("team A's secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := files.Pack(&archive, dir); err != nil {
		t.Fatal(err)
	}
	digest, err := alice.UploadBlob(bctx, archive.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := reader.DownloadBlob(bctx, digest, &got); err != nil || !bytes.Equal(got.Bytes(), archive.Bytes()) {
		t.Fatalf("a Reader of team A downloads: %v", err)
	}
	wantAPIError(t, "team B downloads in its workspace", bob.DownloadBlob(bctx, digest, &got), http.StatusNotFound, api.CodeNotFound)
	intoA := *bob
	intoA.Scope.Workspace = "team-a"
	wantAPIError(t, "team B downloads in team A's workspace", intoA.DownloadBlob(bctx, digest, &got), http.StatusForbidden, api.CodeForbidden)

	// A job of team B cannot name team A's blob.
	compute(t, bob, "cpu-b", 1)
	in := map[string]api.JobInput{"data": {JobInputType: "uri_folder", URI: "cumulus://blobs/" + digest}}
	_, err = bob.PutJob(bctx, api.Job{Name: "steal", Properties: api.JobProperties{JobType: api.JobTypeCommand,
		Command: "cat ${{inputs.data}}/secret.txt", ComputeID: bob.Scope.ComputeID("cpu-b"), Inputs: in}})
	wantAPIError(t, "team B's job names team A's blob", err, http.StatusBadRequest, api.CodeValidationError)

	// Team A's own job gets it on its node.
	compute(t, alice, "cpu-a", 1)
	if _, err := alice.PutJob(bctx, api.Job{Name: "use", Properties: api.JobProperties{JobType: api.JobTypeCommand,
		Command: "cat ${{inputs.data}}/secret.txt", ComputeID: alice.Scope.ComputeID("cpu-a"), Inputs: in}}); err != nil {
		t.Fatal(err)
	}
	var j api.Job
	waitFor(t, "team A's job to end", 90*time.Second, func() bool {
		j, err = alice.GetJob(bctx, "use")
		return err == nil && api.JobTerminal(j.Properties.Status)
	})
	if log := jobLog(t, alice, "use"); j.Properties.Status != api.JobCompleted || !strings.Contains(log, "team A's secret") {
		t.Errorf("team A's job: %s, log %q", j.Properties.Status, log)
	}
}

// TestBlobSizeLimit: one upload could store 4 GiB. The limit is a serve
// setting (--max-blob-size, 1 GiB by default); beyond it the upload is
// 413 with the ARM error shape and nothing is stored.
func TestBlobSizeLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--max-blob-size", "64KiB")
	_, err := s.admin.UploadBlob(bctx, make([]byte, 64<<10+1))
	wantAPIError(t, "an upload over the limit", err, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge")
	if _, err := s.admin.UploadBlob(bctx, make([]byte, 64<<10)); err != nil {
		t.Fatalf("an upload at the limit: %v", err)
	}
}
