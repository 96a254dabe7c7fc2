package agent

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/freeport"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// freePort is a port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.One()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// mpiRank1 is rank 1 of a 2-node MPI job whose launcher listens on port.
func mpiRank1(uid string, port int) agentapi.Assignment {
	// The grace is long enough for a helper built with the race detector,
	// which sleeps a second as it exits.
	return agentapi.Assignment{UID: uid, Name: uid, Attempt: 1, Command: "true", Grace: 10 * time.Second,
		InstanceIndex: 1, NodeIPs: []string{"127.0.0.1", "127.0.0.1"},
		Distribution: &agentapi.Distribution{Type: "mpi", ProcessesPerNode: 1, MasterPort: port - 2, LaunchToken: "tok"}}
}

// Node 1 of an MPI launch runs the launcher and says so: the server then
// knows it serves node 0's mpirun. Told to stop once mpirun has ended, it
// ends with 0.
func TestMPILauncherPartSaysWhatItIs(t *testing.T) {
	f := newFakeServer(t)
	startAgent(t, f, nil)
	port := freePort(t)
	asg := mpiRank1("mpi-1", port)
	f.send(agentapi.PollResponse{Assign: &asg})
	f.waitFor(10*time.Second, "the launcher's running report", func() bool {
		for _, e := range f.eventsOf("mpi-1") {
			if e.Phase == agentapi.PhaseRunning && !e.Started.IsZero() {
				return e.MPIRole == agentapi.MPIRoleLauncher
			}
		}
		return false
	})
	conn, err := dialLauncher("127.0.0.1:"+strconv.Itoa(port), 10*time.Second)
	if err != nil {
		t.Fatalf("the launcher does not listen on its port: %v", err)
	}
	conn.Close()
	f.send(agentapi.PollResponse{Cancel: []string{"mpi-1"}, StopReasons: map[string]string{"mpi-1": "the job's mpirun on node rank 0 ended"}})
	ev := f.exited("mpi-1", 20*time.Second)
	if ev.ExitCode != 0 || ev.MPIRole != agentapi.MPIRoleLauncher {
		t.Fatalf("exit = %+v; want 0 from the launcher; log:\n%s", ev, f.logOf("mpi-1"))
	}
}

// A part whose port is taken on the node does not start: it ends at once
// naming the port, so that the server starts the job again elsewhere in
// the port range; nothing of the job ran.
func TestPartWithItsPortTakenDoesNotStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name string
		asg  agentapi.Assignment
	}{
		{"an MPI launcher's port", mpiRank1("mpi-busy", port)},
		{"the rendezvous port on node 0", agentapi.Assignment{UID: "pt-busy", Name: "pt-busy", Attempt: 1, Grace: time.Second,
			Command: "echo ran", NodeIPs: []string{"127.0.0.1", "127.0.0.1"},
			Distribution: &agentapi.Distribution{Type: "pytorch", ProcessesPerNode: 1, MasterPort: port}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t)
			startAgent(t, f, nil)
			f.send(agentapi.PollResponse{Assign: &tc.asg})
			ev := f.exited(tc.asg.UID, 20*time.Second)
			if ev.PortBusy != port || ev.ExitCode != exitNotRun || !strings.Contains(ev.Reason, "port "+strconv.Itoa(port)+", which this attempt gave this node to listen on, is in use here") {
				t.Fatalf("exit = %+v; want port %d in use, not run", ev, port)
			}
			if !ev.Started.IsZero() || strings.Contains(f.logOf(tc.asg.UID), "ran") {
				t.Fatalf("the part started: %+v, log %q", ev, f.logOf(tc.asg.UID))
			}
		})
	}
}
