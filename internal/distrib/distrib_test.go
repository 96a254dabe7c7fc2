package distrib

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

func envMap(p Process) map[string]string {
	m := map[string]string{}
	for _, kv := range p.Env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestPyTorchRanks(t *testing.T) {
	ips := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	d := &agentapi.Distribution{Type: "PyTorch", ProcessesPerNode: 2, MasterPort: 29500}
	seen := map[string]bool{}
	for node := range ips {
		ps, err := Processes(d, node, ips)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 {
			t.Fatalf("node %d starts %d processes, want 2", node, len(ps))
		}
		for i, p := range ps {
			e := envMap(p)
			want := map[string]string{"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "6",
				"LOCAL_RANK": itoa(i), "LOCAL_WORLD_SIZE": "2", "NODE_RANK": itoa(node), "RANK": itoa(node*2 + i)}
			for k, v := range want {
				if e[k] != v {
					t.Errorf("node %d local %d: %s=%q, want %q", node, i, k, e[k], v)
				}
			}
			seen[e["RANK"]] = true
		}
	}
	if len(seen) != 6 {
		t.Fatalf("ranks seen %v, want 6 distinct", seen)
	}
}

func TestMPIRanksAndHostfile(t *testing.T) {
	ips := []string{"10.0.0.1", "10.0.0.2"}
	d := &agentapi.Distribution{Type: "Mpi", ProcessesPerNode: 2, MasterPort: 29600}
	ps, err := Processes(d, 1, ips)
	if err != nil {
		t.Fatal(err)
	}
	e := envMap(ps[1])
	want := map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
		"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "AZ_BATCH_MASTER_NODE": "10.0.0.1:29600", "AZ_BATCHAI_MPI_MASTER_NODE": "10.0.0.1"}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("%s=%q, want %q", k, e[k], v)
		}
	}
	if got := Hostfile(ips, 2); got != "10.0.0.1 slots=2\n10.0.0.2 slots=2\n" {
		t.Fatalf("hostfile %q", got)
	}
}

func TestTensorFlowConfig(t *testing.T) {
	ips := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	d := &agentapi.Distribution{Type: "TensorFlow", MasterPort: 30000, WorkerCount: 2, ParameterServers: 1}
	var cfgs []map[string]any
	for node := range ips {
		ps, err := Processes(d, node, ips)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal([]byte(envMap(ps[0])["TF_CONFIG"]), &cfg); err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	cluster := cfgs[0]["cluster"].(map[string]any)
	if got := cluster["ps"].([]any); len(got) != 1 || got[0] != "10.0.0.1:30001" {
		t.Fatalf("ps = %v", got)
	}
	if got := cluster["worker"].([]any); len(got) != 2 || got[1] != "10.0.0.3:30003" {
		t.Fatalf("workers = %v", got)
	}
	task := cfgs[2]["task"].(map[string]any)
	if task["type"] != "worker" || task["index"] != float64(1) {
		t.Fatalf("task of node 2 = %v, want worker 1", task)
	}
	if _, err := Processes(&agentapi.Distribution{Type: "tensorflow", WorkerCount: 5, ParameterServers: 1}, 0, ips); err == nil {
		t.Fatal("5 workers + 1 ps on 3 processes accepted")
	}
}

func TestNoDistributionIsOneProcess(t *testing.T) {
	ps, err := Processes(nil, 0, []string{"127.0.0.1"})
	if err != nil || len(ps) != 1 || len(ps[0].Env) != 0 {
		t.Fatalf("got %+v, %v", ps, err)
	}
	if _, err := Processes(&agentapi.Distribution{Type: "ray"}, 0, nil); err == nil {
		t.Fatal("unknown distribution type accepted")
	}
}

func itoa(i int) string { return string(rune('0' + i)) }
