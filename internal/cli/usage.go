package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// lowGPU is the mean GPU utilization below which a job is said to wait on
// something else (the studio says the same).
const lowGPU = 0.5

func newComputeUsageCmd(g *globals) *cobra.Command {
	var name, node, since, until string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the CPU, memory, GPU, disk and network utilization of a cluster's nodes",
		Long: `Show the utilization samples the agents of a cluster's nodes took (every
--usage-interval of the server, 15 s by default), oldest first. --since and
--until take a duration before now (30m, 2h) or a time (2024-05-01T09:00:00Z).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := usageRange(node, since, until)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			samples, err := c.ComputeUsage(cmd.Context(), name, r)
			if err != nil {
				return err
			}
			return g.show("table", samples, func() *table {
				t := &table{header: []string{"TIME", "NODE", "CPU", "MEMORY", "GPU", "GPU MEMORY", "DISK", "NET IN", "NET OUT"}}
				for _, s := range samples {
					mem := bytesOf(s.Memory.UsedBytes) + " / " + bytesOf(s.Memory.TotalBytes)
					disk, rx, tx := "-", "-", "-"
					if s.Disk != nil {
						disk = bytesOf(s.Disk.UsedBytes) + " / " + bytesOf(s.Disk.TotalBytes)
					}
					if s.Network != nil {
						rx, tx = bytesOf(s.Network.ReceivedBytes), bytesOf(s.Network.SentBytes)
					}
					gpu, gmem := gpuColumns(s.GPUs)
					t.add(s.Time.Local().Format(time.DateTime), s.Node, percent(s.CPU.Utilization), mem, gpu, gmem, disk, rx, tx)
				}
				return t
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "name of the compute")
	fl.StringVar(&node, "node", "", "only this node's samples (see 'compute list-nodes')")
	fl.StringVar(&since, "since", "", "from this long ago or this time (default: the last hour)")
	fl.StringVar(&until, "until", "", "up to this long ago or this time (default: now)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newJobUsageCmd(g *globals) *cobra.Command {
	var name, since, until string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the CPU, memory and GPU utilization of a job on each of its nodes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := usageRange("", since, until)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			samples, err := c.JobUsage(cmd.Context(), name, r)
			if err != nil {
				return err
			}
			f, err := g.format("table")
			if err != nil {
				return err
			}
			err = g.show("table", samples, func() *table {
				t := &table{header: []string{"TIME", "NODE", "CPU", "CPU SECONDS", "MEMORY", "GPU", "GPU MEMORY"}}
				for _, s := range samples {
					gpu, gmem := gpuColumns(s.GPUs)
					t.add(s.Time.Local().Format(time.DateTime), s.Node, percent(s.CPU.Utilization),
						strconv.FormatFloat(s.CPU.Seconds, 'f', 1, 64), bytesOf(s.Memory.UsedBytes), gpu, gmem)
				}
				return t
			})
			if err == nil && f == "table" {
				if mean, ok := meanGPU(samples); ok && mean < lowGPU {
					fmt.Fprintf(g.stderr, "GPU utilization below %.0f %% (mean %s): the job may be waiting on data loading.\n", lowGPU*100, percent(mean))
				}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&name, "name", "n", "", "name of the job")
	fl.StringVar(&since, "since", "", "from this long ago or this time (default: the job's start)")
	fl.StringVar(&until, "until", "", "up to this long ago or this time (default: now)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// usageRange reads --since and --until: a duration before now or a time.
func usageRange(node, since, until string) (client.UsageRange, error) {
	r := client.UsageRange{Node: node}
	now := time.Now()
	var err error
	if r.Since, err = parseWhen("--since", since, now); err != nil {
		return r, err
	}
	r.Until, err = parseWhen("--until", until, now)
	return r, err
}

// meanGPU is the mean utilization over every GPU of every sample that
// reports one.
func meanGPU(samples []api.UsageSample) (float64, bool) {
	sum, n := 0.0, 0
	for _, s := range samples {
		for _, g := range s.GPUs {
			if g.Utilization != nil {
				sum += *g.Utilization
				n++
			}
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// gpuColumns are a sample's GPU utilizations and memory, one per GPU,
// each after the GPU's index on its node ("0:87% 1:12%").
func gpuColumns(gpus []api.UsageGPU) (util, mem string) {
	if len(gpus) == 0 {
		return "-", "-"
	}
	var u, m []string
	for _, g := range gpus {
		at := strconv.Itoa(g.Index) + ":"
		if g.Utilization != nil {
			u = append(u, at+percent(*g.Utilization))
		} else {
			u = append(u, at+"n/a")
		}
		m = append(m, at+bytesOf(g.MemoryUsedBytes))
	}
	return strings.Join(u, " "), strings.Join(m, " ")
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', 0, 64) + "%" }

// bytesOf is n in binary units (KiB, MiB, GiB, TiB).
func bytesOf(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + []string{"KiB", "MiB", "GiB", "TiB"}[i]
}
