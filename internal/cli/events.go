package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
)

// eventFlags are the filters 'compute events' and 'job events' share.
type eventFlags struct {
	name         string
	types        []string
	since, until string
	top          int
}

func (f *eventFlags) register(cmd *cobra.Command, what string, types []string) {
	fl := cmd.Flags()
	fl.StringVarP(&f.name, "name", "n", "", "name of the "+what)
	fl.StringSliceVar(&f.types, "type", nil, "only events of these types, comma-separated: "+strings.Join(types, ", "))
	fl.StringVar(&f.since, "since", "", "only events since a time: a duration back from now (30m, 24h) or an RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "only events before a time: a duration back from now or an RFC 3339 time")
	fl.IntVar(&f.top, "top", 50, "show the newest this many events (0: all)")
	_ = cmd.MarkFlagRequired("name")
}

// query turns the flags into an API query, with now for relative times.
func (f *eventFlags) query(now time.Time) (client.EventQuery, error) {
	q := client.EventQuery{Types: f.types, Limit: f.top}
	if f.top < 0 {
		return q, fmt.Errorf("--top %d: want 0 (all) or more", f.top)
	}
	var err error
	if q.Since, err = parseWhen("--since", f.since, now); err != nil {
		return q, err
	}
	if q.Until, err = parseWhen("--until", f.until, now); err != nil {
		return q, err
	}
	return q, nil
}

// parseWhen reads a time given as a duration back from now (Go's, or a
// number of days: 7d) or RFC 3339.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(v, "d")); err == nil && strings.HasSuffix(v, "d") {
		v = strconv.Itoa(n*24) + "h"
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%s %s: give a duration back from now without a sign, e.g. 1h", flag, v)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is neither a duration (30m, 24h, 7d) nor an RFC 3339 time (2024-05-01T12:00:00Z)", flag, v)
	}
	return t, nil
}

// showEvents prints events oldest first (the newest last, where the eye
// ends), with the columns that say something for this history.
func (g *globals) showEvents(evs []api.Event, jobs bool) error {
	rows := slices.Clone(evs)
	slices.Reverse(rows)
	return g.show("table", rows, func() *table {
		t := &table{header: []string{"TIME", "TYPE", "NODE", "MESSAGE"}}
		if jobs {
			t.header = []string{"TIME", "TYPE", "ATTEMPT", "NODES", "MESSAGE"}
		}
		for _, e := range rows {
			when := e.Time.Local().Format("2006-01-02 15:04:05")
			if jobs {
				attempt := "-"
				if e.Attempt > 0 {
					attempt = fmt.Sprint(e.Attempt)
				}
				nodes := strings.Join(e.Nodes, ",")
				if nodes == "" {
					nodes = "-"
				}
				t.add(when, e.Type, attempt, nodes, e.Message)
				continue
			}
			node := e.Node
			if node == "" {
				node = "-"
			}
			t.add(when, e.Type, node, e.Message)
		}
		return t
	})
}

func newComputeEventsCmd(g *globals) *cobra.Command {
	var f eventFlags
	var node string
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show a compute cluster's history: resizes, nodes requested, ready, idle, leaving, removed, preempted, unusable, scale-ups blocked",
		Example: `  cumulus compute events -n cpu-cluster
  cumulus compute events -n cpu-cluster --type NodeUnusable,NodePreempted --since 24h
  cumulus compute events -n cpu-cluster --node cpu-cluster-… -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query(time.Now())
			if err != nil {
				return err
			}
			q.Node = node
			c, err := g.client()
			if err != nil {
				return err
			}
			evs, err := c.ComputeEvents(cmd.Context(), f.name, q)
			if err != nil {
				return err
			}
			return g.showEvents(evs, false)
		},
	}
	f.register(cmd, "compute", api.EventTypes)
	cmd.Flags().StringVar(&node, "node", "", "only this node's events")
	return cmd
}

func newJobEventsCmd(g *globals) *cobra.Command {
	var f eventFlags
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show a job's history: each status change with its reason, attempt and nodes",
		Example: `  cumulus job events -n my-job
  cumulus job events -n my-job --type JobQueued -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := f.query(time.Now())
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			evs, err := c.JobEvents(cmd.Context(), f.name, q)
			if err != nil {
				return err
			}
			return g.showEvents(evs, true)
		},
	}
	f.register(cmd, "job", api.JobEventTypes())
	return cmd
}
