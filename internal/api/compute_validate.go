package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/catalog"
)

// PrepareCompute validates a PUT body for the compute named name and fills
// defaults. existing is the stored compute when the PUT updates one; then
// only description, tags, identity, scale settings, the idle policy, the
// schedules, the queue policy, remote login and the admin credentials (used by nodes created
// from then on) may change. It does not fill read-only or server-owned
// fields (ids, times, states).
func PrepareCompute(c *Compute, name string, existing *Compute, defaultLocation string) error {
	var v Validation
	if err := CheckComputeName(name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	if c.Properties.ComputeType == "" {
		v.Add(CodeValidationError, "properties.computeType", "computeType is required; Cumulus manages %s", ComputeTypeAml)
	} else if c.Properties.ComputeType != ComputeTypeAml {
		v.Add(CodeUnsupported, "properties.computeType", "compute type %q is not supported; Cumulus manages %s clusters only", c.Properties.ComputeType, ComputeTypeAml)
	}
	if c.Location == "" {
		c.Location = defaultLocation
	} else if err := CheckSegment("location", c.Location); err != nil {
		v.Add(CodeValidationError, "location", "%s", err)
	}
	if c.Properties.ComputeLocation == "" {
		c.Properties.ComputeLocation = c.Location
	} else if err := CheckSegment("computeLocation", c.Properties.ComputeLocation); err != nil {
		v.Add(CodeValidationError, "properties.computeLocation", "%s", err)
	}
	if len(c.Properties.Description) > maxDescription {
		v.Add(CodeValidationError, "properties.description", "description is longer than %d characters", maxDescription)
	}
	checkTags(&v, c.Tags)
	if c.Identity != nil {
		checkIdentity(&v, c.Identity)
	}
	a := c.Aml()
	prepareSize(&v, a)
	prepareScale(&v, a)
	prepareIdlePolicy(&v, a.IdlePolicy)
	prepareSchedules(&v, a)
	prepareQueuePolicy(&v, a.QueuePolicy)
	preparePreemption(&v, a)
	prepareKubernetes(&v, a.Kubernetes)
	prepareSlurm(&v, a.Slurm)
	prepareNetwork(&v, a)
	prepareCredentials(&v, a)
	if existing != nil {
		checkImmutable(&v, c, existing)
	}
	return v.Err()
}

func prepareSize(v *Validation, a *AmlComputeProperties) {
	if a.OSType == "" {
		a.OSType = OSLinux
	}
	switch oneOf(a.OSType, OSLinux, OSWindows) {
	case OSLinux:
		a.OSType = OSLinux
	case OSWindows:
		v.Add(CodeValidationError, "properties.properties.osType", "osType Windows is not supported: Cumulus nodes run Linux")
	default:
		v.Add(CodeValidationError, "properties.properties.osType", "osType %q is not one of Linux, Windows", a.OSType)
	}
	if a.VirtualMachineImage != nil {
		v.Add(CodeValidationError, "properties.properties.virtualMachineImage", "virtualMachineImage applies to Windows clusters only and is not supported")
	}
	if a.VMPriority == "" {
		a.VMPriority = PriorityDedicated
	}
	prio := oneOf(a.VMPriority, PriorityDedicated, PriorityLowPriority)
	if prio == "" {
		v.Add(CodeValidationError, "properties.properties.vmPriority", "vmPriority %q is not one of Dedicated, LowPriority", a.VMPriority)
	}
	a.VMPriority = prio
	if a.VMSize == "" {
		a.VMSize = DefaultVMSize
	}
	if len(a.VMSize) > 64 {
		v.Add(CodeValidationError, "properties.properties.vmSize", "vmSize %.64q… is not a known size (list them with 'cumulus compute list-sizes')", a.VMSize)
		return
	}
	if r, ok := catalog.RetiredSize(a.VMSize); ok {
		v.Add(CodeValidationError, "properties.properties.vmSize", "%s", retiredSize(r))
		return
	}
	size, ok := catalog.Lookup(a.VMSize)
	if !ok {
		v.Add(CodeValidationError, "properties.properties.vmSize", "vmSize %q is not a known size; did you mean %s? (list them with 'cumulus compute list-sizes')",
			a.VMSize, strings.Join(catalog.Closest(a.VMSize, 3), ", "))
		return
	}
	a.VMSize = size.Name
	if prio == PriorityLowPriority && !size.LowPriority {
		v.Add(CodeValidationError, "properties.properties.vmPriority", "vmSize %s cannot be used with low priority; choose a dedicated cluster or a low-priority capable size", size.Name)
	}
}

// Bounds of a compute's durations. An idle time of 0 removes a node as
// soon as it is idle; below a second it means nothing more. A grace of 0
// would be read as "none given" by the agent (which then uses its own),
// so a job always gets at least a second between SIGTERM and SIGKILL.
const (
	MinIdleTime        = time.Second
	MaxIdleTime        = 7 * 24 * time.Hour
	MinPreemptionGrace = time.Second
	MaxPreemptionGrace = time.Hour
)

func prepareScale(v *Validation, a *AmlComputeProperties) {
	if a.ScaleSettings == nil {
		// Azure's CLI defaults: min 0, max 4, idle 120 s.
		four := int32(4)
		a.ScaleSettings = &ScaleSettings{MaxNodeCount: &four}
	}
	s := a.ScaleSettings
	if s.MinNodeCount == nil {
		zero := int32(0)
		s.MinNodeCount = &zero
	}
	if s.NodeIdleTimeBeforeScaleDown == "" {
		s.NodeIdleTimeBeforeScaleDown = DefaultIdleTime
	}
	const target = "properties.properties.scaleSettings"
	switch {
	case s.MaxNodeCount == nil:
		v.Add(CodeValidationError, target+".maxNodeCount", "maxNodeCount is required")
	case *s.MaxNodeCount < 1:
		v.Add(CodeValidationError, target+".maxNodeCount", "maxNodeCount must be at least 1, got %d", *s.MaxNodeCount)
	case *s.MaxNodeCount > MaxClusterNodes:
		v.Add(CodeValidationError, target+".maxNodeCount", "maxNodeCount must be at most %d, got %d", MaxClusterNodes, *s.MaxNodeCount)
	}
	if *s.MinNodeCount < 0 {
		v.Add(CodeValidationError, target+".minNodeCount", "minNodeCount may not be negative, got %d", *s.MinNodeCount)
	} else if s.MaxNodeCount != nil && *s.MinNodeCount > *s.MaxNodeCount {
		v.Add(CodeValidationError, target+".minNodeCount", "minNodeCount (%d) may not exceed maxNodeCount (%d)", *s.MinNodeCount, *s.MaxNodeCount)
	}
	if d, err := ParseDuration(s.NodeIdleTimeBeforeScaleDown); err != nil {
		v.Add(CodeValidationError, target+".nodeIdleTimeBeforeScaleDown", "nodeIdleTimeBeforeScaleDown: %s", err)
	} else if d > MaxIdleTime {
		v.Add(CodeValidationError, target+".nodeIdleTimeBeforeScaleDown", "nodeIdleTimeBeforeScaleDown may be at most 7 days, got %s", s.NodeIdleTimeBeforeScaleDown)
	} else if d != 0 && d < MinIdleTime {
		v.Add(CodeValidationError, target+".nodeIdleTimeBeforeScaleDown", "nodeIdleTimeBeforeScaleDown must be PT0S (remove a node as soon as it is idle) or at least 1 second, got %s", s.NodeIdleTimeBeforeScaleDown)
	}
}

func preparePreemption(v *Validation, a *AmlComputeProperties) {
	if a.PreemptionGracePeriod == "" {
		a.PreemptionGracePeriod = DefaultPreemptionGrace
	}
	const target = "properties.properties.preemptionGracePeriod"
	if d, err := ParseDuration(a.PreemptionGracePeriod); err != nil {
		v.Add(CodeValidationError, target, "preemptionGracePeriod: %s", err)
	} else if d < MinPreemptionGrace || d > MaxPreemptionGrace {
		v.Add(CodeValidationError, target, "preemptionGracePeriod must be between 1 second and 1 hour, got %s", a.PreemptionGracePeriod)
	}
}

func prepareNetwork(v *Validation, a *AmlComputeProperties) {
	if a.Subnet != nil && !isSubnetID(a.Subnet.ID) {
		v.Add(CodeValidationError, "properties.properties.subnet.id",
			"%q is not a subnet id of the form /subscriptions/S/resourceGroups/G/providers/Microsoft.Network/virtualNetworks/V/subnets/NAME", a.Subnet.ID)
	}
	if a.RemoteLoginPortPublicAccess == "" {
		a.RemoteLoginPortPublicAccess = RemoteLoginNotSpecified
	}
	r := oneOf(a.RemoteLoginPortPublicAccess, RemoteLoginEnabled, RemoteLoginDisabled, RemoteLoginNotSpecified)
	if r == "" {
		v.Add(CodeValidationError, "properties.properties.remoteLoginPortPublicAccess",
			"remoteLoginPortPublicAccess %q is not one of Enabled, Disabled, NotSpecified", a.RemoteLoginPortPublicAccess)
	}
	a.RemoteLoginPortPublicAccess = r
	if a.EnableNodePublicIP == nil {
		t := true
		a.EnableNodePublicIP = &t
	}
}

func prepareCredentials(v *Validation, a *AmlComputeProperties) {
	c := a.UserAccountCredentials
	if c == nil {
		return
	}
	const target = "properties.properties.userAccountCredentials"
	if err := checkUserName(c.AdminUserName); err != nil {
		v.Add(CodeValidationError, target+".adminUserName", "%s", err)
	}
	if c.AdminUserSSHPublicKey == "" && c.AdminUserPassword == "" {
		v.Add(CodeValidationError, target, "give adminUserSshPublicKey or adminUserPassword (or both)")
	}
	if k := c.AdminUserSSHPublicKey; k != "" && !looksLikeSSHKey(k) {
		v.Add(CodeValidationError, target+".adminUserSshPublicKey", "adminUserSshPublicKey is not an OpenSSH public key (it should start with ssh-ed25519, ssh-rsa or ecdsa-sha2-…)")
	}
	if p := c.AdminUserPassword; p != "" && (len(p) < 12 || len(p) > 123) {
		v.Add(CodeValidationError, target+".adminUserPassword", "adminUserPassword must be 12 to 123 characters long")
	}
}

func checkUserName(u string) error {
	if u == "" {
		return fmt.Errorf("adminUserName is required")
	}
	if len(u) > 32 {
		return fmt.Errorf("adminUserName %q is longer than 32 characters", u)
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || (c >= 'A' && c <= 'Z')) || (i == 0 && !isLetter(c) && c != '_') {
			return fmt.Errorf("adminUserName %q must start with a letter or '_' and contain only letters, digits, '_' and '-'", u)
		}
	}
	switch strings.ToLower(u) {
	case "root", "admin", "administrator":
		return fmt.Errorf("adminUserName %q is reserved", u)
	}
	return nil
}

func looksLikeSSHKey(k string) bool {
	f := strings.Fields(k)
	if len(f) < 2 {
		return false
	}
	return strings.HasPrefix(f[0], "ssh-") || strings.HasPrefix(f[0], "ecdsa-sha2-") || strings.HasPrefix(f[0], "sk-")
}

// checkImmutable refuses changes to what a PUT on an existing compute may
// not change (Azure recreates nothing in place either).
func checkImmutable(v *Validation, c, old *Compute) {
	a, o := c.Aml(), old.Aml()
	same := func(field, now, was string) {
		if !strings.EqualFold(now, was) {
			v.Add(CodeImmutable, "properties.properties."+field,
				"%s of an existing compute cannot change (%q → %q); delete the compute and create it again", field, was, now)
		}
	}
	same("vmSize", a.VMSize, o.VMSize)
	same("vmPriority", a.VMPriority, o.VMPriority)
	same("osType", a.OSType, o.OSType)
	if !strings.EqualFold(c.Properties.ComputeLocation, old.Properties.ComputeLocation) {
		v.Add(CodeImmutable, "properties.computeLocation", "computeLocation of an existing compute cannot change (%q → %q)", old.Properties.ComputeLocation, c.Properties.ComputeLocation)
	}
	subnet := func(r *ResourceRef) string {
		if r == nil {
			return ""
		}
		return r.ID
	}
	same("subnet", subnet(a.Subnet), subnet(o.Subnet))
	if !strings.EqualFold(c.Location, old.Location) {
		v.Add(CodeImmutable, "location", "location of an existing compute cannot change (%q → %q)", old.Location, c.Location)
	}
	flag := func(p *bool, def bool) string {
		if p == nil {
			return fmt.Sprint(def)
		}
		return fmt.Sprint(*p)
	}
	same("enableNodePublicIp", flag(a.EnableNodePublicIP, true), flag(o.EnableNodePublicIP, true))
	same("isolatedNetwork", flag(a.IsolatedNetwork, false), flag(o.IsolatedNetwork, false))
	if flag(c.Properties.DisableLocalAuth, false) != flag(old.Properties.DisableLocalAuth, false) {
		v.Add(CodeImmutable, "properties.disableLocalAuth", "disableLocalAuth of an existing compute cannot change")
	}
}

// ApplyUpdate applies a PATCH's properties onto a stored compute and
// re-validates the result: the scale settings given are merged into the
// stored ones, an idle policy or a queue policy given replaces the stored
// one.
func ApplyUpdate(c *Compute, u *ClusterUpdateProperties) error {
	if u == nil || (u.ScaleSettings == nil && u.IdlePolicy == nil && u.Schedules == nil && u.QueuePolicy == nil) {
		return BadRequest(CodeValidationError, "the PATCH body must contain properties.properties.scaleSettings, .idlePolicy, .schedules or .queuePolicy")
	}
	a := c.Aml()
	if ss := u.ScaleSettings; ss != nil {
		s := a.ScaleSettings
		if s == nil {
			s = &ScaleSettings{}
			a.ScaleSettings = s
		}
		if ss.MaxNodeCount != nil {
			s.MaxNodeCount = ss.MaxNodeCount
		}
		if ss.MinNodeCount != nil {
			s.MinNodeCount = ss.MinNodeCount
		}
		if ss.NodeIdleTimeBeforeScaleDown != "" {
			s.NodeIdleTimeBeforeScaleDown = ss.NodeIdleTimeBeforeScaleDown
		}
	}
	if u.IdlePolicy != nil {
		p := *u.IdlePolicy
		a.IdlePolicy = &p
	}
	if u.Schedules != nil {
		a.Schedules = append([]ScaleSchedule(nil), (*u.Schedules)...)
	}
	if u.QueuePolicy != nil {
		p := *u.QueuePolicy
		a.QueuePolicy = &p
	}
	var v Validation
	prepareScale(&v, a)
	prepareIdlePolicy(&v, a.IdlePolicy)
	prepareSchedules(&v, a)
	prepareQueuePolicy(&v, a.QueuePolicy)
	return v.Err()
}

// retiredSize says that a size is retired and what replaces it.
func retiredSize(r catalog.Retired) string {
	msg := fmt.Sprintf("vmSize %s is retired: Azure retired the %s on %s and creates no cluster of it; use its successor %s", r.Name, r.Series, r.On, r.Successor)
	if s, ok := catalog.Lookup(r.Successor); ok {
		msg += fmt.Sprintf(" (%d vCPUs, %g GB, %d %s GPU", s.VCPUs, s.MemoryGB, s.GPUs, s.GPUModel)
		if s.GPUs != 1 {
			msg += "s"
		}
		msg += ")"
	}
	return msg
}
