package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/daemon"
)

// The seeds' az ml v1 commands, and az identity, work as written: the v1
// flags map to today's compute, a retired size is refused naming its
// successor, and a user-assigned identity is made and attached from the
// CLI alone.
func TestV1ComputeTargetAndIdentityCommands(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) { o.Provider = "sim" })
	cli := func(args ...string) (string, string, int) {
		return run(t, append([]string{"--config", cfg}, args...)...)
	}

	out, errOut, code := cli("computetarget", "create", "amlcompute", "--name", "cpu", "--vm-size", "STANDARD_D2_V2", "--min-nodes", "1",
		"--max-nodes", "4", "--vm-priority", "lowpriority", "--assign-identity", "[system]")
	var v ComputeView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("computetarget create amlcompute: exit %d, %s", code, errOut)
	}
	if v.Size != "Standard_D2_v2" || v.Tier != "low_priority" || *v.MinInstances != 1 || *v.MaxInstances != 4 ||
		*v.IdleTimeBeforeScaleDown != 1800 || v.Identity == nil || v.Identity.Type != "system_assigned" || v.Identity.PrincipalID == "" {
		t.Errorf("v1 flags mapped to %+v (identity %+v)", v.ComputeSpec, v.Identity)
	}

	_, errOut, code = cli("computetarget", "create", "amlcompute", "--name", "gpu", "--vm-size", "Standard_NC6", "--max-nodes", "1")
	if code == 0 || !strings.Contains(errOut, "Standard_NC6 is retired") || !strings.Contains(errOut, "successor Standard_NC4as_T4_v3") {
		t.Errorf("a retired size: exit %d, %q", code, errOut)
	}
	_, errOut, code = cli("computetarget", "create", "amlcompute", "--name", "bad", "--vm-size", "Standard_D2_v2", "--vm-priority", "spot")
	if code == 0 || !strings.Contains(errOut, "--vm-priority \"spot\" is not one of dedicated, lowpriority") {
		t.Errorf("a bad priority: exit %d, %q", code, errOut)
	}

	// az identity create, with az-style tags; then attached the v1 way.
	out, errOut, code = cli("identity", "create", "-n", "churn-reader", "--tags", "project=churn", "team=ml")
	var id identityView
	if code != 0 || json.Unmarshal([]byte(out), &id) != nil {
		t.Fatalf("identity create: exit %d, %s", code, errOut)
	}
	if !strings.HasSuffix(id.ID, "/resourceGroups/local/providers/Microsoft.ManagedIdentity/userAssignedIdentities/churn-reader") ||
		id.ClientID == "" || id.PrincipalID == "" || id.Tags["team"] != "ml" || id.ResourceGroup != "local" {
		t.Errorf("identity create printed %+v", id)
	}
	if out, _, code = cli("-o", "table", "identity", "list"); code != 0 || !strings.Contains(out, "churn-reader") || !strings.Contains(out, id.ClientID) {
		t.Errorf("identity list: %d\n%s", code, out)
	}
	if out, _, code = cli("identity", "show", "--ids", id.ID); code != 0 || !strings.Contains(out, id.PrincipalID) {
		t.Errorf("identity show --ids: %d %s", code, out)
	}
	out, errOut, code = cli("computetarget", "amlcompute", "identity", "assign", "--name", "cpu", id.ID)
	if code != 0 || !strings.Contains(out, `"type": "system_assigned,user_assigned"`) || !strings.Contains(out, id.ClientID) {
		t.Errorf("identity assign: exit %d, %s %s", code, out, errOut)
	}
	out, errOut, code = cli("computetarget", "amlcompute", "identity", "remove", "--name", "cpu", "--identities", "[system]")
	if code != 0 || !strings.Contains(out, `"type": "user_assigned"`) {
		t.Errorf("identity remove [system]: exit %d, %s %s", code, out, errOut)
	}
	if _, errOut, code = cli("computetarget", "amlcompute", "identity", "assign", "--name", "cpu", "/subscriptions/local/resourceGroups/local/providers/Microsoft.ManagedIdentity/userAssignedIdentities/nobody"); code == 0 ||
		!strings.Contains(errOut, "does not exist") {
		t.Errorf("assigning a missing identity: exit %d, %q", code, errOut)
	}

	out, errOut, code = cli("computetarget", "update", "amlcompute", "--name", "cpu", "--max-nodes", "6", "--idle-seconds-before-scaledown", "300")
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || *v.MaxInstances != 6 || *v.IdleTimeBeforeScaleDown != 300 {
		t.Errorf("computetarget update amlcompute: exit %d, %s", code, errOut)
	}
	if out, _, code = cli("computetarget", "list"); code != 0 || !strings.Contains(out, "cpu") {
		t.Errorf("computetarget list: %d %s", code, out)
	}
	if _, errOut, code = cli("computetarget", "delete", "--name", "cpu"); code != 0 {
		t.Errorf("computetarget delete: exit %d, %s", code, errOut)
	}
	if _, errOut, code = cli("identity", "delete", "-n", "churn-reader"); code != 0 {
		t.Errorf("identity delete: %d %s", code, errOut)
	}
	if _, errOut, code = cli("identity", "show", "-n", "churn-reader"); code == 0 || !strings.Contains(errOut, "ResourceNotFound") {
		t.Errorf("identity show after delete: %d %q", code, errOut)
	}
}
