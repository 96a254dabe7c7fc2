package kubernetes

import (
	"strconv"
	"time"
)

// The Kubernetes objects the provider reads and writes, with the fields
// it uses and their JSON names in the API (core/v1 Pod and Secret,
// networking.k8s.io/v1 NetworkPolicy, scheduling.k8s.io/v1 PriorityClass).
// Fields the provider does not set are left out of what it sends, so the
// API server fills in its defaults as for any client.

// ObjectMeta is an object's metadata.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
}

// ListMeta is a list's metadata.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Continue        string `json:"continue,omitempty"`
}

// Pod is a core/v1 Pod.
type Pod struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Spec       PodSpec   `json:"spec"`
	Status     PodStatus `json:"status"`
}

// PodList is a page of pods.
type PodList struct {
	ListMeta `json:"metadata"`
	Items    []Pod `json:"items"`
}

// Pod phases.
const (
	PodPending   = "Pending"
	PodRunning   = "Running"
	PodSucceeded = "Succeeded"
	PodFailed    = "Failed"
)

// PodSpec is what a pod runs and where.
type PodSpec struct {
	RestartPolicy                 string            `json:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64            `json:"terminationGracePeriodSeconds,omitempty"`
	AutomountServiceAccountToken  *bool             `json:"automountServiceAccountToken,omitempty"`
	EnableServiceLinks            *bool             `json:"enableServiceLinks,omitempty"`
	PriorityClassName             string            `json:"priorityClassName,omitempty"`
	NodeSelector                  map[string]string `json:"nodeSelector,omitempty"`
	Tolerations                   []Toleration      `json:"tolerations,omitempty"`
	InitContainers                []Container       `json:"initContainers,omitempty"`
	Containers                    []Container       `json:"containers"`
	Volumes                       []Volume          `json:"volumes,omitempty"`
}

// Toleration lets a pod onto machines with a matching taint.
type Toleration struct {
	Key               string `json:"key,omitempty"`
	Operator          string `json:"operator,omitempty"`
	Value             string `json:"value,omitempty"`
	Effect            string `json:"effect,omitempty"`
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// Container is one container of a pod.
type Container struct {
	Name            string               `json:"name"`
	Image           string               `json:"image,omitempty"`
	ImagePullPolicy string               `json:"imagePullPolicy,omitempty"`
	Command         []string             `json:"command,omitempty"`
	Args            []string             `json:"args,omitempty"`
	Env             []EnvVar             `json:"env,omitempty"`
	Resources       ResourceRequirements `json:"resources,omitempty"`
	VolumeMounts    []VolumeMount        `json:"volumeMounts,omitempty"`
}

// ResourceRequirements are a container's requests and limits, quantities
// as the API writes them ("4", "14Gi").
type ResourceRequirements struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// Resource names.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
)

// EnvVar is a container's environment variable: a value, or where to read
// it from.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is a secret's key or a field of the pod.
type EnvVarSource struct {
	SecretKeyRef *SecretKeySelector   `json:"secretKeyRef,omitempty"`
	FieldRef     *ObjectFieldSelector `json:"fieldRef,omitempty"`
}

// SecretKeySelector names a key of a secret.
type SecretKeySelector struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// ObjectFieldSelector names a field of the pod (status.podIP).
type ObjectFieldSelector struct {
	FieldPath string `json:"fieldPath"`
}

// VolumeMount mounts a volume in a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}

// Volume is a pod's volume; the provider uses empty dirs only.
type Volume struct {
	Name     string    `json:"name"`
	EmptyDir *EmptyDir `json:"emptyDir,omitempty"`
}

// EmptyDir is a volume that lives as long as its pod.
type EmptyDir struct{}

// PodStatus is what the kubelet and scheduler report.
type PodStatus struct {
	Phase             string            `json:"phase,omitempty"`
	Reason            string            `json:"reason,omitempty"`
	Message           string            `json:"message,omitempty"`
	Conditions        []PodCondition    `json:"conditions,omitempty"`
	ContainerStatuses []ContainerStatus `json:"containerStatuses,omitempty"`
}

// PodCondition is one of a pod's conditions (PodScheduled, DisruptionTarget…).
type PodCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Pod condition types and statuses the provider reads.
const (
	PodScheduled     = "PodScheduled"
	DisruptionTarget = "DisruptionTarget"
	ConditionTrue    = "True"
	ConditionFalse   = "False"
)

// ContainerStatus is a container's state.
type ContainerStatus struct {
	Name  string         `json:"name"`
	State ContainerState `json:"state"`
}

// ContainerState is waiting, running or terminated.
type ContainerState struct {
	Waiting    *ContainerStateWaiting    `json:"waiting,omitempty"`
	Terminated *ContainerStateTerminated `json:"terminated,omitempty"`
}

// ContainerStateWaiting says why a container does not run yet.
type ContainerStateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStateTerminated is how a container ended.
type ContainerStateTerminated struct {
	ExitCode int32  `json:"exitCode"`
	Reason   string `json:"reason,omitempty"`
}

// Secret is a core/v1 Secret; Data's values travel base64-encoded, as
// encoding/json writes a []byte.
type Secret struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
}

// LabelSelector selects objects by their labels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// NetworkPolicy is a networking.k8s.io/v1 NetworkPolicy.
type NetworkPolicy struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ObjectMeta `json:"metadata"`
	Spec       NetworkPolicySpec `json:"spec"`
}

// NetworkPolicyList is a page of network policies.
type NetworkPolicyList struct {
	ListMeta `json:"metadata"`
	Items    []NetworkPolicy `json:"items"`
}

// NetworkPolicySpec selects pods and says who may connect to them and
// where they may connect.
type NetworkPolicySpec struct {
	PodSelector LabelSelector              `json:"podSelector"`
	PolicyTypes []string                   `json:"policyTypes,omitempty"`
	Ingress     []NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress      []NetworkPolicyEgressRule  `json:"egress,omitempty"`
}

// Policy types.
const (
	PolicyTypeIngress = "Ingress"
	PolicyTypeEgress  = "Egress"
)

// NetworkPolicyIngressRule lets peers connect.
type NetworkPolicyIngressRule struct {
	From []NetworkPolicyPeer `json:"from,omitempty"`
}

// NetworkPolicyEgressRule lets the pods connect to peers, on ports.
type NetworkPolicyEgressRule struct {
	To    []NetworkPolicyPeer `json:"to,omitempty"`
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
}

// NetworkPolicyPeer is pods by label or an address block.
type NetworkPolicyPeer struct {
	PodSelector *LabelSelector `json:"podSelector,omitempty"`
	IPBlock     *IPBlock       `json:"ipBlock,omitempty"`
}

// IPBlock is a CIDR.
type IPBlock struct {
	CIDR string `json:"cidr"`
}

// NetworkPolicyPort is a protocol and port number.
type NetworkPolicyPort struct {
	Protocol string `json:"protocol,omitempty"`
	Port     *int32 `json:"port,omitempty"`
}

// PriorityClass is a scheduling.k8s.io/v1 PriorityClass.
type PriorityClass struct {
	APIVersion       string `json:"apiVersion,omitempty"`
	Kind             string `json:"kind,omitempty"`
	ObjectMeta       `json:"metadata"`
	Value            int32  `json:"value"`
	PreemptionPolicy string `json:"preemptionPolicy,omitempty"`
	Description      string `json:"description,omitempty"`
}

// decimalQuantity is n as a Kubernetes quantity ("6").
func decimalQuantity(n int64) string { return strconv.FormatInt(n, 10) }

// binaryQuantity is a number of bytes as Kubernetes writes it: with the
// largest binary suffix that divides it ("112Gi", "1536Mi").
func binaryQuantity(bytes int64) string {
	for _, s := range []struct {
		suffix string
		shift  uint
	}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if bytes != 0 && bytes%(1<<s.shift) == 0 {
			return strconv.FormatInt(bytes>>s.shift, 10) + s.suffix
		}
	}
	return strconv.FormatInt(bytes, 10)
}
