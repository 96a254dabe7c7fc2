package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/files"
)

func newJobCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Submit and follow jobs (like 'az ml job')"}
	cmd.AddCommand(newJobCreateCmd(g), newJobShowCmd(g), newJobListCmd(g), newJobCancelCmd(g), newJobStreamCmd(g), newJobDownloadCmd(g), newJobDeleteCmd(g), newJobEventsCmd(g))
	cmd.AddCommand(newJobUsageCmd(g), newJobUpdateCmd(g), newJobValidateCmd(g))
	return cmd
}

func newJobCreateCmd(g *globals) *cobra.Command {
	var (
		file, name, compute, command, code, experiment, display, description string
		minRuntime                                                           string
		envVars, tags                                                        []string
		instances                                                            int32
		timeout                                                              int64
		maxCost                                                              float64
		stream                                                               bool
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Submit a command, sweep or pipeline job from a YAML file and/or flags",
		Example: `  cumulus job create --file job.yml
  cumulus job create --compute cpu-cluster --command 'python train.py' --code ./src --stream`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := JobSpec{}
			base := "."
			if file != "" {
				var err error
				if spec, err = loadYAML[JobSpec](file); err != nil {
					return err
				}
				warn(g, file, spec.ignored())
				base = filepath.Dir(file)
			}
			set := cmd.Flags().Changed
			if set("name") {
				spec.Name = name
			}
			if set("compute") {
				spec.Compute = compute
			}
			if set("command") {
				spec.Command = command
			}
			if set("code") {
				spec.Code = code
				base = "."
			}
			if set("experiment-name") {
				spec.ExperimentName = experiment
			}
			if set("display-name") {
				spec.DisplayName = display
			}
			if set("description") {
				spec.Description = description
			}
			if set("tags") {
				spec.Tags = parseTags(tags)
			}
			if set("environment-variables") {
				if spec.EnvironmentVariables == nil {
					spec.EnvironmentVariables = map[string]string{}
				}
				for k, v := range parseTags(envVars) {
					spec.EnvironmentVariables[k] = v
				}
			}
			if set("instance-count") {
				if spec.Resources == nil {
					spec.Resources = &JobResourcesSpec{}
				}
				spec.Resources.InstanceCount = instances
			}
			if set("min-runtime") {
				spec.MinRuntime = minRuntime
			}
			if set("timeout") || set("max-cost") {
				if spec.Limits == nil {
					spec.Limits = &JobLimitsSpec{}
				}
				if set("timeout") {
					spec.Limits.Timeout = timeout
				}
				if set("max-cost") {
					spec.Limits.MaxCost = maxCost
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			j, err := spec.toARM(ctx, c, base)
			if err != nil {
				return err
			}
			out, err := c.PutJob(ctx, j)
			if err != nil {
				return err
			}
			if stream {
				fmt.Fprintf(g.stderr, "Submitted job %s\n", out.Name)
				return streamJob(ctx, g, c, out.Name)
			}
			return g.showJob(c, out)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&file, "file", "f", "", "YAML file in the az ml command, sweep or pipeline job schema")
	fl.StringVarP(&name, "name", "n", "", "job name (default: generated)")
	fl.StringVar(&compute, "compute", "", "cluster to run on (name or azureml:<name>)")
	fl.StringVar(&command, "command", "", "command to run (/bin/sh -c)")
	fl.StringVar(&code, "code", "", "local folder uploaded as the job's working directory")
	fl.StringArrayVar(&envVars, "environment-variables", nil, "KEY=VALUE (repeatable)")
	fl.Int32Var(&instances, "instance-count", 1, "nodes the job runs on")
	fl.Int64Var(&timeout, "timeout", 0, "seconds after which the job is stopped and fails")
	fl.Float64Var(&maxCost, "max-cost", 0, "stop the job, which fails with CostLimitExceeded, when its nodes' time has cost this much (the server's currency; YAML limits.max_cost)")
	fl.StringVar(&experiment, "experiment-name", "", "experiment name")
	fl.StringVar(&display, "display-name", "", "display name")
	fl.StringVar(&description, "description", "", "description")
	fl.StringArrayVar(&tags, "tags", nil, "tags as key=value")
	fl.StringVar(&minRuntime, "min-runtime", "", "how long each attempt runs at least before its compute's queue policy may preempt it (1s to 1h; YAML min_runtime)")
	fl.BoolVar(&stream, "stream", false, "follow the job's logs until it ends (exit 0 only if it Completed)")
	return cmd
}

// showJob prints a job as az ml does (JSON by default), with the
// studio's page of it in services.Studio.endpoint.
func (g *globals) showJob(c *client.Client, j api.Job) error {
	return g.show("json", jobFromARM(j, c.Server()), func() *table {
		t := jobTable()
		addJobRow(t, j)
		return t
	})
}

func jobTable() *table {
	return &table{header: []string{"NAME", "DISPLAY NAME", "STATUS", "COMPUTE", "NODES", "ATTEMPTS", "CREATED", "COST", "MESSAGE"}}
}

func addJobRow(t *table, j api.Job) {
	p := j.Properties
	compute := p.ComputeID[strings.LastIndex(p.ComputeID, "/")+1:]
	when := "-"
	if c := created(j); !c.IsZero() {
		when = c.Local().Format("2006-01-02 15:04:05")
	}
	spent := "-"
	if c := p.Cost; c != nil {
		spent = money(c.Amount) + " " + c.Currency
		if c.MaxCost != nil {
			spent += " of " + money(*c.MaxCost)
		}
	}
	display := p.DisplayName
	if display == "" { // as Azure, whose jobs are shown by their name until given another
		display = j.Name
	}
	t.add(j.Name, display, p.Status, compute, j.InstanceCount(), len(p.Attempts), when, spent, orDash(p.StatusMessage))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newJobShowCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a job",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			j, err := c.GetJob(cmd.Context(), name)
			if err != nil {
				return err
			}
			return g.showJobWithMetrics(cmd.Context(), c, j)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "job name")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newJobListCmd(g *globals) *cobra.Command {
	var status, parent string
	var maxResults int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's jobs, the newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxResults < 0 {
				return fmt.Errorf("--max-results must be 0 (all) or more")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if parent != "" {
				pj, err := c.GetJob(cmd.Context(), parent)
				if err != nil {
					return err
				}
				if pj.IsPipeline() {
					return g.listSteps(cmd.Context(), c, pj, status)
				}
				return g.listTrials(cmd.Context(), c, parent, status)
			}
			jobs, err := c.ListJobs(cmd.Context(), status)
			if err != nil {
				return err
			}
			newestFirst(jobs)
			if maxResults > 0 && len(jobs) > maxResults {
				jobs = jobs[:maxResults]
			}
			views := make([]JobView, 0, len(jobs))
			for _, j := range jobs {
				views = append(views, jobFromARM(j, c.Server()))
			}
			return g.show("table", views, func() *table {
				t := jobTable()
				for _, j := range jobs {
					addJobRow(t, j)
				}
				return t
			})
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only jobs in this status (Queued, Running, Completed, …)")
	cmd.Flags().StringVar(&parent, "parent", "", "only the children of this job: a sweep's trials (with their parameters and metrics), a pipeline's steps")
	cmd.Flags().IntVar(&maxResults, "max-results", 0, "at most this many jobs, the newest (0: all)")
	return cmd
}

func newJobCancelCmd(g *globals) *cobra.Command {
	var name string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "cancel",
		Short: "Cancel a job (its processes get SIGTERM, then SIGKILL)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			resp, err := c.CancelJob(cmd.Context(), name)
			if err != nil {
				return err
			}
			if noWait {
				return nil
			}
			return waitWithProgress(cmd.Context(), g, c, resp, "Canceling job "+name)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "job name")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for the job to stop")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newJobDeleteCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a finished job with its logs and outputs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			resp, err := c.DeleteJob(cmd.Context(), name)
			if err != nil {
				return err
			}
			if resp.Status == 204 {
				return fmt.Errorf("job %s does not exist", name)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "job name")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newJobStreamCmd(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Follow a job's logs until it ends; exit 0 only if it Completed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return streamJob(cmd.Context(), g, c, name)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "job name")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// streamJob prints a job's log as it grows (every rank, prefixed when the
// job has several) until the job ends, then reports how it ended. Status
// lines come from the job's status history, stamped with the server's
// time of each change; the final status comes after the last log lines,
// and an attempt's log is read to its end before the next one starts.
func streamJob(ctx context.Context, g *globals, c *client.Client, name string) error {
	if j, err := c.GetJob(ctx, name); err == nil && j.IsPipeline() {
		return streamPipeline(ctx, g, c, name)
	}
	type cursor struct{ attempt, rank int }
	offsets := map[cursor]int64{}
	shown, attempt := 0, 0 // status changes printed; attempt whose log is followed
	drain := func(j api.Job, attempt int) error {
		ranks := max(j.InstanceCount(), 1)
		// With several processes per node the agent prefixes each line
		// with its global rank already.
		d := j.Properties.Distribution
		prefix := ranks > 1 && (d == nil || d.ProcessCountPerInstance <= 1)
		for r := 0; r < ranks; r++ {
			k := cursor{attempt, r}
			for {
				chunk, err := c.JobLog(ctx, name, attempt, r, offsets[k])
				if err != nil {
					return err
				}
				if chunk.Content == "" {
					break
				}
				writeLog(g, chunk.Content, r, prefix)
				offsets[k] = chunk.Offset + int64(len(chunk.Content))
			}
		}
		return nil
	}
	printStatus := func(h api.StatusChange) {
		if h.Time.IsZero() { // a server that keeps no history: no time to show
			fmt.Fprintf(g.stderr, "%s%s\n", h.Status, suffix(h.Reason))
			return
		}
		fmt.Fprintf(g.stderr, "[%s] %s%s\n", h.Time.Local().Format("15:04:05"), h.Status, suffix(h.Reason))
	}
	waiting := "" // the queued job's reason last printed
	for {
		j, err := c.GetJob(ctx, name)
		if err != nil {
			return err
		}
		p := j.Properties
		terminal := api.JobTerminal(p.Status)
		history := p.History
		if len(history) == 0 { // a server that keeps no history
			history = []api.StatusChange{{Status: p.Status, Reason: p.StatusMessage}}
		}
		n := len(p.Attempts)
		if n != attempt && attempt > 0 {
			if err := drain(j, attempt); err != nil { // the rest of the previous attempt
				return err
			}
		}
		for ; shown < len(history) && !(terminal && shown == len(history)-1); shown++ {
			printStatus(history[shown])
		}
		if p.Status == api.JobQueued && p.StatusMessage != waiting && shown == len(history) {
			// why it waits (at max nodes, quota, budget, provisioning),
			// which changes without a status change
			if p.StatusMessage != "" && (len(history) == 0 || history[len(history)-1].Reason != p.StatusMessage) {
				fmt.Fprintf(g.stderr, "  %s\n", p.StatusMessage)
			}
			waiting = p.StatusMessage
		}
		if n != attempt {
			attempt = n
			if n > 1 {
				fmt.Fprintf(g.stderr, "--- attempt %d%s ---\n", n, whyAgain(p.Attempts[n-2]))
			}
		}
		if attempt > 0 {
			if err := drain(j, attempt); err != nil {
				return err
			}
		}
		if terminal {
			for ; shown < len(history); shown++ {
				printStatus(history[shown])
			}
			if p.Status == api.JobCompleted {
				return nil
			}
			return fmt.Errorf("job %s %s%s", name, strings.ToLower(p.Status), suffix(p.StatusMessage))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// whyAgain says why a job runs again: how its previous attempt ended.
func whyAgain(prev api.Attempt) string {
	if prev.Reason == "" {
		return fmt.Sprintf(" (attempt %d ended)", prev.Number)
	}
	return fmt.Sprintf(" (attempt %d ended: %s)", prev.Number, prev.Reason)
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func writeLog(g *globals, content string, rank int, prefix bool) {
	if !prefix {
		fmt.Fprint(g.stdout, content)
		return
	}
	for _, line := range strings.SplitAfter(content, "\n") {
		if line != "" {
			fmt.Fprintf(g.stdout, "[rank %d] %s", rank, line)
		}
	}
}

func newJobDownloadCmd(g *globals) *cobra.Command {
	var name, output, dir string
	var all bool
	cmd := &cobra.Command{
		Use:   "download",
		Short: "Download a job's outputs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			names := []string{output}
			if all {
				j, err := c.GetJob(ctx, name)
				if err != nil {
					return err
				}
				names = []string{"default"}
				if j.IsPipeline() { // a pipeline's outputs are its steps'
					names = nil
				}
				for k := range j.Properties.Outputs {
					names = append(names, k)
				}
			}
			for _, n := range names {
				var buf bytes.Buffer
				if err := c.JobOutput(ctx, name, n, &buf); err != nil {
					return err
				}
				dst := filepath.Join(dir, "artifacts", n)
				if err := os.MkdirAll(dst, 0o755); err != nil {
					return err
				}
				if err := files.Unpack(&buf, dst); err != nil {
					return fmt.Errorf("unpack output %s: %w", n, err)
				}
				if entries, err := os.ReadDir(dst); err == nil && len(entries) == 0 {
					fmt.Fprintf(g.stderr, "Output %s of job %s is empty: no node wrote a file there\n", n, name)
					continue
				}
				fmt.Fprintf(g.stderr, "Downloaded output %s to %s\n", n, dst)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "job name")
	cmd.Flags().StringVar(&output, "output-name", "default", "output to download (\"default\" is what the job wrote to $CUMULUS_OUTPUT_DIR)")
	cmd.Flags().StringVarP(&dir, "download-path", "p", ".", "folder to download into (outputs land in <path>/artifacts/<name>)")
	cmd.Flags().BoolVar(&all, "all", false, "download every output")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// warn prints each of a file's warnings on stderr.
func warn(g *globals, file string, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(g.stderr, "warning: %s: %s\n", filepath.Base(file), w)
	}
}
