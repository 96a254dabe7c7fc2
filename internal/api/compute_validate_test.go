package api_test

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Table-driven tests of every rule in compute_validate.go, names.go,
// validate.go and workspace.go. Each case names the exact ARM error code
// and the target the detail points at.

const (
	tgtAml   = "properties.properties."
	tgtScale = "properties.properties.scaleSettings."
	tgtCred  = "properties.properties.userAccountCredentials"
	tgtIdle  = "properties.properties.idlePolicy."
	defLoc   = "westus2"
	goodKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB2mXG0 user@host"
	subnetOK = "/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.Network/virtualNetworks/vnet1/subnets/default"
	uaiOK    = "/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id1"
)

func vi32(v int32) *int32     { return &v }
func vbool(v bool) *bool      { return &v }
func vf64(v float64) *float64 { return &v }

// valCompute is the smallest valid PUT body.
func valCompute() *api.Compute {
	return &api.Compute{Properties: api.ComputeProperties{ComputeType: api.ComputeTypeAml}}
}

// wantAPIError asserts err is one 400 *api.Error with code and target.
func wantAPIError(t *testing.T, err error, code, target string) *api.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s at %q, got no error", code, target)
	}
	var e *api.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *api.Error, got %T: %v", err, err)
	}
	if e.Status != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", e.Status)
	}
	if e.Code != code || e.Target != target {
		t.Fatalf("got %s at %q (%s), want %s at %q", e.Code, e.Target, e.Message, code, target)
	}
	if e.Message == "" {
		t.Errorf("empty message")
	}
	return e
}

func TestCheckComputeName(t *testing.T) {
	valid := []string{
		"abc", "cpu-cluster", "A1b2", "gpu-a100-x", "abc-", "a-b-c", "ab1-2a", "Cluster-01a",
		"x" + strings.Repeat("y", 23), // 24
		"cluster1", "c-1a", "ABC",
	}
	for _, n := range valid {
		if err := api.CheckComputeName(n); err != nil {
			t.Errorf("CheckComputeName(%q) = %v, want nil", n, err)
		}
	}
	invalid := map[string]string{
		"":                            "must be 3 to 24",
		"ab":                          "must be 3 to 24",
		"x" + strings.Repeat("y", 24): "must be 3 to 24", // 25
		"1abc":                        "must start with a letter",
		"-abc":                        "must start with a letter",
		"_abc":                        "must start with a letter",
		"ab_c":                        "only letters, digits and '-'",
		"ab.c":                        "only letters, digits and '-'",
		"ab c":                        "only letters, digits and '-'",
		"abé":                         "only letters, digits and '-'",
		"ñabc":                        "must start with a letter",
		"cluster-1":                   "may not end with '-' followed by digits",
		"cluster-123":                 "may not end with '-' followed by digits",
		"a-1":                         "may not end with '-' followed by digits",
		"a--12":                       "may not end with '-' followed by digits",
	}
	for n, msg := range invalid {
		err := api.CheckComputeName(n)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("CheckComputeName(%q) = %v, want error containing %q", n, err, msg)
		}
	}
}

func TestCheckWorkspaceName(t *testing.T) {
	for _, n := range []string{"ws1", "1ws", "my_ws-01", "ABC", strings.Repeat("w", 33)} {
		if err := api.CheckWorkspaceName(n); err != nil {
			t.Errorf("CheckWorkspaceName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", "ws", strings.Repeat("w", 34), "_ws", "-ws", "ws.1", "ws 1", "wsé"} {
		if err := api.CheckWorkspaceName(n); err == nil {
			t.Errorf("CheckWorkspaceName(%q) = nil, want error", n)
		}
	}
}

func TestCheckSegment(t *testing.T) {
	for _, s := range []string{"a", "rg.name_(1)-x", "westus2", strings.Repeat("r", 90), "00000000-0000-0000-0000-000000000000"} {
		if err := api.CheckSegment("resource group", s); err != nil {
			t.Errorf("CheckSegment(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", strings.Repeat("r", 91), "a b", "a/b", "a?b", "a%b", "ré"} {
		err := api.CheckSegment("resource group", s)
		if err == nil || !strings.Contains(err.Error(), "resource group") {
			t.Errorf("CheckSegment(%q) = %v, want an error naming the kind", s, err)
		}
	}
}

func TestPrepareComputeRules(t *testing.T) {
	longName := strings.Repeat("k", 513)
	tags := func(n int) map[string]string {
		m := map[string]string{}
		for i := 0; i < n; i++ {
			m["t"+strings.Repeat("x", i)] = "v"
		}
		return m
	}
	cases := []struct {
		name   string
		cname  string // compute name; "" means "cpu-cluster"
		mut    func(c *api.Compute)
		code   string // "" means valid
		target string
		msg    string // substring of the message, optional
	}{
		// name rule
		{name: "name too short", cname: "ab", code: api.CodeInvalidName, target: "name"},
		{name: "name too long", cname: strings.Repeat("a", 25), code: api.CodeInvalidName, target: "name"},
		{name: "name starts with digit", cname: "1cluster", code: api.CodeInvalidName, target: "name"},
		{name: "name with underscore", cname: "cpu_cluster", code: api.CodeInvalidName, target: "name"},
		{name: "name ends with dash digits", cname: "cpu-01", code: api.CodeInvalidName, target: "name"},
		{name: "name 24 chars", cname: strings.Repeat("a", 24)},
		{name: "name 3 chars", cname: "abc"},

		// computeType
		{name: "computeType missing", mut: func(c *api.Compute) { c.Properties.ComputeType = "" }, code: api.CodeValidationError, target: "properties.computeType"},
		{name: "computeType ComputeInstance", mut: func(c *api.Compute) { c.Properties.ComputeType = "ComputeInstance" }, code: api.CodeUnsupported, target: "properties.computeType"},
		{name: "computeType Kubernetes", mut: func(c *api.Compute) { c.Properties.ComputeType = "Kubernetes" }, code: api.CodeUnsupported, target: "properties.computeType"},

		// kubernetes placement (Cumulus extension)
		{name: "kubernetes placement ok", mut: kube(map[string]string{"cloud.google.com/gke-nodepool": "gpu-pool"},
			api.Toleration{Key: "nvidia.com/gpu", Operator: "exists", Effect: "noschedule"})},
		{name: "node selector bad key", mut: kube(map[string]string{"bad key": "x"}), code: api.CodeValidationError, target: tgtAml + "kubernetes.nodeSelector", msg: "bad key"},
		{name: "node selector long value", mut: kube(map[string]string{"pool": strings.Repeat("v", 64)}), code: api.CodeValidationError, target: tgtAml + "kubernetes.nodeSelector"},
		{name: "toleration bad operator", mut: kube(nil, api.Toleration{Key: "k", Operator: "In"}), code: api.CodeValidationError, target: tgtAml + "kubernetes.tolerations[0].operator"},
		{name: "toleration bad effect", mut: kube(nil, api.Toleration{Key: "k", Effect: "Never"}), code: api.CodeValidationError, target: tgtAml + "kubernetes.tolerations[0].effect"},
		{name: "toleration no key needs Exists", mut: kube(nil, api.Toleration{Value: "v"}), code: api.CodeValidationError, target: tgtAml + "kubernetes.tolerations[0].key"},
		{name: "toleration Exists with value", mut: kube(nil, api.Toleration{Key: "k", Operator: "Exists", Value: "v"}), code: api.CodeValidationError, target: tgtAml + "kubernetes.tolerations[0].value"},
		{name: "tolerationSeconds without NoExecute", mut: kube(nil, api.Toleration{Key: "k", Effect: "NoSchedule", TolerationSeconds: new(int64)}), code: api.CodeValidationError, target: tgtAml + "kubernetes.tolerations[0].tolerationSeconds"},

		// idle policy (Cumulus extension)
		{name: "idlePolicy Fixed", mut: idlePolicy("Fixed", nil)},
		{name: "idlePolicy adaptive any case", mut: idlePolicy("aDaPtIvE", nil)},
		{name: "idlePolicy Adaptive weight 0", mut: idlePolicy("Adaptive", vf64(0))},
		{name: "idlePolicy Adaptive weight 1000", mut: idlePolicy("Adaptive", vf64(1000))},
		{name: "idlePolicy no kind", mut: idlePolicy("", nil), code: api.CodeValidationError, target: tgtIdle + "kind", msg: "Fixed or Adaptive"},
		{name: "idlePolicy bad kind", mut: idlePolicy("Smart", nil), code: api.CodeValidationError, target: tgtIdle + "kind", msg: `"Smart" is not one of Fixed, Adaptive`},
		{name: "idlePolicy weight with Fixed", mut: idlePolicy("Fixed", vf64(2)), code: api.CodeValidationError, target: tgtIdle + "delayWeight", msg: "only to kind Adaptive"},
		{name: "idlePolicy negative weight", mut: idlePolicy("Adaptive", vf64(-0.5)), code: api.CodeValidationError, target: tgtIdle + "delayWeight", msg: "negative"},
		{name: "idlePolicy weight above 1000", mut: idlePolicy("Adaptive", vf64(1000.5)), code: api.CodeValidationError, target: tgtIdle + "delayWeight", msg: "at most 1000"},
		{name: "idlePolicy weight NaN", mut: idlePolicy("Adaptive", vf64(math.NaN())), code: api.CodeValidationError, target: tgtIdle + "delayWeight", msg: "finite"},
		{name: "idlePolicy weight +Inf", mut: idlePolicy("Adaptive", vf64(math.Inf(1))), code: api.CodeValidationError, target: tgtIdle + "delayWeight", msg: "finite"},

		// locations and description
		{name: "bad location", mut: func(c *api.Compute) { c.Location = "west us" }, code: api.CodeValidationError, target: "location"},
		{name: "bad computeLocation", mut: func(c *api.Compute) { c.Properties.ComputeLocation = "a/b" }, code: api.CodeValidationError, target: "properties.computeLocation"},
		{name: "description too long", mut: func(c *api.Compute) { c.Properties.Description = strings.Repeat("d", 4097) }, code: api.CodeValidationError, target: "properties.description"},
		{name: "description 4096", mut: func(c *api.Compute) { c.Properties.Description = strings.Repeat("d", 4096) }},

		// scale settings
		{name: "min > max", mut: func(c *api.Compute) {
			c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: vi32(5), MaxNodeCount: vi32(2)}
		}, code: api.CodeValidationError, target: tgtScale + "minNodeCount", msg: "may not exceed"},
		{name: "max < 1", mut: func(c *api.Compute) { c.Aml().ScaleSettings = &api.ScaleSettings{MaxNodeCount: vi32(0)} }, code: api.CodeValidationError, target: tgtScale + "maxNodeCount"},
		{name: "max negative", mut: func(c *api.Compute) { c.Aml().ScaleSettings = &api.ScaleSettings{MaxNodeCount: vi32(-3)} }, code: api.CodeValidationError, target: tgtScale + "maxNodeCount"},
		{name: "max > 10000", mut: func(c *api.Compute) { c.Aml().ScaleSettings = &api.ScaleSettings{MaxNodeCount: vi32(10001)} }, code: api.CodeValidationError, target: tgtScale + "maxNodeCount"},
		{name: "max 10000", mut: func(c *api.Compute) { c.Aml().ScaleSettings = &api.ScaleSettings{MaxNodeCount: vi32(10000)} }},
		{name: "max 1 min 1", mut: func(c *api.Compute) {
			c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: vi32(1), MaxNodeCount: vi32(1)}
		}},
		{name: "negative min", mut: func(c *api.Compute) {
			c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: vi32(-1), MaxNodeCount: vi32(2)}
		}, code: api.CodeValidationError, target: tgtScale + "minNodeCount", msg: "negative"},
		{name: "scaleSettings without max", mut: func(c *api.Compute) { c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: vi32(0)} }, code: api.CodeValidationError, target: tgtScale + "maxNodeCount", msg: "required"},

		// vm size and priority
		{name: "unknown vmSize suggests", mut: func(c *api.Compute) { c.Aml().VMSize = "Standard_DS3" }, code: api.CodeValidationError, target: tgtAml + "vmSize", msg: "Standard_DS3_v2"},
		{name: "unknown vmSize", mut: func(c *api.Compute) { c.Aml().VMSize = "Standard_Bogus_v9" }, code: api.CodeValidationError, target: tgtAml + "vmSize", msg: "did you mean"},
		{name: "retired vmSize names its successor", mut: func(c *api.Compute) { c.Aml().VMSize = "standard_nc6" }, code: api.CodeValidationError, target: tgtAml + "vmSize",
			msg: "vmSize Standard_NC6 is retired: Azure retired the NC-series (NVIDIA K80) on 2023-09-06 and creates no cluster of it; use its successor Standard_NC4as_T4_v3 (4 vCPUs, 28 GB, 1 T4 GPU)"},
		{name: "retired multi-GPU vmSize keeps its GPU count", mut: func(c *api.Compute) { c.Aml().VMSize = "Standard_NC24rs_v2" }, code: api.CodeValidationError, target: tgtAml + "vmSize", msg: "Standard_NC24s_v3 (24 vCPUs, 448 GB, 4 V100 GPUs)"},
		{name: "low priority on H100", mut: func(c *api.Compute) {
			c.Aml().VMSize, c.Aml().VMPriority = "Standard_NC40ads_H100_v5", api.PriorityLowPriority
		}, code: api.CodeValidationError, target: tgtAml + "vmPriority", msg: "low priority"},
		{name: "dedicated H100", mut: func(c *api.Compute) { c.Aml().VMSize = "Standard_NC40ads_H100_v5" }},
		{name: "low priority on DS3", mut: func(c *api.Compute) { c.Aml().VMPriority = api.PriorityLowPriority }},
		{name: "bad vmPriority", mut: func(c *api.Compute) { c.Aml().VMPriority = "Spot" }, code: api.CodeValidationError, target: tgtAml + "vmPriority"},

		// durations
		{name: "idle 5 minutes", mut: idle("5 minutes"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle P1Y", mut: idle("P1Y"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle P1M", mut: idle("P1M"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle PT", mut: idle("PT"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle PTXS", mut: idle("PTXS"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle 120", mut: idle("120"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle > 7 days", mut: idle("P7DT1S"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown", msg: "7 days"},
		{name: "idle 8 days", mut: idle("P8D"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle 169 hours", mut: idle("PT169H"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "idle exactly 7 days", mut: idle("P7D")},
		{name: "idle one week", mut: idle("P1W")},
		{name: "idle PT0S", mut: idle("PT0S")},
		{name: "idle PT5M", mut: idle("PT5M")},
		{name: "idle PT1S", mut: idle("PT1S")},
		{name: "idle under a second", mut: idle("PT0.5S"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown", msg: "at least 1 second"},
		{name: "idle negative", mut: idle("-PT5M"), code: api.CodeValidationError, target: tgtScale + "nodeIdleTimeBeforeScaleDown"},
		{name: "grace PT1S", mut: grace("PT1S")},
		{name: "grace PT1H", mut: grace("PT1H")},
		{name: "grace PT0S", mut: grace("PT0S"), code: api.CodeValidationError, target: tgtAml + "preemptionGracePeriod", msg: "between 1 second and 1 hour"},
		{name: "grace under a second", mut: grace("PT0.2S"), code: api.CodeValidationError, target: tgtAml + "preemptionGracePeriod"},
		{name: "grace over an hour", mut: grace("PT1H1S"), code: api.CodeValidationError, target: tgtAml + "preemptionGracePeriod"},
		{name: "grace negative", mut: grace("-PT30S"), code: api.CodeValidationError, target: tgtAml + "preemptionGracePeriod"},

		// OS
		{name: "osType Windows", mut: func(c *api.Compute) { c.Aml().OSType = "Windows" }, code: api.CodeValidationError, target: tgtAml + "osType", msg: "Linux"},
		{name: "osType other", mut: func(c *api.Compute) { c.Aml().OSType = "MacOS" }, code: api.CodeValidationError, target: tgtAml + "osType"},
		{name: "virtualMachineImage", mut: func(c *api.Compute) { c.Aml().VirtualMachineImage = &api.ResourceRef{ID: "/img"} }, code: api.CodeValidationError, target: tgtAml + "virtualMachineImage"},

		// remote login
		{name: "remoteLogin Enabled", mut: remote("Enabled")},
		{name: "remoteLogin Disabled", mut: remote("Disabled")},
		{name: "remoteLogin NotSpecified", mut: remote("NotSpecified")},
		{name: "remoteLogin On", mut: remote("On"), code: api.CodeValidationError, target: tgtAml + "remoteLoginPortPublicAccess"},
		{name: "remoteLogin true", mut: remote("true"), code: api.CodeValidationError, target: tgtAml + "remoteLoginPortPublicAccess"},

		// subnet
		{name: "subnet ok", mut: subnet(subnetOK)},
		{name: "subnet bare name", mut: subnet("default"), code: api.CodeValidationError, target: tgtAml + "subnet.id"},
		{name: "subnet empty", mut: subnet(""), code: api.CodeValidationError, target: tgtAml + "subnet.id"},
		{name: "subnet is a vnet", mut: subnet("/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.Network/virtualNetworks/vnet1"), code: api.CodeValidationError, target: tgtAml + "subnet.id"},
		{name: "subnet wrong provider", mut: subnet("/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.Compute/virtualNetworks/vnet1/subnets/default"), code: api.CodeValidationError, target: tgtAml + "subnet.id"},
		{name: "subnet empty name", mut: subnet("/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.Network/virtualNetworks/vnet1/subnets/"), code: api.CodeValidationError, target: tgtAml + "subnet.id"},

		// identity
		{name: "identity None", mut: ident("None", nil)},
		{name: "identity SystemAssigned", mut: ident("SystemAssigned", nil)},
		{name: "identity UserAssigned", mut: ident("UserAssigned", []string{uaiOK})},
		{name: "identity both", mut: ident("SystemAssigned,UserAssigned", []string{uaiOK})},
		{name: "identity System with user ids", mut: ident("SystemAssigned", []string{uaiOK}), code: api.CodeValidationError, target: "identity.userAssignedIdentities"},
		{name: "identity None with user ids", mut: ident("None", []string{uaiOK}), code: api.CodeValidationError, target: "identity.userAssignedIdentities"},
		{name: "identity User without ids", mut: ident("UserAssigned", nil), code: api.CodeValidationError, target: "identity.userAssignedIdentities"},
		{name: "identity both without ids", mut: ident("SystemAssigned,UserAssigned", nil), code: api.CodeValidationError, target: "identity.userAssignedIdentities"},
		{name: "identity bad user id", mut: ident("UserAssigned", []string{"/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.Storage/storageAccounts/x"}), code: api.CodeValidationError, target: "identity.userAssignedIdentities"},
		{name: "identity bare user id", mut: ident("UserAssigned", []string{"id1"}), code: api.CodeValidationError, target: "identity.userAssignedIdentities"},
		{name: "identity bad type", mut: ident("Bogus", nil), code: api.CodeValidationError, target: "identity.type"},
		{name: "identity empty type", mut: ident("", nil), code: api.CodeValidationError, target: "identity.type"},

		// credentials
		{name: "creds key", mut: creds("azureuser", goodKey, "")},
		{name: "creds password", mut: creds("azureuser", "", "Str0ngPassw0rd!")},
		{name: "creds both", mut: creds("_svc-user1", goodKey, "Str0ngPassw0rd!")},
		{name: "creds ecdsa", mut: creds("azureuser", "ecdsa-sha2-nistp256 AAAAE2VjZHNh", "")},
		{name: "creds user 32", mut: creds(strings.Repeat("u", 32), goodKey, "")},
		{name: "creds no user", mut: creds("", goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName", msg: "required"},
		{name: "creds user 33", mut: creds(strings.Repeat("u", 33), goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName"},
		{name: "creds user digit first", mut: creds("1user", goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName"},
		{name: "creds user dash first", mut: creds("-user", goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName"},
		{name: "creds user space", mut: creds("az user", goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName"},
		{name: "creds user root", mut: creds("root", goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName", msg: "reserved"},
		{name: "creds user Admin", mut: creds("Admin", goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName", msg: "reserved"},
		{name: "creds user administrator", mut: creds("administrator", goodKey, ""), code: api.CodeValidationError, target: tgtCred + ".adminUserName", msg: "reserved"},
		{name: "creds neither key nor password", mut: creds("azureuser", "", ""), code: api.CodeValidationError, target: tgtCred},
		{name: "creds bad key", mut: creds("azureuser", "not-a-key", ""), code: api.CodeValidationError, target: tgtCred + ".adminUserSshPublicKey"},
		{name: "creds key one field", mut: creds("azureuser", "ssh-rsa", ""), code: api.CodeValidationError, target: tgtCred + ".adminUserSshPublicKey"},
		{name: "creds key wrong prefix", mut: creds("azureuser", "rsa AAAAB3Nza", ""), code: api.CodeValidationError, target: tgtCred + ".adminUserSshPublicKey"},
		{name: "creds password 11", mut: creds("azureuser", "", strings.Repeat("p", 11)), code: api.CodeValidationError, target: tgtCred + ".adminUserPassword"},
		{name: "creds password 12", mut: creds("azureuser", "", strings.Repeat("p", 12))},
		{name: "creds password 123", mut: creds("azureuser", "", strings.Repeat("p", 123))},
		{name: "creds password 124", mut: creds("azureuser", "", strings.Repeat("p", 124)), code: api.CodeValidationError, target: tgtCred + ".adminUserPassword"},

		// tags
		{name: "tags 50", mut: func(c *api.Compute) { c.Tags = tags(50) }},
		{name: "tags 51", mut: func(c *api.Compute) { c.Tags = tags(51) }, code: api.CodeValidationError, target: "tags", msg: "at most 50"},
		{name: "tag empty name", mut: func(c *api.Compute) { c.Tags = map[string]string{"": "v"} }, code: api.CodeValidationError, target: "tags"},
		{name: "tag name 512", mut: func(c *api.Compute) { c.Tags = map[string]string{longName[:512]: "v"} }},
		{name: "tag name 513", mut: func(c *api.Compute) { c.Tags = map[string]string{longName: "v"} }, code: api.CodeValidationError, target: "tags"},
		{name: "tag name <", mut: func(c *api.Compute) { c.Tags = map[string]string{"a<b": "v"} }, code: api.CodeValidationError, target: "tags"},
		{name: "tag name /", mut: func(c *api.Compute) { c.Tags = map[string]string{"a/b": "v"} }, code: api.CodeValidationError, target: "tags"},
		{name: "tag name ?", mut: func(c *api.Compute) { c.Tags = map[string]string{"a?": "v"} }, code: api.CodeValidationError, target: "tags"},
		{name: "tag name %", mut: func(c *api.Compute) { c.Tags = map[string]string{"100%": "v"} }, code: api.CodeValidationError, target: "tags"},
		{name: "tag value 256", mut: func(c *api.Compute) { c.Tags = map[string]string{"k": strings.Repeat("v", 256)} }},
		{name: "tag value 257", mut: func(c *api.Compute) { c.Tags = map[string]string{"k": strings.Repeat("v", 257)} }, code: api.CodeValidationError, target: "tags"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valCompute()
			if tc.mut != nil {
				tc.mut(c)
			}
			name := tc.cname
			if name == "" {
				name = "cpu-cluster"
			}
			err := api.PrepareCompute(c, name, nil, defLoc)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			e := wantAPIError(t, err, tc.code, tc.target)
			if tc.msg != "" && !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", e.Message, tc.msg)
			}
		})
	}
}

func idle(d string) func(*api.Compute) {
	return func(c *api.Compute) {
		c.Aml().ScaleSettings = &api.ScaleSettings{MaxNodeCount: vi32(2), NodeIdleTimeBeforeScaleDown: d}
	}
}

func grace(d string) func(*api.Compute) {
	return func(c *api.Compute) { c.Aml().PreemptionGracePeriod = d }
}

func remote(v string) func(*api.Compute) {
	return func(c *api.Compute) { c.Aml().RemoteLoginPortPublicAccess = v }
}

func subnet(id string) func(*api.Compute) {
	return func(c *api.Compute) { c.Aml().Subnet = &api.ResourceRef{ID: id} }
}

func ident(typ string, users []string) func(*api.Compute) {
	return func(c *api.Compute) {
		c.Identity = &api.Identity{Type: typ}
		for _, u := range users {
			if c.Identity.UserAssignedIdentities == nil {
				c.Identity.UserAssignedIdentities = map[string]*api.UserAssignedIdentity{}
			}
			c.Identity.UserAssignedIdentities[u] = &api.UserAssignedIdentity{}
		}
	}
}

func creds(user, key, pw string) func(*api.Compute) {
	return func(c *api.Compute) {
		c.Aml().UserAccountCredentials = &api.UserAccountCredentials{AdminUserName: user, AdminUserSSHPublicKey: key, AdminUserPassword: pw}
	}
}

func TestPrepareComputeDefaults(t *testing.T) {
	c := valCompute()
	if err := api.PrepareCompute(c, "cpu-cluster", nil, defLoc); err != nil {
		t.Fatal(err)
	}
	a := c.Aml()
	if a.VMSize != "Standard_DS3_v2" {
		t.Errorf("vmSize = %q", a.VMSize)
	}
	if a.VMPriority != "Dedicated" {
		t.Errorf("vmPriority = %q", a.VMPriority)
	}
	s := a.ScaleSettings
	if s == nil || s.MinNodeCount == nil || *s.MinNodeCount != 0 || s.MaxNodeCount == nil || *s.MaxNodeCount != 4 {
		t.Errorf("scaleSettings = %+v, want min 0 max 4", s)
	}
	if s.NodeIdleTimeBeforeScaleDown != "PT120S" {
		t.Errorf("idle = %q", s.NodeIdleTimeBeforeScaleDown)
	}
	if a.OSType != "Linux" {
		t.Errorf("osType = %q", a.OSType)
	}
	if a.RemoteLoginPortPublicAccess != "NotSpecified" {
		t.Errorf("remoteLoginPortPublicAccess = %q", a.RemoteLoginPortPublicAccess)
	}
	if a.EnableNodePublicIP == nil || !*a.EnableNodePublicIP {
		t.Errorf("enableNodePublicIp = %v", a.EnableNodePublicIP)
	}
	if c.Location != defLoc || c.Properties.ComputeLocation != defLoc {
		t.Errorf("location = %q, computeLocation = %q", c.Location, c.Properties.ComputeLocation)
	}
	min, max, idleD := c.Scale()
	if min != 0 || max != 4 || idleD.Seconds() != 120 {
		t.Errorf("Scale() = %d %d %v", min, max, idleD)
	}

	// Given scale settings keep their values; missing parts get defaults.
	c = valCompute()
	c.Location = "eastus"
	c.Aml().ScaleSettings = &api.ScaleSettings{MaxNodeCount: vi32(2)}
	c.Aml().EnableNodePublicIP = vbool(false)
	if err := api.PrepareCompute(c, "cpu-cluster", nil, defLoc); err != nil {
		t.Fatal(err)
	}
	s = c.Aml().ScaleSettings
	if *s.MaxNodeCount != 2 || *s.MinNodeCount != 0 || s.NodeIdleTimeBeforeScaleDown != "PT120S" {
		t.Errorf("scaleSettings = %+v", s)
	}
	if *c.Aml().EnableNodePublicIP {
		t.Errorf("enableNodePublicIp false was overwritten")
	}
	if c.Properties.ComputeLocation != "eastus" {
		t.Errorf("computeLocation = %q, want the resource location", c.Properties.ComputeLocation)
	}
}

func TestPrepareComputeNormalises(t *testing.T) {
	c := valCompute()
	a := c.Aml()
	a.VMSize = "standard_nc6S_V3"
	a.VMPriority = "lowpriority"
	a.OSType = "linux"
	a.RemoteLoginPortPublicAccess = "enabled"
	if err := api.PrepareCompute(c, "gpu", nil, defLoc); err != nil {
		t.Fatal(err)
	}
	if a.VMSize != "Standard_NC6s_v3" || a.VMPriority != "LowPriority" || a.OSType != "Linux" || a.RemoteLoginPortPublicAccess != "Enabled" {
		t.Errorf("not normalised: size %q priority %q os %q remote %q", a.VMSize, a.VMPriority, a.OSType, a.RemoteLoginPortPublicAccess)
	}
}

func TestPrepareComputeSeveralProblems(t *testing.T) {
	c := valCompute()
	c.Aml().ScaleSettings = &api.ScaleSettings{MaxNodeCount: vi32(0)}
	c.Aml().VMSize = "nope"
	err := api.PrepareCompute(c, "1bad", nil, defLoc)
	var e *api.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v", err)
	}
	if e.Status != 400 || e.Code != api.CodeInvalidName || e.Target != "name" {
		t.Errorf("top-level error = %d %s %q, want the first problem", e.Status, e.Code, e.Target)
	}
	if len(e.Details) != 3 {
		t.Fatalf("details = %d, want 3: %+v", len(e.Details), e.Details)
	}
	want := map[string]bool{"name": true, tgtAml + "vmSize": true, tgtScale + "maxNodeCount": true}
	for _, d := range e.Details {
		if !want[d.Target] {
			t.Errorf("unexpected detail target %q", d.Target)
		}
		if d.Code == "" || d.Message == "" {
			t.Errorf("detail without code or message: %+v", d)
		}
	}
	if !strings.Contains(e.Message, "2 more") {
		t.Errorf("message %q does not say how many more", e.Message)
	}
}

// prepared returns a stored-like compute made by PrepareCompute.
func prepared(t *testing.T, mut func(*api.Compute)) *api.Compute {
	t.Helper()
	c := valCompute()
	if mut != nil {
		mut(c)
	}
	if err := api.PrepareCompute(c, "cpu-cluster", nil, defLoc); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPrepareComputeImmutable(t *testing.T) {
	cases := []struct {
		name   string
		old    func(*api.Compute)
		mut    func(*api.Compute)
		target string // "" means allowed
	}{
		{name: "vmSize", mut: func(c *api.Compute) { c.Aml().VMSize = "Standard_DS4_v2" }, target: tgtAml + "vmSize"},
		{name: "vmSize default differs", old: func(c *api.Compute) { c.Aml().VMSize = "Standard_D2_v2" }, target: tgtAml + "vmSize"},
		{name: "vmSize case only", mut: func(c *api.Compute) { c.Aml().VMSize = "STANDARD_DS3_V2" }},
		{name: "vmPriority", mut: func(c *api.Compute) { c.Aml().VMPriority = api.PriorityLowPriority }, target: tgtAml + "vmPriority"},
		{name: "osType", old: func(c *api.Compute) { c.Aml().OSType = "Windows" }, target: tgtAml + "osType"},
		{name: "subnet added", mut: subnet(subnetOK), target: tgtAml + "subnet"},
		{name: "subnet removed", old: subnet(subnetOK), target: tgtAml + "subnet"},
		{name: "subnet same", old: subnet(subnetOK), mut: subnet(strings.ToUpper(subnetOK))},
		{name: "computeLocation", mut: func(c *api.Compute) { c.Properties.ComputeLocation = "eastus" }, target: "properties.computeLocation"},
		{name: "description", mut: func(c *api.Compute) { c.Properties.Description = "new" }},
		{name: "tags", mut: func(c *api.Compute) { c.Tags = map[string]string{"team": "ml"} }},
		{name: "identity", mut: ident("SystemAssigned", nil)},
		{name: "scale", mut: func(c *api.Compute) {
			c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: vi32(1), MaxNodeCount: vi32(8), NodeIdleTimeBeforeScaleDown: "PT10M"}
		}},
		{name: "idle policy set", mut: idlePolicy("Adaptive", vf64(1))},
		{name: "idle policy dropped", old: idlePolicy("Adaptive", nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var old *api.Compute
			if tc.name == "osType" {
				// A Windows cluster cannot be made through validation;
				// build the stored record by hand.
				old = prepared(t, nil)
				tc.old(old)
			} else {
				old = prepared(t, tc.old)
			}
			c := valCompute()
			if tc.mut != nil {
				tc.mut(c)
			}
			err := api.PrepareCompute(c, "cpu-cluster", old, defLoc)
			if tc.target == "" {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				return
			}
			wantAPIError(t, err, api.CodeImmutable, tc.target)
		})
	}
}

func TestApplyUpdate(t *testing.T) {
	t.Run("nil", func(t *testing.T) {
		c := prepared(t, nil)
		wantAPIError(t, api.ApplyUpdate(c, nil), api.CodeValidationError, "")
	})
	t.Run("partial keeps the rest", func(t *testing.T) {
		c := prepared(t, nil)
		if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{ScaleSettings: &api.ScaleSettings{MaxNodeCount: vi32(9)}}); err != nil {
			t.Fatal(err)
		}
		s := c.Aml().ScaleSettings
		if *s.MaxNodeCount != 9 || *s.MinNodeCount != 0 || s.NodeIdleTimeBeforeScaleDown != "PT120S" {
			t.Errorf("scale = %+v", s)
		}
		if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{ScaleSettings: &api.ScaleSettings{MinNodeCount: vi32(2), NodeIdleTimeBeforeScaleDown: "PT5M"}}); err != nil {
			t.Fatal(err)
		}
		if *s.MaxNodeCount != 9 || *s.MinNodeCount != 2 || s.NodeIdleTimeBeforeScaleDown != "PT5M" {
			t.Errorf("scale = %+v", s)
		}
	})
	t.Run("min above stored max", func(t *testing.T) {
		c := prepared(t, nil)
		wantAPIError(t, api.ApplyUpdate(c, &api.ClusterUpdateProperties{ScaleSettings: &api.ScaleSettings{MinNodeCount: vi32(5)}}), api.CodeValidationError, tgtScale+"minNodeCount")
	})
	t.Run("max zero", func(t *testing.T) {
		c := prepared(t, nil)
		wantAPIError(t, api.ApplyUpdate(c, &api.ClusterUpdateProperties{ScaleSettings: &api.ScaleSettings{MaxNodeCount: vi32(0)}}), api.CodeValidationError, tgtScale+"maxNodeCount")
	})
	t.Run("bad idle", func(t *testing.T) {
		c := prepared(t, nil)
		wantAPIError(t, api.ApplyUpdate(c, &api.ClusterUpdateProperties{ScaleSettings: &api.ScaleSettings{NodeIdleTimeBeforeScaleDown: "P1Y"}}), api.CodeValidationError, tgtScale+"nodeIdleTimeBeforeScaleDown")
	})
	t.Run("no stored scale settings", func(t *testing.T) {
		c := valCompute()
		if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{ScaleSettings: &api.ScaleSettings{MaxNodeCount: vi32(3)}}); err != nil {
			t.Fatal(err)
		}
		if s := c.Aml().ScaleSettings; *s.MaxNodeCount != 3 || *s.MinNodeCount != 0 {
			t.Errorf("scale = %+v", s)
		}
	})
}

func TestRedactedDropsPasswordOnly(t *testing.T) {
	c := prepared(t, creds("azureuser", goodKey, "Str0ngPassw0rd!"))
	r := c.Redacted()
	if r.Aml().UserAccountCredentials.AdminUserPassword != "" {
		t.Error("password kept")
	}
	if r.Aml().UserAccountCredentials.AdminUserName != "azureuser" || r.Aml().UserAccountCredentials.AdminUserSSHPublicKey != goodKey {
		t.Error("user name or key lost")
	}
	if c.Aml().UserAccountCredentials.AdminUserPassword != "Str0ngPassw0rd!" {
		t.Error("Redacted changed the original")
	}
}

func TestPrepareWorkspace(t *testing.T) {
	sc := api.Scope{Subscription: "s1", ResourceGroup: "rg1", Workspace: "ws1"}
	w := api.Workspace{}
	if err := api.PrepareWorkspace(&w, sc, defLoc); err != nil {
		t.Fatal(err)
	}
	if w.ID != "/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.MachineLearningServices/workspaces/ws1" ||
		w.Name != "ws1" || w.Type != "Microsoft.MachineLearningServices/workspaces" || w.Location != defLoc ||
		w.Properties.ProvisioningState != "Succeeded" {
		t.Errorf("workspace = %+v", w)
	}

	cases := []struct {
		name   string
		ws     string
		mut    func(*api.Workspace)
		code   string
		target string
	}{
		{name: "short name", ws: "ws", code: api.CodeInvalidName, target: "name"},
		{name: "long name", ws: strings.Repeat("w", 34), code: api.CodeInvalidName, target: "name"},
		{name: "bad first", ws: "_ws", code: api.CodeInvalidName, target: "name"},
		{name: "bad char", ws: "w.s", code: api.CodeInvalidName, target: "name"},
		{name: "bad location", ws: "ws1", mut: func(w *api.Workspace) { w.Location = "west us" }, code: api.CodeValidationError, target: "location"},
		{name: "bad tag", ws: "ws1", mut: func(w *api.Workspace) { w.Tags = map[string]string{"a>b": ""} }, code: api.CodeValidationError, target: "tags"},
		{name: "bad identity", ws: "ws1", mut: func(w *api.Workspace) { w.Identity = &api.Identity{Type: "Nope"} }, code: api.CodeValidationError, target: "identity.type"},
		{name: "valid identity", ws: "ws1", mut: func(w *api.Workspace) { w.Identity = &api.Identity{Type: "SystemAssigned"} }},
		{name: "underscore name", ws: "my_ws-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := api.Workspace{}
			if tc.mut != nil {
				tc.mut(&w)
			}
			s := sc
			s.Workspace = tc.ws
			err := api.PrepareWorkspace(&w, s, defLoc)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantAPIError(t, err, tc.code, tc.target)
		})
	}
}

func TestErrWorkspaceHasComputes(t *testing.T) {
	e := api.ErrWorkspaceHasComputes("ws1", 3)
	if e.Status != http.StatusConflict || e.Code != api.CodeConflict || !strings.Contains(e.Message, "3 compute") {
		t.Errorf("got %+v", e)
	}
}

func TestAsError(t *testing.T) {
	if e := api.AsError(errors.New("sql: secret path /var/x")); e.Status != 500 || e.Code != api.CodeInternal || strings.Contains(e.Message, "/var/x") {
		t.Errorf("plain error: %+v", e)
	}
	if e := api.AsError(nil); e.Status != 500 {
		t.Errorf("nil: %+v", e)
	}
	wrapped := errors.Join(errors.New("ctx"), &api.Error{Code: "X", Message: "m"})
	if e := api.AsError(wrapped); e.Status != 400 || e.Code != "X" {
		t.Errorf("status-less error: %+v", e)
	}
	nf := api.NotFound("gone %d", 1)
	if e := api.AsError(nf); e != nf || e.Status != 404 || e.Message != "gone 1" {
		t.Errorf("not found: %+v", e)
	}
	var v api.Validation
	if v.Err() != nil {
		t.Error("empty validation is an error")
	}
}

func TestParseComputeID(t *testing.T) {
	def := api.Scope{Subscription: "s", ResourceGroup: "g", Workspace: "w"}
	id := def.ComputeID("c1")
	for _, in := range []string{"c1", "azureml:c1", id, "azureml:" + id} {
		sc, name, err := api.ParseComputeID(in, api.Scope{Subscription: "s", ResourceGroup: "g", Workspace: "w"})
		if err != nil || sc != def || name != "c1" {
			t.Errorf("ParseComputeID(%q) = %+v %q %v", in, sc, name, err)
		}
	}
	for _, in := range []string{"", "azureml:", "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/jobs/j",
		"/subscriptions/s/resourceGroups/g/providers/Other/workspaces/w/computes/c", "a/b"} {
		if _, _, err := api.ParseComputeID(in, def); err == nil {
			t.Errorf("ParseComputeID(%q) = nil error", in)
		}
	}
}

// TestPrepareComputeUpdateOnlyMutableFields: on an existing compute only
// description, tags, identity, scale settings, remote login and the admin
// credentials may change; every other settable field is refused with
// PropertyChangeNotAllowed.
func TestPrepareComputeUpdateOnlyMutableFields(t *testing.T) {
	refused := map[string]func(*api.Compute){
		"location":           func(c *api.Compute) { c.Location, c.Properties.ComputeLocation = "eastus", defLoc },
		"enableNodePublicIp": func(c *api.Compute) { c.Aml().EnableNodePublicIP = vbool(false) },
		"isolatedNetwork":    func(c *api.Compute) { c.Aml().IsolatedNetwork = vbool(true) },
		"disableLocalAuth":   func(c *api.Compute) { c.Properties.DisableLocalAuth = vbool(true) },
	}
	for field, mut := range refused {
		old := prepared(t, nil)
		c := valCompute()
		mut(c)
		err := api.PrepareCompute(c, "cpu-cluster", old, defLoc)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeImmutable {
			t.Errorf("%s: %v, want PropertyChangeNotAllowed", field, err)
		}
	}
	allowed := map[string]func(*api.Compute){
		"remoteLoginPortPublicAccess": remote("Enabled"),
		"userAccountCredentials":      creds("azureuser", goodKey, ""),
	}
	for field, mut := range allowed {
		old := prepared(t, nil)
		c := valCompute()
		mut(c)
		if err := api.PrepareCompute(c, "cpu-cluster", old, defLoc); err != nil {
			t.Errorf("%s: %v, want the change accepted", field, err)
		}
	}
}

func kube(selector map[string]string, tolerations ...api.Toleration) func(*api.Compute) {
	return func(c *api.Compute) {
		c.Aml().Kubernetes = &api.KubernetesPlacement{NodeSelector: selector, Tolerations: tolerations}
	}
}

func TestPrepareComputeNormalisesTolerations(t *testing.T) {
	c := valCompute()
	kube(nil, api.Toleration{Key: "nvidia.com/gpu", Operator: "exists", Effect: "noschedule"}, api.Toleration{Key: "k", Value: "v"})(c)
	if err := api.PrepareCompute(c, "cpu-cluster", nil, defLoc); err != nil {
		t.Fatal(err)
	}
	ts := c.Aml().Kubernetes.Tolerations
	if ts[0].Operator != "Exists" || ts[0].Effect != "NoSchedule" || ts[1].Operator != "Equal" {
		t.Errorf("tolerations %+v; want Kubernetes spellings and Equal by default", ts)
	}
}

func idlePolicy(kind string, weight *float64) func(*api.Compute) {
	return func(c *api.Compute) { c.Aml().IdlePolicy = &api.IdlePolicy{Kind: kind, DelayWeight: weight} }
}

// TestIdlePolicyNormalised: the kind comes back in the API's spelling, an
// adaptive policy gets the default delay weight, absent stays absent (an
// Azure client sees nothing new), and the JSON round-trips.
func TestIdlePolicyNormalised(t *testing.T) {
	c := prepared(t, idlePolicy("adaptive", nil))
	p := c.Aml().IdlePolicy
	if p.Kind != api.IdlePolicyAdaptive || p.DelayWeight == nil || *p.DelayWeight != api.DefaultDelayWeight {
		t.Errorf("idle policy %+v; want Adaptive with the default delay weight", p)
	}
	if w, ok := c.AdaptiveIdle(); !ok || w != api.DefaultDelayWeight {
		t.Errorf("AdaptiveIdle() = %v, %v", w, ok)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"idlePolicy":{"kind":"Adaptive","delayWeight":3.25}`) {
		t.Errorf("JSON %s; want the idle policy next to scaleSettings", b)
	}
	var back api.Compute
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if w, ok := back.AdaptiveIdle(); !ok || w != 3.25 {
		t.Errorf("round trip lost the policy: %+v", back.Aml().IdlePolicy)
	}

	c = prepared(t, idlePolicy("FIXED", nil))
	if p := c.Aml().IdlePolicy; p.Kind != api.IdlePolicyFixed || p.DelayWeight != nil {
		t.Errorf("idle policy %+v; want Fixed without a weight", p)
	}
	if _, ok := c.AdaptiveIdle(); ok {
		t.Error("a Fixed policy reads as adaptive")
	}
	c = prepared(t, nil)
	if c.Aml().IdlePolicy != nil {
		t.Errorf("idle policy %+v filled in; want it absent", c.Aml().IdlePolicy)
	}
	if b, _ := json.Marshal(c); strings.Contains(string(b), "idlePolicy") {
		t.Errorf("JSON %s mentions idlePolicy though none was given", b)
	}
}

func TestApplyUpdateIdlePolicy(t *testing.T) {
	c := prepared(t, nil)
	if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{IdlePolicy: &api.IdlePolicy{Kind: "adaptive", DelayWeight: vf64(1.5)}}); err != nil {
		t.Fatal(err)
	}
	if w, ok := c.AdaptiveIdle(); !ok || w != 1.5 || *c.Aml().ScaleSettings.MaxNodeCount != 4 {
		t.Errorf("after PATCH: policy %+v scale %+v", c.Aml().IdlePolicy, c.Aml().ScaleSettings)
	}
	// A policy replaces the stored one: Adaptive without a weight is the default.
	if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{IdlePolicy: &api.IdlePolicy{Kind: "Adaptive"}}); err != nil {
		t.Fatal(err)
	}
	if w, _ := c.AdaptiveIdle(); w != api.DefaultDelayWeight {
		t.Errorf("delay weight %v; want the default", w)
	}
	if err := api.ApplyUpdate(c, &api.ClusterUpdateProperties{IdlePolicy: &api.IdlePolicy{Kind: "Fixed"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.AdaptiveIdle(); ok {
		t.Error("still adaptive after a PATCH to Fixed")
	}
	wantAPIError(t, api.ApplyUpdate(c, &api.ClusterUpdateProperties{IdlePolicy: &api.IdlePolicy{Kind: "Adaptive", DelayWeight: vf64(-1)}}),
		api.CodeValidationError, tgtIdle+"delayWeight")
	wantAPIError(t, api.ApplyUpdate(c, &api.ClusterUpdateProperties{}), api.CodeValidationError, "")
}
