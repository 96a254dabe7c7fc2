package rbac

import "testing"

const (
	ws       = "/subscriptions/s1/resourceGroups/g1/providers/Microsoft.MachineLearningServices/workspaces/w1"
	other    = "/subscriptions/s1/resourceGroups/g2/providers/Microsoft.MachineLearningServices/workspaces/w2"
	identity = "/subscriptions/s1/resourceGroups/g1/providers/Microsoft.ManagedIdentity/userAssignedIdentities/team-b"
)

func TestAllowed(t *testing.T) {
	cases := []struct {
		name   string
		as     []Assignment
		res    string
		action Action
		want   bool
	}{
		{"owner everywhere", []Assignment{{Owner, "/"}}, ws + "/computes/c", Access, true},
		{"reader reads", []Assignment{{Reader, ws}}, ws + "/computes/c", Read, true},
		{"reader cannot write", []Assignment{{Reader, ws}}, ws + "/computes/c", Write, false},
		{"reader cannot read secrets", []Assignment{{Reader, ws}}, ws + "/computes/c/listKeys", Secrets, false},
		{"reader of w1 cannot read w2", []Assignment{{Reader, ws}}, other + "/computes/c", Read, false},
		{"scope is at a segment boundary", []Assignment{{Reader, ws}}, ws + "2/computes/c", Read, false},
		{"group scope covers its workspaces", []Assignment{{Contributor, "/subscriptions/s1/resourceGroups/g1"}}, ws + "/jobs/j", Write, true},
		{"contributor cannot manage access", []Assignment{{Contributor, "/"}}, "/", Access, false},
		{"operator scales", []Assignment{{ComputeOperator, ws}}, ws + "/computes/c", Scale, true},
		{"operator evicts", []Assignment{{ComputeOperator, ws}}, ws + "/computes/c/nodes/n/simulateEviction", Evict, true},
		{"operator cannot delete", []Assignment{{ComputeOperator, ws}}, ws + "/computes/c", Delete, false},
		{"operator cannot create", []Assignment{{ComputeOperator, ws}}, ws + "/computes/c", Write, false},
		{"case-insensitive ids", []Assignment{{Reader, "/SUBSCRIPTIONS/s1"}}, ws, Read, true},
		{"no assignment", nil, ws, Read, false},
		{"workspace contributor cannot assign the group's identity", []Assignment{{Contributor, ws}}, identity, AssignIdentity, false},
		{"group contributor assigns its identities", []Assignment{{Contributor, "/subscriptions/s1/resourceGroups/g1"}}, identity, AssignIdentity, true},
		{"identity operator assigns that identity", []Assignment{{ManagedIdentityOperator, identity}}, identity, AssignIdentity, true},
		{"identity operator cannot assign another", []Assignment{{ManagedIdentityOperator, identity}}, identity + "2", AssignIdentity, false},
		{"identity operator cannot read", []Assignment{{ManagedIdentityOperator, identity}}, identity, Read, false},
		{"identity operator cannot write", []Assignment{{ManagedIdentityOperator, "/"}}, ws + "/computes/c", Write, false},
		{"owner manages locks", []Assignment{{Owner, ws}}, ws + "/computes/c/providers/Microsoft.Authorization/locks/l", ManageLocks, true},
		{"contributor cannot manage locks", []Assignment{{Contributor, "/"}}, ws + "/providers/Microsoft.Authorization/locks/l", ManageLocks, false},
		{"compute owner cannot lock its workspace", []Assignment{{Owner, ws + "/computes/c"}}, ws + "/providers/Microsoft.Authorization/locks/l", ManageLocks, false},
		{"reader reads locks", []Assignment{{Reader, ws}}, ws + "/computes/c/providers/Microsoft.Authorization/locks", Read, true},
	}
	for _, c := range cases {
		if got := Allowed(c.as, c.res, c.action); got != c.want {
			t.Errorf("%s: Allowed = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestActionOf(t *testing.T) {
	cases := map[[2]string]Action{
		{"GET", ws + "/computes"}:                                                Read,
		{"POST", ws + "/computes/c/listNodes"}:                                   Read,
		{"POST", ws + "/computes/c/listKeys"}:                                    Secrets,
		{"POST", ws + "/computes/c/nodes/n/simulateEviction"}:                    Evict,
		{"POST", ws + "/jobs/j/cancel"}:                                          Write,
		{"PATCH", ws + "/computes/c"}:                                            Scale,
		{"PATCH", ws}:                                                            Write,
		{"PUT", ws + "/computes/c"}:                                              Write,
		{"DELETE", ws + "/computes/c"}:                                           Delete,
		{"POST", "/subscriptions/s1/providers/P/locations/l/updateQuotas"}:       Write,
		{"PUT", ws + "/providers/Microsoft.Authorization/locks/l"}:               ManageLocks,
		{"DELETE", ws + "/computes/c/providers/microsoft.authorization/locks/l"}: ManageLocks,
		{"GET", ws + "/computes/c/providers/Microsoft.Authorization/locks"}:      Read,
	}
	for in, want := range cases {
		if got := ActionOf(in[0], in[1]); got != want {
			t.Errorf("ActionOf(%s %s) = %s, want %s", in[0], in[1], got, want)
		}
	}
}

func TestOperationName(t *testing.T) {
	cases := map[[2]string]string{
		{"PUT", ws + "/computes/c"}:           "Microsoft.MachineLearningServices/workspaces/computes/write",
		{"DELETE", ws + "/computes/c"}:        "Microsoft.MachineLearningServices/workspaces/computes/delete",
		{"POST", ws + "/computes/c/listKeys"}: "Microsoft.MachineLearningServices/workspaces/computes/listKeys/action",
		{"POST", ws + "/jobs/j/cancel"}:       "Microsoft.MachineLearningServices/workspaces/jobs/cancel/action",
		{"PUT", ws}:                           "Microsoft.MachineLearningServices/workspaces/write",
		{"PUT", ws + "/computes/c/providers/Microsoft.Authorization/locks/l"}: "Microsoft.Authorization/locks/write",
		{"DELETE", ws + "/providers/Microsoft.Authorization/locks/l"}:         "Microsoft.Authorization/locks/delete",
		{"POST", "/cumulus/v1/auth/tokens"}:                                   "Cumulus/cumulus/v1/auth/tokens/action",
	}
	for in, want := range cases {
		if got := OperationName(in[0], in[1]); got != want {
			t.Errorf("OperationName(%s %s) = %s, want %s", in[0], in[1], got, want)
		}
	}
}

func TestCanonicalRole(t *testing.T) {
	for in, want := range map[string]string{"Managed Identity Operator": ManagedIdentityOperator, "contributor": Contributor, "Admin": ""} {
		if got := CanonicalRole(in); got != want {
			t.Errorf("CanonicalRole(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every role that reads may read the metrics, assigned at any scope; the
// identity operator, who reads nothing, may not; nor may no role at all.
func TestMetricsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		as   []Assignment
		want bool
	}{
		{[]Assignment{{Reader, ws}}, true},
		{[]Assignment{{ComputeOperator, ws + "/computes/c"}}, true},
		{[]Assignment{{Contributor, "/subscriptions/s1"}}, true},
		{[]Assignment{{Owner, "/"}}, true},
		{[]Assignment{{ManagedIdentityOperator, "/"}}, false},
		{nil, false},
	} {
		if got := AllowedAnywhere(tc.as, Metrics); got != tc.want {
			t.Errorf("AllowedAnywhere(%v, metrics) = %v, want %v", tc.as, got, tc.want)
		}
	}
}
