package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// The compute target commands of az ml v1 (the azure-cli-ml extension),
// as older scripts and documents use them. v1 created the same AmlCompute
// resource as today's 'az ml compute'; each flag maps to a field of it:
//
//	--vm-size                         size
//	--vm-priority dedicated|lowpriority   tier dedicated|low_priority
//	--min-nodes / --max-nodes         min_instances / max_instances
//	--idle-seconds-before-scaledown   idle_time_before_scale_down
//	--admin-username, --admin-user-password, --admin-user-ssh-key   ssh_settings
//	--remote-login-port-public-access Enabled|Disabled   ssh_public_access_enabled
//	--vnet-name, --subnet-name, --vnet-resourcegroup-name   network_settings
//	--assign-identity '[system]' | ID,ID   identity
//	--tag k=v                         tags

func newComputeTargetCmd(g *globals) *cobra.Command {
	// Hidden from the command list and from suggestions (a typo of
	// "compute" should not be offered the v1 group); 'compute --help'
	// names it.
	cmd := &cobra.Command{Use: "computetarget", Short: "az ml v1's compute target commands (computetarget create amlcompute, …), on today's computes", Hidden: true}
	cmd.PersistentFlags().StringVar(&g.subscription, "subscription-id", "", "subscription id (az ml v1's spelling of --subscription)")
	create := &cobra.Command{Use: "create", Short: "Create a compute target (amlcompute)"}
	create.AddCommand(newComputeTargetCreateAmlCmd(g))
	update := &cobra.Command{Use: "update", Short: "Update a compute target (amlcompute)"}
	update.AddCommand(newComputeTargetUpdateAmlCmd(g))
	identity := &cobra.Command{Use: "identity", Short: "The managed identities of an AmlCompute target"}
	identity.AddCommand(newComputeTargetIdentityCmd(g, "assign"), newComputeTargetIdentityCmd(g, "remove"), newComputeTargetIdentityShowCmd(g))
	aml := &cobra.Command{Use: "amlcompute", Short: "AmlCompute target commands"}
	aml.AddCommand(identity)
	cmd.AddCommand(create, update, aml, newComputeShowCmd(g), newComputeListCmd(g), newComputeTargetDeleteCmd(g))
	return cmd
}

// v1Create are the flags of 'computetarget create amlcompute'.
type v1Create struct {
	name, size, priority, adminUser, adminPassword, sshKey string
	remoteLogin, vnet, vnetGroup, subnet, identities       string
	location, description                                  string
	min, max                                               int32
	idle                                                   int64
	tags                                                   []string
	publicIP, noWait                                       bool
}

func newComputeTargetCreateAmlCmd(g *globals) *cobra.Command {
	var f v1Create
	cmd := &cobra.Command{
		Use:   "amlcompute",
		Short: "Create an AmlCompute target (az ml v1): the same as 'compute create' with v1's flag names",
		Example: `  cumulus computetarget create amlcompute --name cpu --vm-size STANDARD_D2_V2 --min-nodes 1 --max-nodes 4 \
      --vm-priority lowpriority --assign-identity '[system]'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := f.spec(cmd.Flags().Changed, g)
			if err != nil {
				return err
			}
			return createCompute(cmd.Context(), g, spec, f.noWait)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.name, "name", "n", "", "name of the compute target")
	fl.StringVarP(&f.size, "vm-size", "s", "", "VM size, any case (see 'compute list-sizes'); sizes Azure retired are refused with their successor")
	fl.StringVar(&f.priority, "vm-priority", "dedicated", "dedicated or lowpriority (tier)")
	fl.Int32Var(&f.min, "min-nodes", 0, "minimum nodes kept")
	fl.Int32Var(&f.max, "max-nodes", 4, "maximum nodes")
	fl.Int64Var(&f.idle, "idle-seconds-before-scaledown", 1800, "seconds a node stays idle before it is removed (v1's default)")
	fl.StringVar(&f.adminUser, "admin-username", "", "node admin user for SSH")
	fl.StringVar(&f.adminPassword, "admin-user-password", "", "node admin password (write-only)")
	fl.StringVar(&f.sshKey, "admin-user-ssh-key", "", "SSH public key, or a file holding one")
	fl.StringVar(&f.remoteLogin, "remote-login-port-public-access", "NotSpecified", "Enabled, Disabled or NotSpecified: the nodes' SSH port")
	fl.StringVar(&f.vnet, "vnet-name", "", "virtual network of the nodes")
	fl.StringVar(&f.subnet, "subnet-name", "", "subnet of --vnet-name")
	fl.StringVar(&f.vnetGroup, "vnet-resourcegroup-name", "", "resource group of --vnet-name (default: the workspace's)")
	fl.BoolVar(&f.publicIP, "enable-node-public-ip", true, "give nodes a public address")
	fl.StringVar(&f.identities, "assign-identity", "", "'[system]' for a system-assigned identity, else user-assigned identities' resource ids separated by commas (both may be given)")
	fl.StringVarP(&f.location, "location", "l", "", "location (default: the workspace's)")
	fl.StringVarP(&f.description, "description", "d", "", "description")
	fl.StringArrayVarP(&f.tags, "tag", "t", nil, "tag as key=value (repeatable)")
	fl.StringArrayVar(&f.tags, "tags", nil, "tags as key=value")
	fl.BoolVar(&f.noWait, "no-wait", false, "do not wait for the operation to finish")
	_ = fl.MarkHidden("tags")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("vm-size")
	return cmd
}

// spec maps the v1 flags onto today's compute.
func (f v1Create) spec(set func(string) bool, g *globals) (ComputeSpec, error) {
	s := ComputeSpec{Name: f.name, Type: "amlcompute", Size: f.size, Location: f.location, Description: f.description,
		MinInstances: &f.min, MaxInstances: &f.max, IdleTimeBeforeScaleDown: &f.idle}
	switch strings.ToLower(f.priority) {
	case "dedicated":
		s.Tier = "dedicated"
	case "lowpriority", "low_priority":
		s.Tier = "low_priority"
	default:
		return s, fmt.Errorf("--vm-priority %q is not one of dedicated, lowpriority", f.priority)
	}
	if len(f.tags) > 0 {
		s.Tags = parseTags(f.tags)
	}
	if set("admin-username") || set("admin-user-password") || set("admin-user-ssh-key") {
		s.SSHSettings = &SSHSettings{AdminUsername: f.adminUser, AdminPassword: f.adminPassword, SSHKeyValue: f.sshKey}
	}
	switch strings.ToLower(f.remoteLogin) {
	case "notspecified":
	case "enabled", "disabled":
		on := strings.EqualFold(f.remoteLogin, "enabled")
		s.SSHPublicAccessEnabled = &on
	default:
		return s, fmt.Errorf("--remote-login-port-public-access %q is not one of Enabled, Disabled, NotSpecified", f.remoteLogin)
	}
	if f.vnet != "" || f.subnet != "" || f.vnetGroup != "" {
		if f.vnet == "" || f.subnet == "" {
			return s, fmt.Errorf("--vnet-name and --subnet-name go together (--vnet-resourcegroup-name with them)")
		}
		n := &NetworkSettings{VnetName: f.vnet, Subnet: f.subnet}
		if f.vnetGroup != "" {
			cfg, _, err := g.settings()
			if err != nil {
				return s, err
			}
			n.Subnet = fmt.Sprintf("%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
				api.Scope{Subscription: cfg.Subscription, ResourceGroup: f.vnetGroup}.GroupID(), f.vnet, f.subnet)
		}
		s.NetworkSettings = n
	}
	if set("enable-node-public-ip") {
		s.EnableNodePublicIP = &f.publicIP
	}
	if f.identities != "" {
		system, users, err := v1Identities(f.identities)
		if err != nil {
			return s, err
		}
		s.Identity = identitySpec(system, users)
	}
	return s, nil
}

// v1Identities reads az ml v1's list of identities: '[system]' for the
// system-assigned one, resource ids of user-assigned ones, separated by
// commas.
func v1Identities(list string) (system bool, users []string, err error) {
	for _, v := range strings.Split(list, ",") {
		switch v = strings.TrimSpace(v); {
		case v == "":
		case strings.EqualFold(v, "[system]"):
			system = true
		case strings.HasPrefix(v, "/"):
			users = append(users, v)
		default:
			return false, nil, fmt.Errorf("identity %q is neither '[system]' nor the resource id of a user-assigned identity (/subscriptions/…/providers/Microsoft.ManagedIdentity/userAssignedIdentities/NAME; see 'cumulus identity list')", v)
		}
	}
	if !system && len(users) == 0 {
		return false, nil, fmt.Errorf("no identity given: '[system]' or user-assigned identities' resource ids")
	}
	return system, users, nil
}

// identitySpec is the YAML identity block of a system-assigned identity
// and user-assigned ones.
func identitySpec(system bool, users []string) *IdentitySpec {
	id := &IdentitySpec{Type: "none"}
	switch {
	case system && len(users) > 0:
		id.Type = "system_assigned,user_assigned"
	case system:
		id.Type = "system_assigned"
	case len(users) > 0:
		id.Type = "user_assigned"
	}
	for _, u := range users {
		id.UserAssignedIdentities = append(id.UserAssignedIdentities, UserIdentitySpec{ResourceID: u})
	}
	return id
}

func newComputeTargetUpdateAmlCmd(g *globals) *cobra.Command {
	var (
		name     string
		min, max int32
		idle     int64
	)
	cmd := &cobra.Command{
		Use:   "amlcompute",
		Short: "Change an AmlCompute target's scale settings (az ml v1): 'compute update' with v1's flag names",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := cmd.Flags().Changed
			var s api.ScaleSettings
			if set("min-nodes") {
				s.MinNodeCount = &min
			}
			if set("max-nodes") {
				s.MaxNodeCount = &max
			}
			if set("idle-seconds-before-scaledown") {
				if idle < 0 {
					return fmt.Errorf("--idle-seconds-before-scaledown must be 0 or more seconds")
				}
				s.NodeIdleTimeBeforeScaleDown = fmt.Sprintf("PT%dS", idle)
			}
			if s == (api.ScaleSettings{}) {
				return fmt.Errorf("nothing to update: give --min-nodes, --max-nodes or --idle-seconds-before-scaledown")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.UpdateCompute(cmd.Context(), name, api.ClusterUpdateProperties{ScaleSettings: &s})
			if err != nil {
				return err
			}
			return g.showCompute(out)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "name of the compute target")
	fl.Int32Var(&min, "min-nodes", 0, "minimum nodes")
	fl.Int32Var(&max, "max-nodes", 0, "maximum nodes")
	fl.Int64Var(&idle, "idle-seconds-before-scaledown", 0, "seconds a node stays idle before it is removed")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// newComputeTargetIdentityCmd is 'identity assign' or 'identity remove':
// the identities given are added to, or taken from, the compute's.
func newComputeTargetIdentityCmd(g *globals, verb string) *cobra.Command {
	var name, list string
	cmd := &cobra.Command{
		Use:   verb + " [IDENTITIES]",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " managed identities of an AmlCompute target (az ml v1): '[system]' or user-assigned identities' resource ids, comma-separated",
		Example: `  cumulus computetarget amlcompute identity ` + verb + ` --name cpu-cluster '[system]'
  cumulus computetarget amlcompute identity ` + verb + ` --name cpu-cluster --identities /subscriptions/…/providers/Microsoft.ManagedIdentity/userAssignedIdentities/NAME`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if list != "" {
					return fmt.Errorf("give the identities either as --identities or as the argument, not both")
				}
				list = args[0]
			}
			system, users, err := v1Identities(list)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out, _, err := c.EditCompute(cmd.Context(), name, func(cur api.Compute) (api.Compute, bool, error) {
				hasSystem, has := identitiesOf(cur.Identity)
				if verb == "assign" {
					hasSystem = hasSystem || system
					for _, u := range users {
						if !slices.ContainsFunc(has, func(h string) bool { return strings.EqualFold(h, u) }) {
							has = append(has, u)
						}
					}
				} else {
					if system && !hasSystem {
						return cur, false, fmt.Errorf("compute %s has no system-assigned identity to remove", name)
					}
					hasSystem = hasSystem && !system
					for _, u := range users {
						i := slices.IndexFunc(has, func(h string) bool { return strings.EqualFold(h, u) })
						if i < 0 {
							return cur, false, fmt.Errorf("compute %s has no user-assigned identity %s to remove", name, u)
						}
						has = slices.Delete(has, i, i+1)
					}
				}
				id, err := identitySpec(hasSystem, has).toARM()
				if err != nil {
					return cur, false, err
				}
				cur.Identity = id
				return cur, true, nil
			})
			if err != nil {
				return err
			}
			return showIdentitySpec(g, fromARM(out).Identity)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute target")
	cmd.Flags().StringVar(&list, "identities", "", "'[system]' and/or user-assigned identities' resource ids, comma-separated")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// identitiesOf is whether id has the system-assigned identity, and its
// user-assigned identities' resource ids, sorted.
func identitiesOf(id *api.Identity) (system bool, users []string) {
	if id == nil {
		return false, nil
	}
	system = strings.Contains(id.Type, api.IdentitySystem)
	for k := range id.UserAssignedIdentities {
		users = append(users, k)
	}
	slices.Sort(users)
	return system, users
}

// showIdentitySpec prints a compute's identity block.
func showIdentitySpec(g *globals, id *IdentitySpec) error {
	if id == nil {
		id = &IdentitySpec{Type: "none"}
	}
	return g.show("json", id, func() *table {
		t := &table{header: []string{"TYPE", "PRINCIPAL ID", "USER-ASSIGNED IDENTITY", "CLIENT ID"}}
		if len(id.UserAssignedIdentities) == 0 {
			t.add(id.Type, id.PrincipalID, "-", "-")
		}
		for _, u := range id.UserAssignedIdentities {
			t.add(id.Type, id.PrincipalID, u.ResourceID, u.ClientID)
		}
		return t
	})
}

func newComputeTargetIdentityShowCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the managed identities of an AmlCompute target (az ml v1)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			comp, err := c.GetCompute(cmd.Context(), name)
			if err != nil {
				return err
			}
			return showIdentitySpec(g, fromARM(comp).Identity)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute target")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// newComputeTargetDeleteCmd deletes without asking, as az ml v1's
// 'computetarget delete' did.
func newComputeTargetDeleteCmd(g *globals) *cobra.Command {
	var name string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a compute target and its nodes (az ml v1: without asking)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return deleteCompute(cmd.Context(), g, name, noWait)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute target")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for the operation to finish")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}
