package agent

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/distrib"
)

// The ports a distributed job's processes listen on (the rendezvous port
// on node 0, TensorFlow's tasks, MPI launchers) come with the assignment,
// chosen by the server per attempt (distrib.MasterPort). Before a node
// starts its part it checks that its own are free on this machine: when
// one is taken, the part does not start and the agent says which port it
// was (JobState.PortBusy), and the server starts the job again on other
// ports rather than failing it.

// checkRendezvousPorts checks the ports of this node's part other than an
// MPI launcher's (which mpiLaunch checks).
func (j *job) checkRendezvousPorts() error {
	return j.checkPorts(distrib.ListenPorts(j.asg.Distribution, j.asg.InstanceIndex))
}

// checkPorts checks that every port is free on this node, and records the
// first one that is not.
func (j *job) checkPorts(ports []int) error {
	for _, port := range ports {
		if !portFree(port) {
			j.setState(func(s *agentapi.JobState) { s.PortBusy = port })
			return fmt.Errorf("port %d, which this attempt gave this node to listen on, is in use here; the job starts again on other ports", port)
		}
	}
	return nil
}

// portFree reports whether nothing listens on port, on any address of the
// node.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return !errors.Is(err, syscall.EADDRINUSE)
	}
	ln.Close()
	return true
}
