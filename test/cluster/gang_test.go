package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/distrib"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// checkAllreduce checks an allreduce.py job's log: 4 ranks, each saw the
// sum 6, on 2 nodes.
func checkAllreduce(t *testing.T, log string) {
	t.Helper()
	ranks, nodes := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && f[0] == "rank" {
			if f[3] != "4" || f[5] != "6" {
				t.Errorf("line %q: want size 4 and sum 6", line)
			}
			ranks[f[1]], nodes[f[7]] = true, true
		}
	}
	if len(ranks) != 4 || len(nodes) != 2 {
		t.Fatalf("ranks %v on nodes %v; want 4 ranks on 2 nodes. Log:\n%s", ranks, nodes, log)
	}
}

// A 3-node PyTorch job followed at once by a 2-node × 2-process MPI job
// (plain mpi4py under mpirun) on a max-3 cluster of isolated nodes whose
// idle nodes go after 5 s, three times over, on several servers at once
// whose jobs load the machine (and whose jobs have the same numbers): each
// job ends Completed, none hangs, and no attempt ends but one that found
// its port taken. On isolated nodes Open MPI's daemon once
// could not find the launch agent named by node 0's path, crashed after it
// had detached, and mpirun waited forever while the node, free after its
// launcher's exit, was scaled away.
func TestGangSequenceOnABusyMachine(t *testing.T) {
	needPython(t, "torch", "mpi4py")
	if os.Geteuid() != 0 {
		t.Skip("isolated nodes need root")
	}
	for i := range 3 {
		t.Run(fmt.Sprint("server-", i), func(t *testing.T) {
			t.Parallel()
			s := startServer(t, "--isolate-jobs=true")
			s.createCompute("ds3", 0, 3, "PT5S")
			for round := range 3 {
				pt, mpi := fmt.Sprint("ddp-", round), fmt.Sprint("allreduce-", round)
				s.submitWithCode(pt, "ds3", "ddp.py", 3, 1, "pytorch")
				s.submitWithCode(mpi, "ds3", "allreduce.py", 2, 2, "mpi")
				s.waitJob(pt, api.JobCompleted, 4*time.Minute)
				j := s.waitJob(mpi, api.JobCompleted, 4*time.Minute)
				// An attempt that found a port it was given in use (another
				// server's or job's on this busy machine) starts again on
				// other ports, as designed; no attempt may end otherwise.
				for _, a := range j.Properties.Attempts[:max(len(j.Properties.Attempts)-1, 0)] {
					if !strings.HasPrefix(a.Reason, "port ") || !strings.Contains(a.Reason, " was in use on node ") {
						t.Errorf("%s took %d attempts: %+v", mpi, len(j.Properties.Attempts), j.Properties.Attempts)
						break
					}
				}
				checkAllreduce(t, s.rankLog(mpi, 0))
			}
		})
	}
}

// While other ranks of a gang run, a node whose rank has ended stays the
// job's: list-nodes shows it running the job, its rank ended. Once the
// job ends, every node is idle.
func TestListNodesShowsARankThatEnded(t *testing.T) {
	s := startServer(t)
	s.createCompute("held", 0, 2, "PT10M")
	release := filepath.Join(t.TempDir(), "release")
	s.submitJob(distributedJob("gang", "held", fmt.Sprintf(`if [ "$RANK" = 0 ]; then while [ ! -e %s ]; do sleep 0.1; done; fi`, release), 2, "PyTorch", 1))
	var ended api.NodeInfo
	waitFor(t, "rank 1 to end while rank 0 runs", time.Minute, func() bool {
		nodes, err := s.c.ListNodes(bctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.RankEnded {
				ended = n
				return true
			}
		}
		return false
	})
	if ended.NodeState != api.NodeRunning || ended.RunID == nil || *ended.RunID != "gang" || ended.NodeID != s.nodeOf("gang", 1) {
		t.Fatalf("the node whose rank ended: %+v; want node rank 1, running job gang", ended)
	}
	out, errOut, code := s.cli(t.TempDir(), "compute", "list-nodes", "-n", "held")
	if code != 0 || !strings.Contains(out, "running (rank ended)") {
		t.Fatalf("list-nodes (exit %d):\n%s%s\nwant a node shown running (rank ended)", code, out, errOut)
	}
	if st := s.job("gang").Properties.Status; st != api.JobRunning {
		t.Fatalf("job %s; want Running while rank 0 runs", st)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitJob("gang", api.JobCompleted, time.Minute)
	waitFor(t, "both nodes idle", 30*time.Second, func() bool {
		nodes, err := s.c.ListNodes(bctx, "held")
		return err == nil && len(nodes) == 2 && nodes[0].NodeState == api.NodeIdle && nodes[1].NodeState == api.NodeIdle &&
			!nodes[0].RankEnded && !nodes[1].RankEnded
	})
}

// jobUID reads a job's internal id from the server's store (the API does
// not show it): the ports of its attempts follow from it.
func (s *server) jobUID(name string) string {
	s.t.Helper()
	db, err := store.OpenSQLite(bctx, filepath.Join(s.dataDir, "cumulus.db"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	var uid string
	if err := db.Q().QueryRowContext(bctx, `SELECT uid FROM jobs WHERE name = ?`, strings.ToLower(name)).Scan(&uid); err != nil {
		s.t.Fatal(err)
	}
	return uid
}

// An MPI job whose rank-1 launcher port is taken on its node (by another
// program) on its first two attempts does not fail: each attempt that
// found its port in use ends saying so, and the third, on other ports,
// completes. Such restarts do not count as failed attempts (3 allowed).
func TestMPILauncherPortTakenRunsOnOtherPorts(t *testing.T) {
	needPython(t, "mpi4py")
	s := startServer(t)
	s.createCompute("ports", 0, 2, "PT10M")
	// A job that holds both nodes keeps the MPI job queued while its
	// ports are taken.
	s.submitJob(distributedJob("holder", "ports", "sleep 600", 2, "", 0))
	waitFor(t, "the holder running", time.Minute, func() bool { return s.job("holder").Properties.Status == api.JobRunning })
	s.submitJob(distributedJob("allreduce", "ports", "/usr/bin/python3 "+frameworkScript(t, "allreduce.py"), 2, "Mpi", 2))
	uid := s.jobUID("allreduce")
	var taken []int
	for attempt := 1; attempt <= 2; attempt++ {
		port := distrib.LauncherPort(&agentapi.Distribution{MasterPort: distrib.MasterPort(uid, attempt, distrib.PortBlock(2, 2))}, 1)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("take port %d: %v", port, err)
		}
		defer ln.Close()
		taken = append(taken, port)
	}
	if _, err := s.c.CancelJob(bctx, "holder"); err != nil {
		t.Fatal(err)
	}
	j := s.waitJob("allreduce", api.JobCompleted, 3*time.Minute)
	a := j.Properties.Attempts
	if len(a) != 3 {
		t.Fatalf("attempts = %+v; want 3 (two on taken ports)", a)
	}
	for i, port := range taken {
		want := fmt.Sprintf("port %d was in use on node %s (node rank 1 of 2); started again on other ports", port, a[i].Nodes[1])
		if a[i].Reason != want {
			t.Errorf("attempt %d ended %q; want %q", i+1, a[i].Reason, want)
		}
	}
	checkAllreduce(t, s.rankLog("allreduce", 0))
}

// A fake mpirun for TestMPILauncherEndingEarlyFailsTheAttempt: it has
// node 1's launcher run `true` (which ends at once, as a daemon that
// crashed after it detached did) and then waits, as mpirun waits for a
// daemon that never calls back.
const fakeMpirun = `#!/bin/sh
if [ "$1" = --version ]; then echo "mpirun (Open MPI) 4.1.4"; exit 0; fi
"$OMPI_MCA_plm_rsh_agent" cumulus-node-1 true
echo "fake mpirun: node 1 served; waiting"
exec sleep 600
`

// A rank-1 launcher that ends with exit code 0 while node 0's mpirun
// still runs (here: stopped from outside after its daemon ended) makes
// the attempt end at once with a reason naming the rank and what
// happened; the job is queued again (the usual retry rules), not left
// Running forever.
func TestMPILauncherEndingEarlyFailsTheAttempt(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mpirun"), []byte(fakeMpirun), 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t)
	s.createCompute("early", 0, 2, "PT10M")
	j := distributedJob("early", "early", "true", 2, "Mpi", 1)
	j.Properties.EnvironmentVariables = map[string]string{"PATH": bin + ":/usr/bin:/bin"}
	s.submitJob(j)
	waitFor(t, "node 1 served", time.Minute, func() bool { return strings.Contains(s.rankLog("early", 0), "node 1 served") })
	node := s.nodeOf("early", 1)
	pid := launcherOf(t, s, node)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("node rank 1 (node %s): its MPI launcher ended (exit code 0) while node rank 0's mpirun still ran; mpirun cannot finish without that node", node)
	var got api.Job
	waitFor(t, "the attempt to end", 30*time.Second, func() bool {
		got = s.job("early")
		return got.Properties.Attempts[0].Ended != nil
	})
	if r := got.Properties.Attempts[0].Reason; r != want {
		t.Fatalf("attempt 1 ended %q; want %q", r, want)
	}
	if took := got.Properties.Attempts[0].Ended.Sub(*got.Properties.Attempts[0].Started); took > 30*time.Second {
		t.Errorf("the attempt ended %s after it started", took)
	}
	if st := got.Properties.Status; api.JobTerminal(st) {
		t.Fatalf("job %s %q; want queued again for its next attempt", st, got.Properties.StatusMessage)
	}
	if _, err := s.c.CancelJob(bctx, "early"); err != nil {
		t.Fatal(err)
	}
}

// launcherOf finds the pid of the MPI launcher on a local node: the
// cumulus-mpi-launchd process whose command is in that node's folder.
func launcherOf(t *testing.T, s *server, node string) int {
	t.Helper()
	var pid int
	waitFor(t, "node "+node+"'s MPI launcher", 30*time.Second, func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			argv0, _, _ := strings.Cut(string(b), "\x00")
			if strings.HasSuffix(argv0, "/cumulus-mpi-launchd") && strings.Contains(argv0, "/"+node+"/") {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

// submitWithCode submits a distributed job that runs a framework script
// shipped as the job's code, as a user's job would: an isolated job sees
// its own folder, not the test's files (its /tmp is the node's own).
func (s *server) submitWithCode(name, compute, script string, instances, ppn int, dist string) {
	s.t.Helper()
	dir := s.t.TempDir()
	b, err := os.ReadFile(frameworkScript(s.t, script))
	if err != nil {
		s.t.Fatal(err)
	}
	write(s.t, filepath.Join(dir, "src", script), string(b))
	write(s.t, filepath.Join(dir, "job.yml"), fmt.Sprintf(`type: command
name: %s
command: /usr/bin/python3 %s
code: ./src
compute: azureml:%s
resources:
  instance_count: %d
distribution:
  type: %s
  process_count_per_instance: %d
`, name, script, compute, instances, dist, ppn))
	if out, errOut, code := s.cli(dir, "job", "create", "--file", "job.yml"); code != 0 {
		s.t.Fatalf("job create %s exited %d\n%s%s", name, code, out, errOut)
	}
}
