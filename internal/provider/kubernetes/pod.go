package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/nodeimage"
	"github.com/cumulus-ml/cumulus/internal/provider"
)

// Labels and annotations on node pods and their secrets. Labels select;
// annotations carry the exact ids (labels cannot hold every id).
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by" // always "cumulus"
	LabelOwner       = "cumulus.dev/owner"            // hash of Options.Owner: which control plane
	LabelNode        = "cumulus.dev/node"             // node id, made label-safe
	LabelCompute     = "cumulus.dev/compute"          // compute name, made label-safe
	LabelVMSize      = "cumulus.dev/vm-size"
	LabelLowPriority = "cumulus.dev/low-priority" // "true" or "false"

	AnnotationNode    = "cumulus.dev/node-id"
	AnnotationCompute = "cumulus.dev/compute-id"
	AnnotationOwner   = "cumulus.dev/owner"
	AnnotationImage   = "cumulus.dev/job-image" // set when the pod runs a job's image

	managedBy = "cumulus"
	// GPUResource is the extended resource NVIDIA's device plugin offers.
	GPUResource = "nvidia.com/gpu"
	// WorkDir is where a node pod keeps its agent state and job folders
	// (an emptyDir volume: the pod's life is the node's life).
	WorkDir = "/var/lib/cumulus"
	// AgentContainer is the name of the container running `cumulus agent`.
	AgentContainer = "agent"
	// InjectedAgent is where a pod made from a job's image finds the agent
	// binary: an init container from the node image copies it there.
	InjectedAgent = "/opt/cumulus/bin/cumulus"
	injectDir     = "/opt/cumulus/bin"

	secretTokenKey = "join-token"
	secretCAKey    = "ca.crt"
)

// PodName is the name of a node's pod (and of its secret): the node id
// when it is a valid DNS label, else a sanitized form with a hash.
func PodName(nodeID string) string {
	name := "cumulus-" + strings.ToLower(nodeID)
	clean := sanitize(name, 253)
	if clean == name && !strings.ContainsAny(nodeID, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return name
	}
	return sanitize(name, 240) + "-" + shortHash(nodeID)
}

// sanitize keeps [a-z0-9-.] (other characters become '-'), trims to max
// characters and makes it start and end with an alphanumeric.
func sanitize(s string, max int) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	if len(b) > max {
		b = b[:max]
	}
	return strings.Trim(string(b), "-.")
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// labelValue makes s a valid label value (63 characters, alphanumeric at
// both ends), adding a hash when it had to change it.
func labelValue(s string) string {
	clean := []byte(s)
	for i, c := range clean {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			clean[i] = '-'
		}
	}
	v := strings.Trim(string(clean), "-_.")
	if v == s && len(v) <= 63 {
		return v
	}
	if len(v) > 54 {
		v = strings.Trim(v[:54], "-_.")
	}
	return v + "-" + shortHash(s)
}

// computeName is the last segment of a compute's resource id.
func computeName(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// podSpec is the node pod and the secret it reads its join token (and the
// control plane's CA) from. The secret is created first; Create then makes
// the pod its owner so Kubernetes' garbage collector removes it too.
func (p *Provider) podFor(spec provider.NodeSpec) (*Pod, *Secret) {
	caPEM := p.o.CAPEM
	name := PodName(spec.NodeID)
	labels := map[string]string{
		LabelManagedBy:   managedBy,
		LabelOwner:       p.ownerLabel,
		LabelNode:        labelValue(spec.NodeID),
		LabelCompute:     labelValue(computeName(spec.ComputeID)),
		LabelVMSize:      labelValue(spec.VMSize),
		LabelLowPriority: strconv.FormatBool(spec.LowPriority),
	}
	subnetLabels(spec, labels)
	annotations := map[string]string{
		AnnotationNode:    spec.NodeID,
		AnnotationCompute: spec.ComputeID,
		AnnotationOwner:   p.o.Owner,
	}
	meta := ObjectMeta{Name: name, Namespace: p.o.Namespace, Labels: labels, Annotations: annotations}

	secret := &Secret{APIVersion: "v1", Kind: "Secret", ObjectMeta: meta, Type: "Opaque",
		Data: map[string][]byte{secretTokenKey: []byte(spec.JoinToken)}}
	if len(caPEM) > 0 {
		secret.Data[secretCAKey] = caPEM
	}

	grace := spec.GracePeriod
	if grace <= 0 {
		grace = p.o.StopGrace
	}
	graceSec := int64(math.Ceil(grace.Seconds()))
	memMiB := int64(math.Round(spec.MemoryGB * 1024))
	res := map[string]string{
		ResourceCPU:    decimalQuantity(int64(spec.VCPUs)),
		ResourceMemory: binaryQuantity(memMiB << 20),
	}
	if spec.GPUs > 0 {
		res[GPUResource] = decimalQuantity(int64(spec.GPUs))
	}
	fromSecret := func(key string, optional bool) *EnvVarSource {
		return &EnvVarSource{SecretKeyRef: &SecretKeySelector{Name: name, Key: key, Optional: &optional}}
	}
	env := []EnvVar{
		{Name: "CUMULUS_JOIN_TOKEN", ValueFrom: fromSecret(secretTokenKey, false)},
		{Name: "CUMULUS_ADDRESS", ValueFrom: &EnvVarSource{FieldRef: &ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "CUMULUS_NODE_POD", ValueFrom: &EnvVarSource{FieldRef: &ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "CUMULUS_WORK_DIR", Value: WorkDir},
		{Name: "CUMULUS_VCPUS", Value: strconv.Itoa(spec.VCPUs)},
		{Name: "CUMULUS_MEMORY_MB", Value: strconv.FormatInt(memMiB, 10)},
		{Name: "CUMULUS_GPUS", Value: strconv.Itoa(spec.GPUs)},
	}
	if spec.GPUs > 0 {
		// The agent offers the devices NVIDIA's device plugin gave the pod,
		// which it names in NVIDIA_VISIBLE_DEVICES.
		env = append(env, EnvVar{Name: provider.GPUDevicesEnv, Value: "env:NVIDIA_VISIBLE_DEVICES"})
	} else {
		// None: not even where NVIDIA's runtime is the node's default and
		// the image asks for all (CUDA images set NVIDIA_VISIBLE_DEVICES=all).
		env = append(env, EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
			EnvVar{Name: provider.GPUDevicesEnv, Value: "none"})
	}
	if len(caPEM) > 0 {
		env = append(env, EnvVar{Name: "CUMULUS_CA_PEM", ValueFrom: fromSecret(secretCAKey, false)})
	}
	no := false
	pod := &Pod{
		APIVersion: "v1", Kind: "Pod",
		ObjectMeta: meta,
		Spec: PodSpec{
			// The pod is the node: when the agent exits, the node is gone.
			RestartPolicy:                 "Never",
			TerminationGracePeriodSeconds: &graceSec,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			Containers: []Container{{
				Name:            AgentContainer,
				Image:           p.o.Image,
				ImagePullPolicy: p.o.PullPolicy,
				Command:         []string{nodeimage.BinaryPath, "agent"},
				Args:            []string{"--server", spec.ServerURL, "--node-id", spec.NodeID, "--container-runtime", "none"},
				Env:             env,
				Resources:       ResourceRequirements{Requests: res, Limits: res},
				VolumeMounts:    []VolumeMount{{Name: "work", MountPath: WorkDir}},
			}},
			Volumes: []Volume{{Name: "work", EmptyDir: &EmptyDir{}}},
		},
	}
	if spec.Image != "" {
		injectAgent(pod, spec.Image, p.o.Image, p.o.PullPolicy)
	}
	if spec.LowPriority {
		pod.Spec.PriorityClassName = p.o.LowPriorityClass
	}
	if k := spec.Kubernetes; k != nil {
		pod.Spec.NodeSelector = k.NodeSelector
		for _, t := range k.Tolerations {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, Toleration{Key: t.Key,
				Operator: t.Operator, Value: t.Value, Effect: t.Effect, TolerationSeconds: t.TolerationSeconds})
		}
	}
	return pod, secret
}

// graceOf is a pod's termination grace period.
func graceOf(pod *Pod) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// injectAgent makes the pod run the job's image: an init container from
// the node image copies the cumulus binary into a shared volume, and the
// agent container runs the job image with that binary as its command. The
// agent then runs the image's jobs as plain processes, inside the image.
func injectAgent(pod *Pod, jobImage, nodeImage, pull string) {
	pod.Annotations[AnnotationImage] = jobImage
	mount := VolumeMount{Name: "cumulus-bin", MountPath: injectDir}
	pod.Spec.Volumes = append(pod.Spec.Volumes, Volume{Name: "cumulus-bin", EmptyDir: &EmptyDir{}})
	pod.Spec.InitContainers = []Container{{
		Name:            "install-agent",
		Image:           nodeImage,
		ImagePullPolicy: pull,
		Command:         []string{nodeimage.BinaryPath, "node-image", "install-agent", injectDir},
		VolumeMounts:    []VolumeMount{mount},
	}}
	c := &pod.Spec.Containers[0]
	c.Image = jobImage
	c.Command = []string{InjectedAgent, "agent"}
	c.VolumeMounts = append(c.VolumeMounts, mount)
	c.Env = append(c.Env, EnvVar{Name: "CUMULUS_NODE_IMAGE", Value: jobImage})
}
