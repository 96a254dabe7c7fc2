package api

import (
	"fmt"
	"strings"
)

// NodesWaitPrefix begins the reason of a queued job that waits for its
// cluster's nodes: the cluster is at maxNodeCount, growing, or failing to
// provision.
const NodesWaitPrefix = "waiting for nodes: "

// QueueReason says why a queued job (ARM name, store uid) waits, from its
// compute's status as the cluster controller last wrote it: at
// maxNodeCount, more nodes than maxNodeCount, provisioning failing or
// under way (growing: its target above its current count, as GET of the
// compute says them), nodes preparing (pulling the job's image). Quota and budget
// waits are written on the job itself by the controller. "" when the
// compute says nothing.
func QueueReason(c Compute, name, uid string) string {
	a := c.Aml()
	var why []string
	for _, e := range a.Errors {
		if e.Error == nil {
			continue
		}
		msg := e.Error.Message
		switch e.Error.Code {
		case "ScaleUpBlocked":
			for _, part := range strings.Split(strings.TrimPrefix(msg, "queued jobs wait: "), "; ") {
				switch {
				case strings.HasPrefix(part, "at maxNodeCount "):
					// "at maxNodeCount 2", or "…, set by schedule …"
					n, by, _ := strings.Cut(strings.TrimPrefix(part, "at maxNodeCount "), ", ")
					if by != "" {
						by = " (" + by + ")"
					}
					why = append(why, fmt.Sprintf("the cluster is at its maximum of %s nodes (max_instances)%s; the job starts when nodes free up", n, by))
				case uid != "" && strings.HasPrefix(part, "job "+uid+" "):
					why = append(why, "job "+name+strings.TrimPrefix(part, "job "+uid)+"; raise max_instances or lower instance_count")
				}
			}
		case "NodeProvisioningFailed":
			why = append(why, "node provisioning fails and is retried: "+msg)
		case "NodeNotReady":
			why = append(why, "a node is being prepared ("+msg+")")
		}
	}
	if len(why) == 0 && a.AllocationState == AllocationResizing && a.TargetNodeCount > a.CurrentNodeCount {
		why = append(why, "the cluster is growing; nodes are being provisioned")
	}
	if len(why) == 0 {
		return ""
	}
	return NodesWaitPrefix + strings.Join(why, "; ")
}
