package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"syscall"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/catalog"
	"github.com/cumulus-ml/cumulus/internal/controller"
	"github.com/cumulus-ml/cumulus/internal/provider"
	"github.com/cumulus-ml/cumulus/internal/provider/slurm"
)

// newSlurmProvider starts the slurm provider: node jobs submitted from this
// machine, tagged with this control plane's data dir. Node jobs run as the
// server's user on the compute nodes, so the data dir and the CLI config
// (the admin token) must not be on a filesystem they may mount.
func newSlurmProvider(ctx context.Context, o Options, log *slog.Logger) (provider.Provider, error) {
	for _, p := range []struct{ what, dir string }{{"--data-dir", o.DataDir}, {"the CLI config's folder", filepath.Dir(o.configPath())}} {
		if fs := networkFS(p.dir); fs != "" {
			return nil, fmt.Errorf("slurm provider: %s %s is on a %s filesystem, which compute nodes may mount: node jobs run as this server's user and could read the admin token, secret key and database there; keep them on this machine's own disk (e.g. --data-dir /var/lib/cumulus, and --config or CUMULUS_CONFIG beside it)", p.what, p.dir, fs)
		}
	}
	owner, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, err
	}
	so := o.Slurm
	so.Owner, so.Clock, so.Log = owner, o.Clock, log
	return slurm.New(ctx, so)
}

// networkFilesystems are the filesystems that machines share, by the magic
// number statfs gives.
var networkFilesystems = map[uint32]string{
	0x6969: "NFS", 0x517B: "SMB", 0xFF534D42: "CIFS", 0xFE534D42: "SMB2", 0x0BD00BD0: "Lustre", 0x47504653: "GPFS",
	0x19830326: "BeeGFS", 0x00C36400: "CephFS", 0x5346414F: "AFS", 0x01021997: "9P", 0xAAD7AAEA: "PanFS",
}

// networkFS names the shared filesystem dir is on (its nearest existing
// folder), or "" for a machine's own disk or when it cannot tell.
func networkFS(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			return networkFilesystems[uint32(st.Type)]
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// agentURLOnLoopback says, for a Slurm server whose agents would reach it
// at a loopback address (not from other machines), what to pass instead.
func agentURLOnLoopback(agentURL string) string {
	u, err := url.Parse(agentURL)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return "node agents reach the control plane at " + agentURL + ", which compute nodes other than this machine cannot: pass --public-url with an address they reach (and --listen on it, with TLS)"
	}
	return ""
}

// computeCheck refuses, when a compute is created or its placement
// changes, what the provider says it could never make (a provider.Checker:
// Slurm's sbatch --test-only), and a Slurm placement on another provider.
func computeCheck(prov provider.Provider) func(ctx context.Context, c api.Compute) error {
	checker, _ := prov.(provider.Checker)
	return func(ctx context.Context, c api.Compute) error {
		a := c.Aml()
		var v api.Validation
		if a.Slurm != nil && prov.Name() != "slurm" {
			v.Add(api.CodeValidationError, "properties.properties.slurm", "provider %s does not submit Slurm jobs, so a Slurm placement would have no effect; remove it, or run the server with --provider slurm", prov.Name())
			return v.Err()
		}
		size, ok := catalog.Lookup(a.VMSize)
		if checker == nil || !ok {
			return nil
		}
		spec := provider.NodeSpec{ComputeID: c.ID, VMSize: size.Name, VCPUs: size.VCPUs, MemoryGB: size.MemoryGB, GPUs: size.GPUs,
			LowPriority: a.VMPriority == api.PriorityLowPriority, GracePeriod: c.PreemptionGrace() + controller.ReportMargin,
			Kubernetes: a.Kubernetes, Slurm: a.Slurm}
		err := checker.CheckNode(ctx, spec)
		var r *provider.Refusal
		switch {
		case errors.As(err, &r) && r.Setting == "vmSize":
			gpus := fmt.Sprintf(", %d GPUs", size.GPUs)
			switch size.GPUs {
			case 0:
				gpus = ""
			case 1:
				gpus = ", 1 GPU"
			}
			v.Add(api.CodeValidationError, "properties.properties.vmSize", "provider %s can never make a node of size %s (%d vCPUs, %g GB%s) here: %s",
				prov.Name(), size.Name, size.VCPUs, size.MemoryGB, gpus, r.Reason)
			return v.Err()
		case errors.As(err, &r):
			v.Add(api.CodeValidationError, "properties.properties."+r.Setting, "provider %s: %s", prov.Name(), r.Reason)
			return v.Err()
		case err != nil:
			return &api.Error{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable",
				Message: fmt.Sprintf("cannot ask provider %s whether it can make nodes of this compute; try again: %v", prov.Name(), err)}
		}
		return nil
	}
}
