package api

import "strings"

// NodeWait is why a node's machine is not there yet, as the scheduler a
// provider hands nodes to says it: a value read from that scheduler (Slurm's
// job state reason: Resources, Priority, QOSMaxGRESPerUser, …), never
// parsed back, worded here.
type NodeWait struct {
	Scheduler string `json:"scheduler"` // SchedulerSlurm
	// Reason is the scheduler's reason code, as it spells it.
	Reason string `json:"reason"`
	// Queue is where the node waits (Slurm: its partition); "" unknown.
	Queue string `json:"queue,omitempty"`
}

// SchedulerSlurm names Slurm in NodeWait.
const SchedulerSlurm = "Slurm"

// slurmReasons word the reasons of Slurm's most often seen by a job that
// waits (its JobStateReason); others are shown as Slurm spells them.
var slurmReasons = map[string]string{
	"Resources":          "the machines do not have the CPUs, memory or GPUs it asks for free now",
	"Priority":           "jobs of higher priority are ahead of it",
	"ReqNodeNotAvail":    "the machines it may use are down, drained or reserved",
	"PartitionDown":      "the partition is down",
	"PartitionInactive":  "the partition is inactive",
	"PartitionNodeLimit": "it asks for more than the partition's node limit",
	"PartitionTimeLimit": "it asks for more than the partition's time limit",
	"BeginTime":          "its start time has not come",
	"JobHeldAdmin":       "an administrator holds it",
	"JobHeldUser":        "it is held",
	"Reservation":        "its reservation has not started",
	"Licenses":           "the licenses it needs are in use",
	"Dependency":         "it depends on another job",
	"NodeDown":           "a machine it needs is down",
	"BadConstraints":     "no machine meets its constraints",
}

// Words says the wait: "Slurm's queue (partition gpu): Resources: the
// machines do not have … free now".
func (w *NodeWait) Words() string {
	if w == nil {
		return "the provider's queue"
	}
	s := w.Scheduler + "'s queue"
	if w.Queue != "" {
		s += " (partition " + w.Queue + ")"
	}
	s += ": " + w.Reason
	why := ""
	switch {
	case w.Scheduler != SchedulerSlurm:
	case slurmReasons[w.Reason] != "":
		why = slurmReasons[w.Reason]
	case strings.HasPrefix(w.Reason, "QOS"):
		why = "a limit of its QOS is reached"
	case strings.HasPrefix(w.Reason, "Assoc"):
		why = "a limit of its account is reached"
	}
	if why != "" {
		s += " (" + why + ")"
	}
	return s
}

// verb is one when n is 1, else many.
func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
