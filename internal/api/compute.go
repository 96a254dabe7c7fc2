package api

import "time"

// Compute is the ComputeResource envelope.
type Compute struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Identity   *Identity         `json:"identity,omitempty"`
	SKU        *SKU              `json:"sku,omitempty"`
	SystemData *SystemData       `json:"systemData,omitempty"`
	Properties ComputeProperties `json:"properties"`
}

// ComputeProperties is the Compute base, discriminated by computeType.
// Cumulus manages the AmlCompute type only.
type ComputeProperties struct {
	ComputeType        string                `json:"computeType"`
	ComputeLocation    string                `json:"computeLocation,omitempty"`
	ProvisioningState  string                `json:"provisioningState,omitempty"`
	Description        string                `json:"description,omitempty"`
	CreatedOn          *time.Time            `json:"createdOn,omitempty"`
	ModifiedOn         *time.Time            `json:"modifiedOn,omitempty"`
	ResourceID         string                `json:"resourceId,omitempty"`
	ProvisioningErrors []ErrorResponse       `json:"provisioningErrors,omitempty"`
	IsAttachedCompute  bool                  `json:"isAttachedCompute"`
	DisableLocalAuth   *bool                 `json:"disableLocalAuth,omitempty"`
	Properties         *AmlComputeProperties `json:"properties,omitempty"`
}

// AmlComputeProperties is the AmlCompute-specific block.
type AmlComputeProperties struct {
	OSType                      string                  `json:"osType,omitempty"`
	VMSize                      string                  `json:"vmSize,omitempty"`
	VMPriority                  string                  `json:"vmPriority,omitempty"`
	VirtualMachineImage         *ResourceRef            `json:"virtualMachineImage,omitempty"`
	IsolatedNetwork             *bool                   `json:"isolatedNetwork,omitempty"`
	ScaleSettings               *ScaleSettings          `json:"scaleSettings,omitempty"`
	UserAccountCredentials      *UserAccountCredentials `json:"userAccountCredentials,omitempty"`
	Subnet                      *ResourceRef            `json:"subnet,omitempty"`
	RemoteLoginPortPublicAccess string                  `json:"remoteLoginPortPublicAccess,omitempty"`
	EnableNodePublicIP          *bool                   `json:"enableNodePublicIp,omitempty"`
	PropertyBag                 any                     `json:"propertyBag,omitempty"`
	// PreemptionGracePeriod (Cumulus extension, ignored by Azure clients):
	// how long a job on a preempted low-priority node gets between SIGTERM
	// and SIGKILL. ISO-8601, default PT30S.
	PreemptionGracePeriod string `json:"preemptionGracePeriod,omitempty"`
	// Kubernetes (Cumulus extension, ignored by Azure clients) places the
	// cluster's node pods when the server runs --provider kubernetes.
	Kubernetes *KubernetesPlacement `json:"kubernetes,omitempty"`
	// Slurm (Cumulus extension, ignored by Azure clients) places the
	// cluster's node jobs when the server runs --provider slurm.
	Slurm *SlurmPlacement `json:"slurm,omitempty"`
	// IdlePolicy (Cumulus extension, ignored by Azure clients) chooses how
	// long idle nodes are kept; absent is Azure's fixed
	// nodeIdleTimeBeforeScaleDown.
	IdlePolicy *IdlePolicy `json:"idlePolicy,omitempty"`
	// Schedules (Cumulus extension, ignored by Azure clients) change the
	// scale bounds at times given by cron expressions; see ScaleSchedule.
	Schedules []ScaleSchedule `json:"schedules,omitempty"`
	// QueuePolicy (Cumulus extension, ignored by Azure clients) orders the
	// queue (FIFO or fair share) and says when running jobs are preempted
	// for waiting ones; absent is Azure's first come, first served.
	QueuePolicy *QueuePolicy `json:"queuePolicy,omitempty"`

	// Read-only, written by the cluster controller: the schedule entry in
	// force, nil when none.
	ActiveSchedule *ActiveSchedule `json:"activeSchedule,omitempty"`
	// NetworkIsolation (read-only, a Cumulus extension) says what network
	// isolation the server's provider puts into effect for the nodes.
	NetworkIsolation string `json:"networkIsolation,omitempty"`
	// Read-only: computed from the nodes on every read.
	AllocationState               string          `json:"allocationState,omitempty"`
	AllocationStateTransitionTime *time.Time      `json:"allocationStateTransitionTime,omitempty"`
	Errors                        []ErrorResponse `json:"errors,omitempty"`
	// Blocked (read-only, a Cumulus extension) is why queued jobs wait and
	// the cluster cannot grow, as the cluster controller last decided, as
	// values; Errors words them for Azure's clients.
	Blocked Blocks `json:"blocked,omitempty"`
	// FairShare (read-only, a Cumulus extension, on a fair-share compute's
	// GET) is where each group stands: its usage, share and waiting jobs.
	FairShare        *FairShareStatus `json:"fairShare,omitempty"`
	CurrentNodeCount int32            `json:"currentNodeCount"`
	TargetNodeCount  int32            `json:"targetNodeCount"`
	NodeStateCounts  NodeStateCounts  `json:"nodeStateCounts"`
}

// ResourceRef is ARM's {id} reference.
type ResourceRef struct {
	ID string `json:"id"`
}

// ScaleSettings bounds a cluster's size. Pointers tell "absent" from zero.
type ScaleSettings struct {
	MaxNodeCount                *int32 `json:"maxNodeCount,omitempty"`
	MinNodeCount                *int32 `json:"minNodeCount,omitempty"`
	NodeIdleTimeBeforeScaleDown string `json:"nodeIdleTimeBeforeScaleDown,omitempty"`
}

// UserAccountCredentials is the node admin account. The password is
// write-only: it is sealed in the store and stripped from every read.
type UserAccountCredentials struct {
	AdminUserName         string `json:"adminUserName"`
	AdminUserSSHPublicKey string `json:"adminUserSshPublicKey,omitempty"`
	AdminUserPassword     string `json:"adminUserPassword,omitempty"`
}

// NodeStateCounts counts a cluster's nodes by state.
type NodeStateCounts struct {
	IdleNodeCount      int32 `json:"idleNodeCount"`
	RunningNodeCount   int32 `json:"runningNodeCount"`
	PreparingNodeCount int32 `json:"preparingNodeCount"`
	UnusableNodeCount  int32 `json:"unusableNodeCount"`
	LeavingNodeCount   int32 `json:"leavingNodeCount"`
	PreemptedNodeCount int32 `json:"preemptedNodeCount"`
}

// ClusterUpdateParameters is the PATCH body; note the two nested
// "properties" levels, as on the wire.
type ClusterUpdateParameters struct {
	Properties *struct {
		Properties *ClusterUpdateProperties `json:"properties,omitempty"`
	} `json:"properties,omitempty"`
}

// ClusterUpdateProperties is what a PATCH may change: Azure's scale
// settings and the Cumulus idle policy, schedules and queue policy (given,
// they replace the stored ones; [] removes the schedules).
type ClusterUpdateProperties struct {
	ScaleSettings *ScaleSettings   `json:"scaleSettings,omitempty"`
	IdlePolicy    *IdlePolicy      `json:"idlePolicy,omitempty"`
	Schedules     *[]ScaleSchedule `json:"schedules,omitempty"`
	QueuePolicy   *QueuePolicy     `json:"queuePolicy,omitempty"`
}

// ComputeSecrets is the listKeys answer for an AmlCompute: the admin
// credentials, the only place they are ever returned. Azure's model has no
// AmlCompute variant of ComputeSecrets, so official SDKs decode only its
// variants (AKS, VirtualMachine, Databricks); the answer is therefore the
// VirtualMachine variant, whose administratorAccount every SDK reads, with
// the same credentials also under userAccountCredentials, as an AmlCompute
// names them.
type ComputeSecrets struct {
	ComputeType            string                  `json:"computeType"`
	AdministratorAccount   *AdministratorAccount   `json:"administratorAccount,omitempty"`
	UserAccountCredentials *UserAccountCredentials `json:"userAccountCredentials,omitempty"`
}

// AdministratorAccount is Azure's VirtualMachineSshCredentials.
type AdministratorAccount struct {
	Username      string `json:"username"`
	Password      string `json:"password,omitempty"`
	PublicKeyData string `json:"publicKeyData,omitempty"`
}

// ComputeTypeSecrets is the computeType of a listKeys answer: see
// ComputeSecrets.
const ComputeTypeSecrets = "VirtualMachine"

// Compute types, states and enumerations.
const (
	ComputeTypeAml = "AmlCompute"

	StateCreating  = "Creating"
	StateUpdating  = "Updating"
	StateSucceeded = "Succeeded"
	StateFailed    = "Failed"
	StateDeleting  = "Deleting"
	StateCanceled  = "Canceled"

	AllocationSteady   = "Steady"
	AllocationResizing = "Resizing"

	PriorityDedicated   = "Dedicated"
	PriorityLowPriority = "LowPriority"

	OSLinux   = "Linux"
	OSWindows = "Windows"

	RemoteLoginEnabled      = "Enabled"
	RemoteLoginDisabled     = "Disabled"
	RemoteLoginNotSpecified = "NotSpecified"

	DefaultPreemptionGrace = "PT30S"
	DefaultVMSize          = "Standard_DS3_v2"
	DefaultIdleTime        = "PT120S"
	MaxClusterNodes        = 10000
)

// Aml returns the AmlCompute block, creating it if absent.
func (c *Compute) Aml() *AmlComputeProperties {
	if c.Properties.Properties == nil {
		c.Properties.Properties = &AmlComputeProperties{}
	}
	return c.Properties.Properties
}

// Scale returns min, max and the idle time of a prepared compute.
func (c *Compute) Scale() (min, max int, idle time.Duration) {
	s := c.Aml().ScaleSettings
	if s == nil {
		return 0, 0, 0
	}
	if s.MinNodeCount != nil {
		min = int(*s.MinNodeCount)
	}
	if s.MaxNodeCount != nil {
		max = int(*s.MaxNodeCount)
	}
	idle, _ = ParseDuration(s.NodeIdleTimeBeforeScaleDown)
	return min, max, idle
}

// Redacted returns a copy safe to send on GET/list: no password.
func (c Compute) Redacted() Compute {
	if c.Properties.Properties != nil && c.Properties.Properties.UserAccountCredentials != nil {
		p := *c.Properties.Properties
		cred := *p.UserAccountCredentials
		cred.AdminUserPassword = ""
		p.UserAccountCredentials = &cred
		c.Properties.Properties = &p
	}
	return c
}

// JoinToken is the answer of POST …/computes/{name}/joinToken, a Cumulus
// extension: a token with which any machine running `cumulus agent` joins
// the cluster as a node. Each call replaces the previous token.
type JoinToken struct {
	Token   string `json:"token"`
	Command string `json:"command"`
}

// PreemptionGrace is the grace a preempted job gets on this compute.
func (c *Compute) PreemptionGrace() time.Duration {
	d, err := ParseDuration(c.Aml().PreemptionGracePeriod)
	if err != nil {
		d, _ = ParseDuration(DefaultPreemptionGrace)
	}
	return d
}
