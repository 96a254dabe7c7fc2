package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

func newComputeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "compute", Short: "Manage compute clusters (like 'az ml compute')",
		Long: `Manage compute clusters, as 'az ml compute' does. The commands of az ml v1
('az ml computetarget create amlcompute', …) work too: see 'cumulus computetarget --help'.`}
	cmd.AddCommand(newComputeCreateCmd(g), newComputeShowCmd(g), newComputeListCmd(g), newComputeUpdateCmd(g),
		newComputeDeleteCmd(g), newComputeListNodesCmd(g), newComputeListSizesCmd(g), newComputeListUsageCmd(g), newComputeJoinTokenCmd(g),
		newComputeSimulateEvictionCmd(g), newComputeConnectSSHCmd(g), newComputeSimulateCmd(g), newComputeEventsCmd(g), newComputeApplyCmd(g), newComputeValidateCmd(g))
	cmd.AddCommand(newComputeUsageCmd(g))
	return cmd
}

// computeFlags are create's flags; set ones override the YAML file.
type computeFlags struct {
	file, name, typ, size, tier, location, description string
	minInstances, maxInstances                         int32
	idle                                               int64
	tags                                               []string
	vnet, subnet, adminUser, adminPassword, sshKey     string
	sshPublic, nodePublicIP                            bool
	identityType                                       string
	userIdentities                                     []string
	noWait                                             bool
	idlePolicy                                         string
	delayWeight                                        float64
	queue                                              queueFlags
}

func newComputeCreateCmd(g *globals) *cobra.Command {
	var f computeFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a compute cluster from a YAML file and/or flags",
		Example: `  cumulus compute create --file compute.yml
  cumulus compute create -n cpu-cluster --size Standard_DS3_v2 --min-instances 0 --max-instances 4
  cumulus compute create -n shared --max-instances 8 --queue-policy fair --fair-share-by tag:team`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var spec ComputeSpec
			if f.file != "" {
				var err error
				if spec, err = loadYAML[ComputeSpec](f.file); err != nil {
					return err
				}
				warn(g, f.file, spec.ignored())
			}
			if err := applyComputeFlags(cmd, &f, &spec); err != nil {
				return err
			}
			return createCompute(cmd.Context(), g, spec, f.noWait)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "YAML file in the az ml amlcompute schema")
	fl.StringVarP(&f.name, "name", "n", "", "name of the compute (3–24 characters: letters, digits, '-')")
	fl.StringVarP(&f.typ, "type", "t", "", "compute type (only amlcompute)")
	fl.StringVar(&f.size, "size", "", "VM size (default Standard_DS3_v2; see 'compute list-sizes')")
	fl.StringVar(&f.tier, "tier", "", "dedicated or low_priority")
	fl.Int32Var(&f.minInstances, "min-instances", 0, "minimum nodes kept (default 0)")
	fl.Int32Var(&f.maxInstances, "max-instances", 1, "maximum nodes")
	fl.Int64Var(&f.idle, "idle-time-before-scale-down", 120, "seconds a node stays idle before it is removed")
	fl.StringVar(&f.location, "location", "", "location (default: the workspace's)")
	fl.StringVar(&f.description, "description", "", "description")
	fl.StringArrayVar(&f.tags, "tags", nil, "tags as key=value (repeatable, or space-separated)")
	fl.StringVar(&f.vnet, "vnet-name", "", "virtual network name")
	fl.StringVar(&f.subnet, "subnet", "", "subnet name or ARM id")
	fl.StringVar(&f.adminUser, "admin-username", "", "node admin user for SSH")
	fl.StringVar(&f.adminPassword, "admin-password", "", "node admin password (write-only)")
	fl.StringVar(&f.sshKey, "ssh-key-value", "", "SSH public key, or a file holding one")
	fl.BoolVar(&f.sshPublic, "ssh-public-access-enabled", false, "open the nodes' SSH port")
	fl.BoolVar(&f.nodePublicIP, "enable-node-public-ip", true, "give nodes a public address")
	fl.StringVar(&f.identityType, "identity-type", "", "system_assigned, user_assigned, system_assigned,user_assigned or none")
	fl.StringArrayVar(&f.userIdentities, "user-assigned-identities", nil, "ARM ids of user-assigned identities")
	fl.BoolVar(&f.noWait, "no-wait", false, "do not wait for the operation to finish")
	addIdlePolicyFlags(cmd, &f.idlePolicy, &f.delayWeight)
	f.queue.register(cmd)
	return cmd
}

// createCompute creates the compute spec describes (or, as az ml compute
// create does, updates the one of that name), waits unless noWait, and
// shows it.
func createCompute(ctx context.Context, g *globals, spec ComputeSpec, noWait bool) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	comp, err := spec.toARM(c.Scope)
	if err != nil {
		return err
	}
	out, resp, err := c.PutCompute(ctx, comp)
	if err != nil {
		return err
	}
	verb := "Creating"
	if resp.Status == 200 { // as az ml compute create: an existing compute is updated
		verb = "Updating"
		fmt.Fprintf(g.stderr, "Compute %s exists: updated to the file and flags given, as 'az ml compute create' does ('compute apply --dry-run' shows changes first)\n", comp.Name)
	}
	if !noWait {
		if err := waitWithProgress(ctx, g, c, resp, verb+" compute "+comp.Name); err != nil {
			return err
		}
		if out, err = c.GetCompute(ctx, comp.Name); err != nil {
			return err
		}
	}
	return g.showCompute(out)
}

// addIdlePolicyFlags adds the flags of the idle policy (a Cumulus
// extension) to create and update.
func addIdlePolicyFlags(cmd *cobra.Command, kind *string, weight *float64) {
	fl := cmd.Flags()
	fl.StringVar(kind, "idle-policy", "", "fixed (idle nodes kept --idle-time-before-scale-down, as Azure) or adaptive (kept as long as recent demand makes it worth it)")
	fl.Float64Var(weight, "idle-delay-weight", api.DefaultDelayWeight, "adaptive idle policy: seconds of node time one second of queue delay is worth")
}

// idlePolicyFlags applies the idle policy flags onto p: --idle-policy
// replaces the policy, --idle-delay-weight sets its weight.
func idlePolicyFlags(set func(string) bool, p *IdlePolicySpec, kind string, weight float64) *IdlePolicySpec {
	if set("idle-policy") {
		p = &IdlePolicySpec{Kind: kind}
	}
	if set("idle-delay-weight") {
		if p == nil {
			p = &IdlePolicySpec{}
		}
		p.DelayWeight = &weight
	}
	return p
}

func applyComputeFlags(cmd *cobra.Command, f *computeFlags, s *ComputeSpec) error {
	set := cmd.Flags().Changed
	str := func(flag string, dst *string, v string) {
		if set(flag) {
			*dst = v
		}
	}
	str("name", &s.Name, f.name)
	str("type", &s.Type, f.typ)
	str("size", &s.Size, f.size)
	str("tier", &s.Tier, f.tier)
	str("location", &s.Location, f.location)
	str("description", &s.Description, f.description)
	if set("min-instances") {
		s.MinInstances = &f.minInstances
	}
	if set("max-instances") {
		s.MaxInstances = &f.maxInstances
	}
	if set("idle-time-before-scale-down") {
		s.IdleTimeBeforeScaleDown = &f.idle
	}
	if set("tags") {
		s.Tags = parseTags(f.tags)
	}
	if set("vnet-name") || set("subnet") {
		if s.NetworkSettings == nil {
			s.NetworkSettings = &NetworkSettings{}
		}
		str("vnet-name", &s.NetworkSettings.VnetName, f.vnet)
		str("subnet", &s.NetworkSettings.Subnet, f.subnet)
	}
	if set("admin-username") || set("admin-password") || set("ssh-key-value") {
		if s.SSHSettings == nil {
			s.SSHSettings = &SSHSettings{}
		}
		str("admin-username", &s.SSHSettings.AdminUsername, f.adminUser)
		str("admin-password", &s.SSHSettings.AdminPassword, f.adminPassword)
		str("ssh-key-value", &s.SSHSettings.SSHKeyValue, f.sshKey)
	}
	if set("ssh-public-access-enabled") {
		s.SSHPublicAccessEnabled = &f.sshPublic
	}
	if set("enable-node-public-ip") {
		s.EnableNodePublicIP = &f.nodePublicIP
	}
	s.IdlePolicy = idlePolicyFlags(set, s.IdlePolicy, f.idlePolicy, f.delayWeight)
	if set("identity-type") || set("user-assigned-identities") {
		if s.Identity == nil {
			s.Identity = &IdentitySpec{}
		}
		str("identity-type", &s.Identity.Type, f.identityType)
		if set("user-assigned-identities") {
			s.Identity.UserAssignedIdentities = nil
			for _, id := range f.userIdentities {
				s.Identity.UserAssignedIdentities = append(s.Identity.UserAssignedIdentities, UserIdentitySpec{ResourceID: id})
			}
		}
	}
	var err error
	s.QueuePolicy, err = f.queue.apply(set, s.QueuePolicy)
	return err
}

// parseTags reads key=value pairs; a value may hold several separated by spaces.
func parseTags(vals []string) map[string]string {
	out := map[string]string{}
	for _, v := range vals {
		for _, kv := range strings.Fields(v) {
			k, val, _ := strings.Cut(kv, "=")
			out[k] = val
		}
	}
	return out
}

// waitWithProgress follows an operation, printing its status to stderr.
func waitWithProgress(ctx context.Context, g *globals, c *client.Client, resp *client.Response, what string) error {
	last := ""
	err := c.Wait(ctx, resp, func(st string) {
		if st != last {
			fmt.Fprintf(g.stderr, "%s: %s\n", what, st)
			last = st
		}
	})
	if err != nil {
		return fmt.Errorf("%s failed: %w", strings.ToLower(what[:1])+what[1:], err)
	}
	return nil
}

func (g *globals) showCompute(c api.Compute) error {
	v := fromARM(c)
	err := g.show("json", v, func() *table {
		t := computeTable()
		addComputeRow(t, v)
		return t
	})
	if f, _ := g.format("json"); err == nil && f == "table" && g.queryExpr == "" && v.FairShare != nil && len(v.FairShare.Groups) > 0 {
		fmt.Fprintln(g.stdout)
		err = groupsTable(v.FairShare).print(g.stdout)
	}
	return err
}

func computeTable() *table {
	return &table{header: []string{"NAME", "STATE", "SIZE", "TIER", "NODES", "TARGET", "MIN", "MAX", "IDLE(S)", "IDLE/RUN/PREP/LEAVE/UNUSABLE/PREEMPT"}}
}

func addComputeRow(t *table, v ComputeView) {
	n := v.NodeStateCounts
	deref := func(p *int32) any {
		if p == nil {
			return "-"
		}
		return *p
	}
	idle := any("-")
	if v.IdleTimeBeforeScaleDown != nil {
		idle = *v.IdleTimeBeforeScaleDown
	}
	t.add(v.Name, v.ProvisioningState+"/"+v.AllocationState, v.Size, v.Tier, v.CurrentNodeCount, v.TargetNodeCount,
		deref(v.MinInstances), deref(v.MaxInstances), idle,
		fmt.Sprintf("%d/%d/%d/%d/%d/%d", n.IdleNodeCount, n.RunningNodeCount, n.PreparingNodeCount, n.LeavingNodeCount, n.UnusableNodeCount, n.PreemptedNodeCount))
}

func newComputeShowCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a compute cluster",
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
			return g.showCompute(comp)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newComputeListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the compute clusters of the workspace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			list, err := c.ListComputes(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]ComputeView, 0, len(list))
			for _, comp := range list {
				views = append(views, fromARM(comp))
			}
			return g.show("table", views, func() *table {
				t := computeTable()
				for _, v := range views {
					addComputeRow(t, v)
				}
				return t
			})
		},
	}
}

func newComputeUpdateCmd(g *globals) *cobra.Command {
	var (
		name           string
		min, max       int32
		idle           int64
		tags           []string
		description    string
		identityType   string
		userIdentities []string
		noWait         bool
		idlePolicy     string
		delayWeight    float64
		file           string
		sets           []string
		queue          queueFlags
	)
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Update a cluster's scale settings, schedules, idle policy, queue policy, tags or description",
		Example: `  cumulus compute update -n cpu-cluster --max-instances 8 --idle-time-before-scale-down 600
  cumulus compute update -n cpu-cluster --idle-policy adaptive
  cumulus compute update -n shared --queue-policy fair --fair-share-by tag:team --fair-share-weight vision=2
  cumulus compute update -n shared --preemption over_share --min-runtime 15m
  cumulus compute update --file compute.yml   # its schedules replace the cluster's
  cumulus compute update -n cpu-cluster --set max_instances=8 --set tags.team=ml --set idle_policy.kind=adaptive`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := cmd.Flags().Changed
			for _, fixed := range []string{"size", "tier", "location", "vnet-name", "subnet"} {
				if set(fixed) {
					return fmt.Errorf("--%s cannot change on an existing compute (nor can size, tier, location or network); create another compute with it ('compute create -n NEW --%s …'), send jobs there and delete this one", fixed, fixed)
				}
			}
			if set("set") {
				return updateComputeSet(cmd, g, name, sets, noWait)
			}
			scale := set("min-instances") || set("max-instances") || set("idle-time-before-scale-down")
			policy := set("idle-policy") || set("idle-delay-weight")
			var spec *ComputeSpec
			if file != "" {
				s, err := loadYAML[ComputeSpec](file)
				if err != nil {
					return err
				}
				spec = &s
				if !set("name") {
					name = s.Name
				}
			}
			if name == "" {
				return fmt.Errorf("give --name (or a --file that names the compute)")
			}
			queued := queue.set(set)
			if spec == nil && !scale && !policy && !queued && !set("tags") && !set("description") && !set("identity-type") && !set("user-assigned-identities") {
				return fmt.Errorf("nothing to update: give --file, --min-instances, --max-instances, --idle-time-before-scale-down, --idle-policy, --queue-policy, --tags, --description or --identity-type")
			}
			var idleP *api.IdlePolicy
			if policy {
				if !set("idle-policy") {
					return fmt.Errorf("--idle-delay-weight needs --idle-policy adaptive (the idle policy is replaced as a whole)")
				}
				p, err := idlePolicyFlags(set, nil, idlePolicy, delayWeight).toARM()
				if err != nil {
					return err
				}
				idleP = p
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var queueP *api.QueuePolicy
			if queued {
				// Flags other than --queue-policy change the policy there is.
				var cur *QueuePolicySpec
				if !set("queue-policy") {
					comp, err := c.GetCompute(ctx, name)
					if err != nil {
						return err
					}
					cur = queuePolicySpec(comp.Aml().QueuePolicy)
				}
				p, err := queue.apply(set, cur)
				if err != nil {
					return err
				}
				if queueP, err = p.toARM(); err != nil {
					return err
				}
			}
			var out api.Compute
			if spec != nil || set("tags") || set("description") || set("identity-type") || set("user-assigned-identities") {
				// A full PUT, as az ml does, guarded by the ETag so a
				// concurrent change is not overwritten: on a conflict
				// (the controllers record the cluster's status too) the
				// changes are applied again to what is there now.
				edit := func(cur *api.Compute) error {
					if spec != nil {
						if err := spec.applyUpdate(cur); err != nil {
							return err
						}
					}
					if set("tags") {
						cur.Tags = parseTags(tags)
					}
					if set("description") {
						cur.Properties.Description = description
					}
					if set("identity-type") || set("user-assigned-identities") {
						spec := IdentitySpec{Type: identityType}
						if spec.Type == "" && cur.Identity != nil {
							for k, t := range identityTypes {
								if t == cur.Identity.Type {
									spec.Type = k
								}
							}
						}
						for _, id := range userIdentities {
							spec.UserAssignedIdentities = append(spec.UserAssignedIdentities, UserIdentitySpec{ResourceID: id})
						}
						id, err := spec.toARM()
						if err != nil {
							return err
						}
						cur.Identity = id
					}
					applyScale(cur.Aml(), set, min, max, idle)
					if policy {
						cur.Aml().IdlePolicy = idleP
					}
					if queued {
						cur.Aml().QueuePolicy = queueP
					}
					return nil
				}
				out, _, err = c.EditCompute(ctx, name, func(cur api.Compute) (api.Compute, bool, error) {
					return cur, true, edit(&cur)
				})
				if err != nil {
					return err
				}
			} else {
				var s api.ScaleSettings
				if set("min-instances") {
					s.MinNodeCount = &min
				}
				if set("max-instances") {
					s.MaxNodeCount = &max
				}
				if set("idle-time-before-scale-down") {
					if idle < 0 {
						return fmt.Errorf("--idle-time-before-scale-down must be 0 or more seconds")
					}
					s.NodeIdleTimeBeforeScaleDown = fmt.Sprintf("PT%dS", idle)
				}
				u := api.ClusterUpdateProperties{IdlePolicy: idleP, QueuePolicy: queueP}
				if scale {
					u.ScaleSettings = &s
				}
				if out, err = c.UpdateCompute(ctx, name, u); err != nil {
					return err
				}
			}
			_ = noWait // updates apply at once; the flag is accepted for az ml compatibility
			return g.showCompute(out)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "name of the compute")
	fl.Int32Var(&min, "min-instances", 0, "minimum nodes")
	fl.Int32Var(&max, "max-instances", 0, "maximum nodes")
	fl.Int64Var(&idle, "idle-time-before-scale-down", 0, "seconds a node stays idle before it is removed")
	fl.StringArrayVar(&tags, "tags", nil, "replace the tags with these key=value pairs")
	fl.StringVar(&description, "description", "", "new description")
	fl.StringVar(&identityType, "identity-type", "", "system_assigned, user_assigned, system_assigned,user_assigned or none")
	fl.StringArrayVar(&userIdentities, "user-assigned-identities", nil, "ARM ids of user-assigned identities (repeatable)")
	fl.BoolVar(&noWait, "no-wait", false, "do not wait (updates apply at once)")
	fl.StringVarP(&file, "file", "f", "", "YAML file in the az ml amlcompute schema: its schedules replace the cluster's; its description, tags, instances, idle time and idle policy apply when given")
	addIdlePolicyFlags(cmd, &idlePolicy, &delayWeight)
	queue.register(cmd)
	fl.StringArrayVar(&sets, "set", nil, "KEY=VALUE on the compute's YAML keys, as az's --set (max_instances=8, tags.team=ml, idle_policy.kind=adaptive, schedules.0.max_instances=2); repeatable, alone with --name")
	// Accepted only to say that they cannot change, not "unknown flag".
	var fixed string
	for _, name := range []string{"size", "tier", "location", "vnet-name", "subnet"} {
		fl.StringVar(&fixed, name, "", "cannot change on an existing compute")
		_ = fl.MarkHidden(name)
	}
	return cmd
}

func applyScale(a *api.AmlComputeProperties, set func(string) bool, min, max int32, idle int64) {
	if a.ScaleSettings == nil {
		a.ScaleSettings = &api.ScaleSettings{}
	}
	if set("min-instances") {
		a.ScaleSettings.MinNodeCount = &min
	}
	if set("max-instances") {
		a.ScaleSettings.MaxNodeCount = &max
	}
	if set("idle-time-before-scale-down") {
		a.ScaleSettings.NodeIdleTimeBeforeScaleDown = fmt.Sprintf("PT%dS", idle)
	}
}

func newComputeDeleteCmd(g *globals) *cobra.Command {
	var (
		name   string
		yes    bool
		noWait bool
	)
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a compute cluster (its nodes are removed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				ok, err := confirm(g, fmt.Sprintf("Delete compute %s and all its nodes?", name))
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("not deleted")
				}
			}
			return deleteCompute(cmd.Context(), g, name, noWait)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for the operation to finish")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// deleteCompute deletes a compute and its nodes, waiting unless noWait.
func deleteCompute(ctx context.Context, g *globals, name string, noWait bool) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	resp, err := c.DeleteCompute(ctx, name)
	if err != nil {
		return err
	}
	if resp.Status == 204 {
		return fmt.Errorf("compute %s does not exist", name)
	}
	if noWait {
		fmt.Fprintf(g.stderr, "Deleting compute %s (not waiting)\n", name)
		return nil
	}
	return waitWithProgress(ctx, g, c, resp, "Deleting compute "+name)
}

// confirm asks a yes/no question on the terminal; without one (a script,
// a pipe) it refuses, as az does.
func confirm(g *globals, q string) (bool, error) {
	if !isatty.IsTerminal(os.Stdin.Fd()) {
		return false, fmt.Errorf("refusing to delete without confirmation: the input is not a terminal to ask on; pass --yes")
	}
	fmt.Fprintf(g.stderr, "%s (y/n): ", q)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

func newComputeListNodesCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "list-nodes",
		Short: "List the nodes of a compute cluster",
		Long: "List the nodes of a compute cluster: state, address and the job each runs.\n\n" +
			"A multi-node job holds its nodes until it ends: a node whose rank has ended while other ranks\n" +
			"still run shows \"running (rank ended)\" (rank_ended in json and yaml); it takes no other work\n" +
			"and is not scaled down until the job ends.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			nodes, err := c.ListNodes(cmd.Context(), name)
			if err != nil {
				return err
			}
			type row struct {
				NodeID           string   `json:"node_id"`
				PrivateIPAddress string   `json:"private_ip_address"`
				PublicIPAddress  *string  `json:"public_ip_address"`
				Port             int32    `json:"port"`
				NodeState        string   `json:"node_state"`
				CurrentJobName   *string  `json:"current_job_name"`
				RankEnded        bool     `json:"rank_ended,omitempty"`
				GPUs             []string `json:"gpus,omitempty"`
			}
			rows := make([]row, 0, len(nodes))
			for _, n := range nodes {
				rows = append(rows, row{n.NodeID, n.PrivateIPAddress, n.PublicIPAddress, n.Port, n.NodeState, n.RunID, n.RankEnded, n.GPUs})
			}
			return g.show("table", rows, func() *table {
				t := &table{header: []string{"NODE ID", "STATE", "PRIVATE IP", "PORT", "CURRENT JOB", "GPUS"}}
				for _, r := range rows {
					job, state, gpus := "-", r.NodeState, "-"
					if r.CurrentJobName != nil {
						job = *r.CurrentJobName
					}
					if r.RankEnded {
						state += " (rank ended)" // held for its job until every rank has ended
					}
					if len(r.GPUs) > 0 {
						gpus = strings.Join(r.GPUs, ",")
					}
					t.add(r.NodeID, state, r.PrivateIPAddress, r.Port, job, gpus)
				}
				return t
			})
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newComputeListSizesCmd(g *globals) *cobra.Command {
	var loc, typ string
	var gpu bool
	cmd := &cobra.Command{
		Use:   "list-sizes",
		Short: "List the VM sizes clusters may use, with their hourly price",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			sizes, err := c.ListSizes(cmd.Context(), loc)
			if err != nil {
				return err
			}
			var out []api.VMSize
			for _, s := range sizes {
				if typ != "" && !containsFold(s.SupportedComputeTypes, typ) {
					continue
				}
				if gpu && s.GPUs == 0 {
					continue
				}
				out = append(out, s)
			}
			return g.show("table", out, func() *table {
				t := &table{header: []string{"NAME", "FAMILY", "VCPUS", "MEMORY(GB)", "GPUS", "LOW PRIORITY", "USD/HOUR", "LOW PRIORITY USD/HOUR"}}
				for _, s := range out {
					price, low := "-", "-"
					if p := s.EstimatedVMPrices; p != nil {
						for _, v := range p.Values {
							if v.VMTier == "LowPriority" {
								low = fmt.Sprintf("%.3f", v.RetailPrice)
							} else {
								price = fmt.Sprintf("%.3f", v.RetailPrice)
							}
						}
					}
					t.add(s.Name, s.Family, s.VCPUs, s.MemoryGB, s.GPUs, s.LowPriorityCapable, price, low)
				}
				return t
			})
		},
	}
	cmd.Flags().StringVarP(&loc, "location", "l", "", "location (default: the configured one)")
	cmd.Flags().StringVar(&typ, "type", "", "only sizes supporting this compute type (e.g. amlcompute)")
	cmd.Flags().BoolVar(&gpu, "gpu", false, "only sizes with GPUs")
	return cmd
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

func newComputeListUsageCmd(g *globals) *cobra.Command {
	var loc string
	cmd := &cobra.Command{
		Use:   "list-usage",
		Short: "List core usage and limits in a location",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			usages, err := c.ListUsages(cmd.Context(), loc)
			if err != nil {
				return err
			}
			sort.SliceStable(usages, func(i, j int) bool { return usages[i].Type < usages[j].Type })
			return g.show("table", usages, func() *table {
				t := &table{header: []string{"NAME", "CURRENT", "LIMIT", "UNIT"}}
				for _, u := range usages {
					t.add(u.Name.LocalizedValue, u.CurrentValue, u.Limit, u.Unit)
				}
				return t
			})
		},
	}
	cmd.Flags().StringVarP(&loc, "location", "l", "", "location (default: the configured one)")
	return cmd
}

func newComputeJoinTokenCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "join-token",
		Short: "Issue a token with which any machine joins the cluster ('cumulus agent --join-token')",
		Long: `Issue a join token for a cluster. Run the printed command on a machine to make
it a node of the cluster. Each call replaces the previous token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			tok, command, err := c.JoinToken(cmd.Context(), name)
			if err != nil {
				return err
			}
			out := map[string]string{"token": tok, "command": command}
			return g.show("table", out, func() *table {
				t := &table{header: []string{"RUN THIS ON THE MACHINE TO JOIN"}}
				t.add(command)
				return t
			})
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newComputeSimulateEvictionCmd(g *globals) *cobra.Command {
	var name, node string
	cmd := &cobra.Command{
		Use:   "simulate-eviction",
		Short: "Preempt a node of a low-priority cluster (its job is requeued)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if node == "" {
				if node, err = onlyNode(cmd.Context(), c, name); err != nil {
					return err
				}
			}
			if err := c.SimulateEviction(cmd.Context(), name, node); err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "Node %s is being preempted\n", node)
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	cmd.Flags().StringVar(&node, "node-id", "", "node to preempt (see 'compute list-nodes'); may be left out when the cluster has one node")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// onlyNode is the node of a cluster that has exactly one.
func onlyNode(ctx context.Context, c *client.Client, compute string) (string, error) {
	nodes, err := c.ListNodes(ctx, compute)
	if err != nil {
		return "", err
	}
	switch len(nodes) {
	case 0:
		return "", fmt.Errorf("compute %s has no nodes to preempt", compute)
	case 1:
		return nodes[0].NodeID, nil
	}
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.NodeID
	}
	return "", fmt.Errorf("compute %s has %d nodes: give --node-id, one of %s", compute, len(nodes), strings.Join(ids, ", "))
}

func newComputeConnectSSHCmd(g *globals) *cobra.Command {
	var name, node, keyFile string
	cmd := &cobra.Command{
		Use:   "connect-ssh",
		Short: "Open an SSH session on a node as the cluster's admin user (runs ssh)",
		Args:  cobra.ArbitraryArgs,
		Example: `  cumulus compute connect-ssh -n cpu-cluster --node-id tvm-… --private-key-file ~/.ssh/id_ed25519
  cumulus compute connect-ssh -n cpu-cluster --node-id tvm-… -- nvidia-smi`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			comp, err := c.GetCompute(cmd.Context(), name)
			if err != nil {
				return err
			}
			cred := comp.Aml().UserAccountCredentials
			if cred == nil || cred.AdminUserName == "" {
				return fmt.Errorf("compute %s has no admin account (set ssh_settings when creating it); its nodes run no SSH server", name)
			}
			nodes, err := c.ListNodes(cmd.Context(), name)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				if n.NodeID != node {
					continue
				}
				if n.Port == 0 {
					return fmt.Errorf("node %s has no SSH port yet (state %s)", node, n.NodeState)
				}
				host := n.PrivateIPAddress
				if n.PublicIPAddress != nil {
					host = *n.PublicIPAddress
				}
				sshArgs := []string{"-p", fmt.Sprint(n.Port), "-o", "StrictHostKeyChecking=accept-new"}
				if keyFile != "" {
					sshArgs = append(sshArgs, "-i", keyFile)
				}
				sshArgs = append(append(sshArgs, cred.AdminUserName+"@"+host), args...)
				ssh := exec.CommandContext(cmd.Context(), "ssh", sshArgs...)
				ssh.Stdin, ssh.Stdout, ssh.Stderr = os.Stdin, g.stdout, g.stderr
				return ssh.Run()
			}
			return fmt.Errorf("node %s is not a node of compute %s (see 'cumulus compute list-nodes -n %s')", node, name, name)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "name of the compute")
	cmd.Flags().StringVar(&node, "node-id", "", "node to connect to")
	cmd.Flags().StringVar(&keyFile, "private-key-file", "", "private key for the admin user's public key")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("node-id")
	return cmd
}

// updateComputeSet applies --set assignments to the compute as it is now,
// in its YAML keys, and updates it to the result as 'compute apply' does
// (guarded by the ETag, again on a conflict).
func updateComputeSet(cmd *cobra.Command, g *globals, name string, sets []string, noWait bool) error {
	others := false
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "set" && f.Name != "name" && f.Name != "no-wait" && cmd.LocalFlags().Lookup(f.Name) != nil {
			others = true
		}
	})
	if others || name == "" {
		return fmt.Errorf("--set goes with --name alone (put every change in --set, or use the other flags without it)")
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	cur, err := c.GetCompute(ctx, name)
	if err != nil {
		return err
	}
	spec, err := setPaths(fromARM(cur).ComputeSpec, sets, computeSetRefused)
	if err != nil {
		return err
	}
	if _, err := applyCompute(ctx, g, c, spec, false, noWait); err != nil {
		return err
	}
	out, err := c.GetCompute(ctx, name)
	if err != nil {
		return err
	}
	return g.showCompute(out)
}
