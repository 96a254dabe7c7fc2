package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/server"
)

var specScope = api.Scope{Subscription: "s1", ResourceGroup: "rg1", Workspace: "ws1"}

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }
func bl(v bool) *bool    { return &v }

func TestComputeSpecToARM(t *testing.T) {
	s := ComputeSpec{
		Name: "cpu-cluster", Type: "AmlCompute", Description: "d", Location: "eastus", Tags: map[string]string{"a": "b"},
		Size: "Standard_DS3_v2", Tier: "low_priority", MinInstances: i32(1), MaxInstances: i32(4), IdleTimeBeforeScaleDown: i64(300),
		SSHPublicAccessEnabled: bl(true),
		SSHSettings:            &SSHSettings{AdminUsername: "azureuser", AdminPassword: "Str0ngPassw0rd!", SSHKeyValue: "ssh-ed25519 AAAA user"},
		NetworkSettings:        &NetworkSettings{VnetName: "vnet1", Subnet: "default"},
		Identity:               &IdentitySpec{Type: "system_assigned, user_assigned", UserAssignedIdentities: []UserIdentitySpec{{ResourceID: "/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.ManagedIdentity/userAssignedIdentities/u"}}},
		EnableNodePublicIP:     bl(false),
	}
	c, err := s.toARM(specScope)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Aml()
	if c.Name != "cpu-cluster" || c.Location != "eastus" || c.Tags["a"] != "b" || c.Properties.ComputeType != "AmlCompute" || c.Properties.Description != "d" {
		t.Errorf("envelope %+v", c)
	}
	if a.VMSize != "Standard_DS3_v2" || a.VMPriority != "LowPriority" || *a.ScaleSettings.MinNodeCount != 1 || *a.ScaleSettings.MaxNodeCount != 4 ||
		a.ScaleSettings.NodeIdleTimeBeforeScaleDown != "PT300S" || a.RemoteLoginPortPublicAccess != "Enabled" || *a.EnableNodePublicIP {
		t.Errorf("aml %+v %+v", a, a.ScaleSettings)
	}
	if u := a.UserAccountCredentials; u == nil || u.AdminUserName != "azureuser" || u.AdminUserPassword != "Str0ngPassw0rd!" || u.AdminUserSSHPublicKey != "ssh-ed25519 AAAA user" {
		t.Errorf("credentials %+v", u)
	}
	if a.Subnet == nil || a.Subnet.ID != "/subscriptions/s1/resourceGroups/rg1/providers/Microsoft.Network/virtualNetworks/vnet1/subnets/default" {
		t.Errorf("subnet %+v", a.Subnet)
	}
	if c.Identity == nil || c.Identity.Type != "SystemAssigned,UserAssigned" || len(c.Identity.UserAssignedIdentities) != 1 {
		t.Errorf("identity %+v", c.Identity)
	}
	// The result passes the server's validation.
	if err := api.PrepareCompute(&c, c.Name, nil, "westus2"); err != nil {
		t.Errorf("toARM output does not validate: %v", err)
	}

	// Defaults and the other spellings.
	c, err = ComputeSpec{Name: "x1x", SSHPublicAccessEnabled: bl(false), Tier: "Dedicated",
		NetworkSettings: &NetworkSettings{Subnet: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/n"}}.toARM(specScope)
	if err != nil {
		t.Fatal(err)
	}
	a = c.Aml()
	if *a.ScaleSettings.MaxNodeCount != 1 || a.ScaleSettings.MinNodeCount != nil || a.ScaleSettings.NodeIdleTimeBeforeScaleDown != "" ||
		a.VMPriority != "Dedicated" || a.RemoteLoginPortPublicAccess != "Disabled" || a.Subnet.ID != "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/n" {
		t.Errorf("defaults %+v %+v", a, a.ScaleSettings)
	}
	c, _ = ComputeSpec{Name: "x1x"}.toARM(specScope)
	if c.Aml().RemoteLoginPortPublicAccess != "" || c.Identity != nil || c.Aml().UserAccountCredentials != nil || c.Aml().EnableNodePublicIP != nil {
		t.Errorf("unset fields were set: %+v", c.Aml())
	}

	for name, s := range map[string]ComputeSpec{
		"no name":          {},
		"other type":       {Name: "c1x", Type: "computeinstance"},
		"bad tier":         {Name: "c1x", Tier: "spot"},
		"negative idle":    {Name: "c1x", IdleTimeBeforeScaleDown: i64(-1)},
		"subnet w/o vnet":  {Name: "c1x", NetworkSettings: &NetworkSettings{Subnet: "default"}},
		"bad identity":     {Name: "c1x", Identity: &IdentitySpec{Type: "managed"}},
		"ssh key not file": {Name: "c1x", SSHSettings: &SSHSettings{AdminUsername: "u", SSHKeyValue: filepath.Join(t.TempDir(), "nope.pub")}},
	} {
		if _, err := s.toARM(specScope); err == nil {
			t.Errorf("%s: toARM accepted %+v", name, s)
		}
	}
}

func TestSSHKeyFromFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "id.pub")
	if err := os.WriteFile(p, []byte("ssh-rsa AAAAB3Nza user@host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{p, "@" + p} {
		c, err := ComputeSpec{Name: "c1x", SSHSettings: &SSHSettings{AdminUsername: "u", SSHKeyValue: v}}.toARM(specScope)
		if err != nil || c.Aml().UserAccountCredentials.AdminUserSSHPublicKey != "ssh-rsa AAAAB3Nza user@host" {
			t.Errorf("%s: %v %+v", v, err, c.Aml().UserAccountCredentials)
		}
	}
}

func TestLoadComputeSpec(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	os.WriteFile(good, []byte("$schema: x\nname: c1x\ntype: amlcompute\nsize: Standard_DS2_v2\nmax_instances: 3\nidle_time_before_scale_down: 60\ntier: low_priority\nssh_public_access_enabled: false\n"), 0o600)
	s, err := loadYAML[ComputeSpec](good)
	if err != nil || s.Name != "c1x" || *s.MaxInstances != 3 || *s.IdleTimeBeforeScaleDown != 60 || s.Tier != "low_priority" || *s.SSHPublicAccessEnabled {
		t.Errorf("good: %+v %v", s, err)
	}
	for name, body := range map[string]string{
		"unknown key":   "name: c1x\ncolour: blue\n",
		"nested typo":   "name: c1x\nssh_settings:\n  admin_user: x\n",
		"wrong type":    "name: c1x\nmax_instances: many\n",
		"not yaml":      "name: [c1x\n",
		"snake vs rest": "name: c1x\nvmSize: Standard_DS2_v2\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yml")
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := loadYAML[ComputeSpec](p); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
	if _, err := loadYAML[ComputeSpec](filepath.Join(dir, "missing.yml")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestLoadComputeSpecKubernetesPlacement(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gpu.yml")
	os.WriteFile(p, []byte("name: gpu\ntype: amlcompute\nsize: Standard_NC6s_v3\nkubernetes:\n  nodeSelector: {pool: gpu}\n  tolerations:\n  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n"), 0o600)
	s, err := loadYAML[ComputeSpec](p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.toARM(api.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Aml().Kubernetes
	if k == nil || k.NodeSelector["pool"] != "gpu" || len(k.Tolerations) != 1 || k.Tolerations[0].Key != "nvidia.com/gpu" || k.Tolerations[0].Operator != "Exists" {
		t.Errorf("placement %+v", k)
	}
	if back := fromARM(c); back.Kubernetes == nil || back.Kubernetes.NodeSelector["pool"] != "gpu" {
		t.Errorf("show loses the placement: %+v", back.Kubernetes)
	}
}

// The idle policy extension round-trips through the YAML: snake_case keys
// and lower-case kinds in the file, the API's spelling on the wire.
func TestLoadComputeSpecIdlePolicy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "adaptive.yml")
	os.WriteFile(p, []byte("name: adaptive\ntype: amlcompute\nmax_instances: 4\nidle_time_before_scale_down: 600\nidle_policy:\n  kind: adaptive\n  delay_weight: 1.5\n"), 0o600)
	s, err := loadYAML[ComputeSpec](p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.toARM(specScope)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.PrepareCompute(&c, c.Name, nil, "westus2"); err != nil {
		t.Fatal(err)
	}
	if w, ok := c.AdaptiveIdle(); !ok || w != 1.5 {
		t.Errorf("idle policy %+v; want Adaptive with delay weight 1.5", c.Aml().IdlePolicy)
	}
	back := fromARM(c).IdlePolicy
	if back == nil || back.Kind != "adaptive" || back.DelayWeight == nil || *back.DelayWeight != 1.5 {
		t.Errorf("show gives idle policy %+v; want kind adaptive, delay_weight 1.5", back)
	}
	if v := fromARM(api.Compute{}); v.IdlePolicy != nil {
		t.Errorf("show invents an idle policy: %+v", v.IdlePolicy)
	}

	for name, body := range map[string]string{
		"camelCase key": "name: c1x\nidle_policy: {kind: adaptive, delayWeight: 2}\n",
		"unknown key":   "name: c1x\nidle_policy: {kind: adaptive, weight: 2}\n",
	} {
		p := filepath.Join(t.TempDir(), "bad.yml")
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := loadYAML[ComputeSpec](p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, spec := range map[string]*IdlePolicySpec{
		"no kind":  {DelayWeight: vf(2)},
		"bad kind": {Kind: "smart"},
	} {
		if _, err := (ComputeSpec{Name: "c1x", IdlePolicy: spec}).toARM(specScope); err == nil || !strings.Contains(err.Error(), "fixed or adaptive") && !strings.Contains(err.Error(), "fixed, adaptive") {
			t.Errorf("%s: toARM error %v; want one naming the kinds", name, err)
		}
	}
}

func vf(v float64) *float64 { return &v }

func TestFromARMRoundTrip(t *testing.T) {
	in := ComputeSpec{Name: "c1x", Type: "amlcompute", Size: "standard_ds2_v2", Tier: "low_priority", MinInstances: i32(0), MaxInstances: i32(3),
		IdleTimeBeforeScaleDown: i64(600), SSHPublicAccessEnabled: bl(true), Description: "d", Tags: map[string]string{"k": "v"},
		Identity: &IdentitySpec{Type: "system_assigned"}}
	c, err := in.toARM(specScope)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.PrepareCompute(&c, c.Name, nil, "westus2"); err != nil {
		t.Fatal(err)
	}
	c.Identity.PrincipalID = "p"
	c.Aml().UserAccountCredentials = &api.UserAccountCredentials{AdminUserName: "u", AdminUserPassword: "secret-password"}
	v := fromARM(c)
	if v.Name != "c1x" || v.Type != "amlcompute" || v.Size != "Standard_DS2_v2" || v.Tier != "low_priority" || *v.MaxInstances != 3 ||
		*v.IdleTimeBeforeScaleDown != 600 || !*v.SSHPublicAccessEnabled || v.Location != "westus2" || v.Identity.Type != "system_assigned" ||
		v.Identity.PrincipalID != "p" || !*v.EnableNodePublicIP {
		t.Errorf("view %+v", v)
	}
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), "secret-password") {
		t.Error("the view carries the admin password")
	}
}

func TestOneLine(t *testing.T) {
	e := &api.Error{Code: "ValidationError", Message: "first\nproblem", Details: []*api.Error{
		{Code: "ValidationError", Target: "a", Message: "first\nproblem"},
		{Code: "ValidationError", Target: "b", Message: "second"},
	}}
	got := oneLine(errors.Join(errors.New("ctx"), e))
	if got != "ValidationError: first problem; b: second" {
		t.Errorf("oneLine = %q", got)
	}
	if got := oneLine(errors.New("a\nb")); got != "a b" {
		t.Errorf("oneLine = %q", got)
	}
}

func TestParseTags(t *testing.T) {
	got := parseTags([]string{"a=b c=d", "e=", "f", "g=h=i"})
	want := map[string]string{"a": "b", "c": "d", "e": "", "f": "", "g": "h=i"}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestMainVersionAndUsageErrors(t *testing.T) {
	out, _, code := run(t, "version")
	if code != 0 || !strings.Contains(out, "2024-04-01") {
		t.Errorf("version: %d %q", code, out)
	}
	for _, args := range [][]string{{"nosuch"}, {"compute", "show"}, {"compute", "list", "extra"}, {"compute", "create", "--max-instances", "x"}} {
		_, errOut, code := run(t, args...)
		if code == 0 || !strings.HasPrefix(errOut, "error: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestMainAgainstDaemon runs client commands in-process against an
// in-process control plane.
func TestMainAgainstDaemon(t *testing.T) {
	_, cfg := startDaemon(t, func(o *daemon.Options) {
		o.Defaults = server.Defaults{Subscription: "s1", ResourceGroup: "rg1", Location: "westus2", Workspace: "ws1"}
	})

	out, errOut, code := run(t, "--config", cfg, "compute", "create", "-n", "inproc", "--size", "Standard_D2_v2", "--max-instances", "2",
		"--admin-username", "azureuser", "--admin-password", "In-Proc-Pa55word", "--tags", "a=b c=d")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	if strings.Contains(out, "In-Proc-Pa55word") {
		t.Error("create printed the admin password")
	}
	var v ComputeView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.ProvisioningState != "Succeeded" || v.Size != "Standard_D2_v2" || v.Tags["c"] != "d" ||
		v.SSHSettings == nil || v.SSHSettings.AdminUsername != "azureuser" {
		t.Errorf("create output %+v %v", v, err)
	}
	if !strings.Contains(errOut, "Creating compute inproc") {
		t.Errorf("no progress on stderr: %q", errOut)
	}
	out, _, code = run(t, "--config", cfg, "-o", "table", "compute", "show", "-n", "inproc")
	if code != 0 || !strings.Contains(out, "inproc") || !strings.Contains(out, "Succeeded/Steady") {
		t.Errorf("show -o table: %d\n%s", code, out)
	}
	_, errOut, code = run(t, "--config", cfg, "-w", "nows", "compute", "list")
	if code == 0 || !strings.Contains(errOut, "ParentResourceNotFound") {
		t.Errorf("list in a missing workspace: %d %q", code, errOut)
	}
	out, _, code = run(t, "--config", cfg, "compute", "create", "-n", "nowait", "--no-wait")
	if code != 0 || !strings.Contains(out, `"provisioning_state": "Creating"`) {
		t.Errorf("--no-wait: %d %s", code, out)
	}
	// The idle policy: from the YAML, shown, changed by update.
	spec := filepath.Join(t.TempDir(), "adaptive.yml")
	os.WriteFile(spec, []byte("name: adaptive\nmax_instances: 2\nidle_policy: {kind: Adaptive}\n"), 0o600)
	out, errOut, code = run(t, "--config", cfg, "compute", "create", "-f", spec)
	if code != 0 || !strings.Contains(out, `"idle_policy": {`) || !strings.Contains(out, `"kind": "adaptive"`) || !strings.Contains(out, `"delay_weight": 3.25`) {
		t.Errorf("create with an idle policy: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "--config", cfg, "compute", "update", "-n", "adaptive", "--idle-policy", "adaptive", "--idle-delay-weight", "1", "--max-instances", "3")
	if code != 0 || !strings.Contains(out, `"delay_weight": 1`) || !strings.Contains(out, `"max_instances": 3`) {
		t.Errorf("update --idle-delay-weight: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "--config", cfg, "compute", "update", "-n", "adaptive", "--idle-policy", "fixed", "--tags", "k=v")
	if code != 0 || !strings.Contains(out, `"kind": "fixed"`) || strings.Contains(out, "delay_weight") {
		t.Errorf("update --idle-policy fixed: %d %s %s", code, out, errOut)
	}
	_, errOut, code = run(t, "--config", cfg, "compute", "update", "-n", "adaptive", "--idle-delay-weight", "2")
	if code == 0 || !strings.Contains(errOut, "--idle-policy adaptive") {
		t.Errorf("update --idle-delay-weight alone: %d %q", code, errOut)
	}
	_, errOut, code = run(t, "--config", cfg, "compute", "update", "-n", "adaptive", "--idle-policy", "adaptive", "--idle-delay-weight", "-1")
	if code == 0 || !strings.Contains(errOut, "delayWeight may not be negative") {
		t.Errorf("update with a negative weight: %d %q", code, errOut)
	}
	if _, errOut, code = run(t, "--config", cfg, "compute", "delete", "-n", "inproc", "--yes"); code != 0 {
		t.Errorf("delete: %d %s", code, errOut)
	}
	_, errOut, code = run(t, "--config", cfg, "compute", "show", "-n", "inproc")
	if code == 0 || !strings.HasPrefix(errOut, "error: ResourceNotFound") {
		t.Errorf("show after delete: %d %q", code, errOut)
	}
	// Flags override the config file.
	_, errOut, code = run(t, "--config", cfg, "--server", "http://127.0.0.1:1", "compute", "list")
	if code == 0 || !strings.Contains(errOut, "cannot reach") {
		t.Errorf("--server override: %d %q", code, errOut)
	}
	_, errOut, code = run(t, "--config", filepath.Join(t.TempDir(), "none.yaml"), "compute", "list")
	if code == 0 || !strings.Contains(errOut, "cumulus serve") {
		t.Errorf("no config: %d %q", code, errOut)
	}
}

// The az habits of the docs' own examples: a ~ path in the YAML, and
// several tags after one --tags.
func TestHomePathsAndAzStyleTags(t *testing.T) {
	_, cfg := startDaemon(t, nil)
	home := t.TempDir()
	t.Setenv("HOME", home)
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHome me@laptop"
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519.pub"), []byte(key+"\n"), 0o600)
	spec := filepath.Join(t.TempDir(), "compute.yml")
	os.WriteFile(spec, []byte("name: tilde\nssh_settings:\n  admin_username: azureuser\n  ssh_key_value: ~/.ssh/id_ed25519.pub\n"), 0o600)

	out, errOut, code := run(t, "--config", cfg, "compute", "create", "-f", spec, "--tags", "project=churn", "team=ml", "--no-wait")
	var v ComputeView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("create: exit %d, %s", code, errOut)
	}
	if v.SSHSettings == nil || v.SSHSettings.SSHKeyValue != key {
		t.Errorf("ssh key from ~/.ssh: %+v", v.SSHSettings)
	}
	if v.Tags["project"] != "churn" || v.Tags["team"] != "ml" {
		t.Errorf("tags: %v", v.Tags)
	}
	// The words after the list run to the next flag; -- ends them.
	if got := spreadValues([]string{"job", "update", "--tags=a=b", "c=d", "--set", "x=1", "y=2", "-n", "j", "--", "k=v"}); strings.Join(got, " ") !=
		"job update --tags=a=b --tags c=d --set x=1 --set y=2 -n j -- k=v" {
		t.Errorf("spreadValues: %q", got)
	}
}
