package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// ComputeSpec is the `az ml` v2 YAML schema of an amlcompute.
type ComputeSpec struct {
	Schema                  string            `yaml:"$schema,omitempty" json:"$schema,omitempty"`
	Name                    string            `yaml:"name" json:"name"`
	Type                    string            `yaml:"type" json:"type"`
	Description             string            `yaml:"description,omitempty" json:"description,omitempty"`
	Location                string            `yaml:"location,omitempty" json:"location,omitempty"`
	Tags                    map[string]string `yaml:"tags,omitempty" json:"tags,omitempty"`
	Size                    string            `yaml:"size,omitempty" json:"size,omitempty"`
	Tier                    string            `yaml:"tier,omitempty" json:"tier,omitempty"`
	MinInstances            *int32            `yaml:"min_instances,omitempty" json:"min_instances,omitempty"`
	MaxInstances            *int32            `yaml:"max_instances,omitempty" json:"max_instances,omitempty"`
	IdleTimeBeforeScaleDown *int64            `yaml:"idle_time_before_scale_down,omitempty" json:"idle_time_before_scale_down,omitempty"`
	SSHPublicAccessEnabled  *bool             `yaml:"ssh_public_access_enabled,omitempty" json:"ssh_public_access_enabled,omitempty"`
	SSHSettings             *SSHSettings      `yaml:"ssh_settings,omitempty" json:"ssh_settings,omitempty"`
	NetworkSettings         *NetworkSettings  `yaml:"network_settings,omitempty" json:"network_settings,omitempty"`
	Identity                *IdentitySpec     `yaml:"identity,omitempty" json:"identity,omitempty"`
	EnableNodePublicIP      *bool             `yaml:"enable_node_public_ip,omitempty" json:"enable_node_public_ip,omitempty"`
	ResourceID              string            `yaml:"resource_id,omitempty" json:"resource_id,omitempty"`
	// Kubernetes (Cumulus extension) places the node pods on --provider kubernetes.
	Kubernetes *api.KubernetesPlacement `yaml:"kubernetes,omitempty" json:"kubernetes,omitempty"`
	// Slurm (Cumulus extension) places the node jobs on --provider slurm.
	Slurm *api.SlurmPlacement `yaml:"slurm,omitempty" json:"slurm,omitempty"`
	// IdlePolicy (Cumulus extension) chooses how long idle nodes are kept.
	IdlePolicy *IdlePolicySpec `yaml:"idle_policy,omitempty" json:"idle_policy,omitempty"`
	// Schedules (Cumulus extension) change the scale bounds at times given
	// by cron expressions.
	Schedules []ScheduleSpec `yaml:"schedules,omitempty" json:"schedules,omitempty"`
	// QueuePolicy (Cumulus extension) orders the queue: FIFO or fair share.
	QueuePolicy *QueuePolicySpec `yaml:"queue_policy,omitempty" json:"queue_policy,omitempty"`
}

// IdlePolicySpec is the idle policy block of the YAML: kind fixed (the
// idle_time_before_scale_down for every node, as Azure) or adaptive, and
// the adaptive policy's delay weight.
type IdlePolicySpec struct {
	Kind        string   `yaml:"kind" json:"kind"`
	DelayWeight *float64 `yaml:"delay_weight,omitempty" json:"delay_weight,omitempty"`
}

var idlePolicyKinds = map[string]string{"fixed": api.IdlePolicyFixed, "adaptive": api.IdlePolicyAdaptive}

// toARM converts the YAML idle policy; the server checks the weight.
func (s IdlePolicySpec) toARM() (*api.IdlePolicy, error) {
	kind, ok := idlePolicyKinds[strings.ToLower(s.Kind)]
	switch {
	case s.Kind == "":
		return nil, fmt.Errorf("idle_policy needs a kind (--idle-policy): fixed or adaptive")
	case !ok:
		return nil, fmt.Errorf("idle_policy kind %q is not one of fixed, adaptive", s.Kind)
	}
	return &api.IdlePolicy{Kind: kind, DelayWeight: s.DelayWeight}, nil
}

// SSHSettings is the admin account of the nodes.
type SSHSettings struct {
	AdminUsername string `yaml:"admin_username" json:"admin_username"`
	AdminPassword string `yaml:"admin_password,omitempty" json:"admin_password,omitempty"`
	SSHKeyValue   string `yaml:"ssh_key_value,omitempty" json:"ssh_key_value,omitempty"`
}

// NetworkSettings names the subnet nodes join.
type NetworkSettings struct {
	VnetName string `yaml:"vnet_name,omitempty" json:"vnet_name,omitempty"`
	Subnet   string `yaml:"subnet,omitempty" json:"subnet,omitempty"`
}

// IdentitySpec is the managed identity block of the YAML.
type IdentitySpec struct {
	Type                   string             `yaml:"type" json:"type"`
	UserAssignedIdentities []UserIdentitySpec `yaml:"user_assigned_identities,omitempty" json:"user_assigned_identities,omitempty"`
	PrincipalID            string             `yaml:"principal_id,omitempty" json:"principal_id,omitempty"`
	TenantID               string             `yaml:"tenant_id,omitempty" json:"tenant_id,omitempty"`
}

// UserIdentitySpec is one user-assigned identity.
type UserIdentitySpec struct {
	ResourceID  string `yaml:"resource_id" json:"resource_id"`
	PrincipalID string `yaml:"principal_id,omitempty" json:"principal_id,omitempty"`
	ClientID    string `yaml:"client_id,omitempty" json:"client_id,omitempty"`
}

// loadYAML reads a YAML file into T, refusing unknown keys (a typo in a
// key is an error, not a silently ignored setting).
func loadYAML[T any](path string) (T, error) {
	var s T
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read %s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return s, keysOf(reflect.TypeFor[T]()).explain(path, b, err)
	}
	return s, nil
}

// ignored lists the keys of the file that Cumulus accepts but does not
// act on, each with why.
func (s ComputeSpec) ignored() []string {
	if s.ResourceID != "" {
		return []string{"resource_id is ignored: it attaches an existing Azure resource, and Cumulus creates its clusters itself"}
	}
	return nil
}

var identityTypes = map[string]string{
	"system_assigned":               api.IdentitySystem,
	"user_assigned":                 api.IdentityUser,
	"system_assigned,user_assigned": api.IdentitySystemAndUser,
	"none":                          api.IdentityNone,
}

// toARM converts the YAML entity to the REST resource, as the azure-ai-ml
// SDK's _to_rest_object does.
func (s ComputeSpec) toARM(sc api.Scope) (api.Compute, error) {
	if s.Name == "" {
		return api.Compute{}, fmt.Errorf("name is required (in the file or with --name)")
	}
	if t := strings.ToLower(s.Type); t != "" && t != "amlcompute" {
		return api.Compute{}, fmt.Errorf("type %q is not supported: Cumulus manages amlcompute clusters", s.Type)
	}
	c := api.Compute{Name: s.Name, Location: s.Location, Tags: s.Tags}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Properties.Description = s.Description
	a := c.Aml()
	a.VMSize = s.Size
	switch strings.ToLower(s.Tier) {
	case "":
	case "dedicated":
		a.VMPriority = api.PriorityDedicated
	case "low_priority", "lowpriority":
		a.VMPriority = api.PriorityLowPriority
	default:
		return c, fmt.Errorf("tier %q is not one of dedicated, low_priority", s.Tier)
	}
	ss := &api.ScaleSettings{MinNodeCount: s.MinInstances, MaxNodeCount: s.MaxInstances}
	if ss.MaxNodeCount == nil {
		one := int32(1) // the az ml YAML default
		ss.MaxNodeCount = &one
	}
	if s.IdleTimeBeforeScaleDown != nil {
		if *s.IdleTimeBeforeScaleDown < 0 {
			return c, fmt.Errorf("idle_time_before_scale_down must be 0 or more seconds, got %d", *s.IdleTimeBeforeScaleDown)
		}
		ss.NodeIdleTimeBeforeScaleDown = fmt.Sprintf("PT%dS", *s.IdleTimeBeforeScaleDown)
	}
	a.ScaleSettings = ss
	if s.SSHPublicAccessEnabled != nil {
		a.RemoteLoginPortPublicAccess = api.RemoteLoginDisabled
		if *s.SSHPublicAccessEnabled {
			a.RemoteLoginPortPublicAccess = api.RemoteLoginEnabled
		}
	}
	if s.SSHSettings != nil {
		key, err := readKeyValue(s.SSHSettings.SSHKeyValue)
		if err != nil {
			return c, err
		}
		a.UserAccountCredentials = &api.UserAccountCredentials{AdminUserName: s.SSHSettings.AdminUsername,
			AdminUserPassword: s.SSHSettings.AdminPassword, AdminUserSSHPublicKey: key}
	}
	if n := s.NetworkSettings; n != nil && n.Subnet != "" {
		id := n.Subnet
		if !strings.HasPrefix(id, "/") {
			if n.VnetName == "" {
				return c, fmt.Errorf("network_settings.subnet %q needs vnet_name (or give the subnet's full ARM id)", n.Subnet)
			}
			id = fmt.Sprintf("%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s", sc.GroupID(), n.VnetName, n.Subnet)
		}
		a.Subnet = &api.ResourceRef{ID: id}
	}
	if s.Identity != nil {
		id, err := s.Identity.toARM()
		if err != nil {
			return c, err
		}
		c.Identity = id
	}
	a.EnableNodePublicIP = s.EnableNodePublicIP
	a.Kubernetes = s.Kubernetes
	a.Slurm = s.Slurm
	if s.IdlePolicy != nil {
		p, err := s.IdlePolicy.toARM()
		if err != nil {
			return c, err
		}
		a.IdlePolicy = p
	}
	a.Schedules = schedulesToARM(s.Schedules)
	if s.QueuePolicy != nil {
		p, err := s.QueuePolicy.toARM()
		if err != nil {
			return c, err
		}
		a.QueuePolicy = p
	}
	return c, nil
}

// toARM converts the YAML identity block.
func (s IdentitySpec) toARM() (*api.Identity, error) {
	t, ok := identityTypes[strings.ToLower(strings.ReplaceAll(s.Type, " ", ""))]
	if !ok {
		return nil, fmt.Errorf("identity type %q is not one of system_assigned, user_assigned, system_assigned,user_assigned, none", s.Type)
	}
	id := &api.Identity{Type: t}
	for _, u := range s.UserAssignedIdentities {
		if id.UserAssignedIdentities == nil {
			id.UserAssignedIdentities = map[string]*api.UserAssignedIdentity{}
		}
		id.UserAssignedIdentities[u.ResourceID] = &api.UserAssignedIdentity{}
	}
	return id, nil
}

// readKeyValue accepts an OpenSSH public key or the path of a file holding one.
func readKeyValue(v string) (string, error) {
	if v == "" || strings.HasPrefix(v, "ssh-") || strings.HasPrefix(v, "ecdsa-") || strings.HasPrefix(v, "sk-") {
		return v, nil
	}
	b, err := os.ReadFile(expandHome(strings.TrimPrefix(v, "@")))
	if err != nil {
		return "", fmt.Errorf("ssh_key_value is neither a public key nor a readable file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// expandHome expands a leading ~ of a path in a YAML file or a flag's
// value to the home directory, as a shell would have for a path typed
// on the command line ("~/.ssh/id_ed25519.pub").
func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p // the read that follows names the path as given
	}
	return filepath.Join(home, p[1:])
}

// ComputeView is what `compute show` prints: the az ml entity with its
// read-only state.
type ComputeView struct {
	ComputeSpec        `yaml:",inline"`
	ID                 string              `json:"id"`
	ProvisioningState  string              `json:"provisioning_state"`
	ProvisioningErrors []api.ErrorResponse `json:"provisioning_errors,omitempty"`
	CreatedOn          *time.Time          `json:"created_on,omitempty"`
	AllocationState    string              `json:"allocation_state"`
	CurrentNodeCount   int32               `json:"current_node_count"`
	TargetNodeCount    int32               `json:"target_node_count"`
	NodeStateCounts    api.NodeStateCounts `json:"node_state_counts"`
	Errors             []api.ErrorResponse `json:"errors,omitempty"`
	ActiveSchedule     *ActiveScheduleView `json:"active_schedule,omitempty"`
	NetworkIsolation   string              `json:"network_isolation,omitempty"`
	// FairShare is where each group stands (fair-share computes).
	FairShare *FairShareView `json:"fair_share,omitempty"`
}

// fromARM converts a REST compute to the entity `az ml compute show` prints.
func fromARM(c api.Compute) ComputeView {
	a := c.Aml()
	v := ComputeView{ID: c.ID, ProvisioningState: c.Properties.ProvisioningState, ProvisioningErrors: c.Properties.ProvisioningErrors,
		CreatedOn: c.Properties.CreatedOn, AllocationState: a.AllocationState, CurrentNodeCount: a.CurrentNodeCount,
		TargetNodeCount: a.TargetNodeCount, NodeStateCounts: a.NodeStateCounts, Errors: a.Errors, ActiveSchedule: activeScheduleView(a.ActiveSchedule),
		NetworkIsolation: a.NetworkIsolation, FairShare: fairShareView(a.FairShare)}
	s := &v.ComputeSpec
	s.Name, s.Type, s.Description, s.Tags, s.Size = c.Name, "amlcompute", c.Properties.Description, c.Tags, a.VMSize
	s.Location = c.Properties.ComputeLocation
	if s.Location == "" {
		s.Location = c.Location
	}
	s.Tier = "dedicated"
	if a.VMPriority == api.PriorityLowPriority {
		s.Tier = "low_priority"
	}
	if ss := a.ScaleSettings; ss != nil {
		s.MinInstances, s.MaxInstances = ss.MinNodeCount, ss.MaxNodeCount
		if d, err := api.ParseDuration(ss.NodeIdleTimeBeforeScaleDown); err == nil {
			secs := int64(d / time.Second)
			s.IdleTimeBeforeScaleDown = &secs
		}
	}
	enabled := a.RemoteLoginPortPublicAccess == api.RemoteLoginEnabled
	s.SSHPublicAccessEnabled = &enabled
	if u := a.UserAccountCredentials; u != nil {
		s.SSHSettings = &SSHSettings{AdminUsername: u.AdminUserName, SSHKeyValue: u.AdminUserSSHPublicKey}
	}
	if a.Subnet != nil {
		s.NetworkSettings = &NetworkSettings{Subnet: a.Subnet.ID}
	}
	if id := c.Identity; id != nil {
		is := &IdentitySpec{PrincipalID: id.PrincipalID, TenantID: id.TenantID}
		for k, t := range identityTypes {
			if t == id.Type {
				is.Type = k
			}
		}
		for k, u := range id.UserAssignedIdentities {
			e := UserIdentitySpec{ResourceID: k}
			if u != nil {
				e.PrincipalID, e.ClientID = u.PrincipalID, u.ClientID
			}
			is.UserAssignedIdentities = append(is.UserAssignedIdentities, e)
		}
		s.Identity = is
	}
	s.EnableNodePublicIP = a.EnableNodePublicIP
	s.Kubernetes = a.Kubernetes
	s.Slurm = a.Slurm
	if p := a.IdlePolicy; p != nil {
		s.IdlePolicy = &IdlePolicySpec{Kind: strings.ToLower(p.Kind), DelayWeight: p.DelayWeight}
	}
	s.Schedules = schedulesFromARM(a.Schedules)
	s.QueuePolicy = queuePolicySpec(a.QueuePolicy)
	return v
}
