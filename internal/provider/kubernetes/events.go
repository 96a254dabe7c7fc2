package kubernetes

import (
	"fmt"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/provider"
)

// waitingProblems are container waiting reasons worth telling the user:
// the pod will not start without a fix.
var waitingProblems = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true,
}

// eventOf is what a pod's state means for its node (ok false: nothing to
// report). deleted is true when the pod is gone from the API server.
func eventOf(pod *Pod, deleted bool) (provider.Event, bool) {
	if pod == nil || pod.Annotations[AnnotationNode] == "" {
		return provider.Event{}, false
	}
	ev := provider.Event{NodeID: pod.Annotations[AnnotationNode]}
	switch {
	case deleted:
		ev.Kind, ev.Reason = provider.EventGone, "pod "+pod.Name+" was deleted"+disruption(pod)
	case pod.Status.Phase == PodFailed:
		ev.Kind, ev.Reason = provider.EventGone, "pod "+pod.Name+" failed"+failure(pod)
	case pod.Status.Phase == PodSucceeded:
		ev.Kind, ev.Reason = provider.EventGone, "pod "+pod.Name+" ended: its agent exited"
	case pod.DeletionTimestamp != nil:
		ev.Kind, ev.Reason = provider.EventTerminating, "pod "+pod.Name+" is being deleted"+disruption(pod)
	case pod.Status.Phase == PodPending || pod.Status.Phase == "":
		ev.Kind, ev.Reason = provider.EventPending, pending(pod)
	default:
		return provider.Event{}, false
	}
	return ev, true
}

// pending says why a pending pod waits: unscheduled (the scheduler's
// message), or a container that cannot start; "" when it just waits.
func pending(pod *Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == PodScheduled && c.Status == ConditionFalse && c.Reason != "" {
			return "pod " + pod.Name + " " + c.Reason + ": " + strings.TrimSpace(c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && waitingProblems[w.Reason] {
			return "pod " + pod.Name + " " + w.Reason + ": " + strings.TrimSpace(w.Message)
		}
	}
	return ""
}

// disruption is why Kubernetes removes a pod, when it says (eviction,
// preemption by the scheduler, a node drain or taint).
func disruption(pod *Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == DisruptionTarget && c.Status == ConditionTrue {
			return fmt.Sprintf(" (%s: %s)", c.Reason, strings.TrimSpace(c.Message))
		}
	}
	if pod.Status.Reason != "" {
		return fmt.Sprintf(" (%s: %s)", pod.Status.Reason, strings.TrimSpace(pod.Status.Message))
	}
	return ""
}

// failure describes a failed pod: the kubelet's reason (e.g. Evicted) or
// the agent container's exit.
func failure(pod *Pod) string {
	if pod.Status.Reason != "" {
		return fmt.Sprintf(": %s: %s", pod.Status.Reason, strings.TrimSpace(pod.Status.Message))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf(": container %s exited with %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	return ""
}
