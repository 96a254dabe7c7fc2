// Package scale holds the scale and throughput benchmarks: the real
// control plane (daemon.Start in this process) with the sim provider, whose
// nodes are simulated agents talking to it over HTTP. They run only on
// demand, never in `go test ./...`:
//
//	go test ./test/scale/ -run '^$' -bench . -benchtime 1x -timeout 30m
//
// Sizes can be lowered for a quick look: SCALE_NODES, SCALE_JOBS,
// SCALE_STORE_JOBS, SCALE_STORE_NODES. SCALE_STORE=postgres runs them on
// PostgreSQL; SCALE_HTTP2=1 has the simulated agents share HTTP/2
// connections (needed past about 9,000 nodes, where one connection per
// held poll runs out of descriptors); SCALE_POLL_HOLD (20s) is how long
// the server holds an idle node's poll; SCALE_LOG=1 prints the control
// plane's warnings.
package scale

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/client"
	"github.com/cumulus-ml/cumulus/internal/config"
	"github.com/cumulus-ml/cumulus/internal/daemon"
	"github.com/cumulus-ml/cumulus/internal/pgtest"
	"github.com/cumulus-ml/cumulus/internal/provider/sim"
	"github.com/cumulus-ml/cumulus/internal/server"
	"github.com/cumulus-ml/cumulus/internal/store"
)

var bctx = context.Background()

// TestMain: run with the argument "sim-host", this binary is the process
// the simulated nodes run in (sim.ServeHost), as `cumulus agent
// --sim-host` is for `cumulus serve --provider sim --sim-host-process`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "sim-host" {
		if err := sim.ServeHost(os.Stdin, os.Stdout, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(pgtest.Run(m))
}

// env reads an integer size from the environment.
func env(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type plane struct {
	d  *daemon.Daemon
	c  *client.Client
	sc api.Scope
}

// start runs the control plane with the sim provider in this process, and
// its simulated agents too, or with SCALE_SIM_PROCESS=1 in a process of
// their own (another run of this binary), as real agents are elsewhere:
// this process's CPU is then the control plane's alone.
func start(b *testing.B, simJob time.Duration) *plane {
	b.Helper()
	o := daemon.DefaultOptions()
	o.Listen = "127.0.0.1:0"
	o.DataDir = b.TempDir()
	o.Provider = "sim"
	o.SimJobDuration = simJob
	o.SimHTTP2 = os.Getenv("SCALE_HTTP2") != "" // needed past about 9,000 nodes where descriptors are limited to 20,000
	if os.Getenv("SCALE_SIM_PROCESS") != "" {
		o.SimHost = []string{os.Args[0], "sim-host"}
	}
	o.Quotas = daemonQuotas(o)
	o.HeartbeatTimeout = 10 * time.Minute
	o.PollTimeout = 20 * time.Second
	if v, err := time.ParseDuration(os.Getenv("SCALE_POLL_HOLD")); err == nil && v > 0 {
		o.PollTimeout = v // how long an idle node's poll is held: the idle nodes' load is nodes / hold
	}
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("SCALE_LOG") != "" { // the control plane's warnings and errors, to see why a run stalls
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if os.Getenv("SCALE_STORE") == "postgres" {
		o.Store = pgtest.DSN(b) // the same benchmarks on PostgreSQL
	}
	d, err := daemon.Start(bctx, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		d.Close(ctx)
	})
	cfg := config.CLI{Server: d.URL, Token: d.Token, Subscription: o.Defaults.Subscription,
		ResourceGroup: o.Defaults.ResourceGroup, Workspace: o.Defaults.Workspace, Location: o.Defaults.Location}
	c, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	c.HTTP.Transport.(*http.Transport).MaxIdleConnsPerHost = 256
	c.PollEvery = 50 * time.Millisecond
	return &plane{d: d, c: c, sc: api.Scope{Subscription: cfg.Subscription, ResourceGroup: cfg.ResourceGroup, Workspace: cfg.Workspace}}
}

func daemonQuotas(o daemon.Options) server.Quotas {
	q := o.Quotas
	q.FamilyCores, q.TotalCores, q.LowPriorityCores = 1<<40, 1<<40, 1<<40
	return q
}

// jsonBody is a job's stored body (store.jobBody's shape) before its first attempt.
func jsonBody(j api.Job) (string, error) {
	b, err := json.Marshal(struct {
		Doc     api.Job `json:"doc"`
		Attempt int     `json:"attempt"`
	}{j, 0})
	return string(b), err
}

// compute creates an AmlCompute and returns its ARM id.
func (p *plane) compute(b *testing.B, name string, min, max int32, idle string) string {
	b.Helper()
	c := api.Compute{Name: name}
	c.Properties.ComputeType = api.ComputeTypeAml
	c.Aml().ScaleSettings = &api.ScaleSettings{MinNodeCount: &min, MaxNodeCount: &max, NodeIdleTimeBeforeScaleDown: idle}
	out, resp, err := p.c.PutCompute(bctx, c)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.c.Wait(bctx, resp, nil); err != nil {
		b.Fatal(err)
	}
	return out.ID
}

func count(b *testing.B, db *store.DB, query string, args ...any) int {
	b.Helper()
	var n int
	if err := db.Q().QueryRowContext(bctx, query, args...).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

func waitFor(b *testing.B, what string, timeout time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seedJobs inserts n jobs of one compute in one transaction with
// multi-row INSERTs (store.InsertJob one at a time is far too slow for a
// million rows).
func seedJobs(b *testing.B, p *plane, computeID, prefix, status string, n int) {
	b.Helper()
	now := time.Now().UTC()
	parent := p.sc.WorkspaceID()
	const marker = "SEEDNAMEMARKER"
	j := api.Job{Name: marker, ID: p.sc.JobID(marker), Type: api.TypeJob,
		Properties: api.JobProperties{Command: "true", ComputeID: computeID}}
	j.SetStatus(api.JobNotStarted, now, "")
	j.SetStatus(api.JobQueued, now, "")
	if status != api.JobQueued {
		j.SetStatus(status, now, "")
	}
	tmpl, err := jsonBody(j)
	if err != nil {
		b.Fatal(err)
	}
	const per = 200
	err = p.d.DB.Tx(bctx, func(q store.Querier) error {
		var seq int64
		if err := q.QueryRowContext(bctx, `SELECT coalesce(max(seq), 0) FROM jobs`).Scan(&seq); err != nil {
			return err
		}
		var sb strings.Builder
		args := make([]any, 0, per*8)
		for i := 0; i < n; i += per {
			sb.Reset()
			args = args[:0]
			sb.WriteString(`INSERT INTO jobs (uid, parent, name, compute, status, seq, version, body, created) VALUES `)
			for k := i; k < min(i+per, n); k++ {
				if k > i {
					sb.WriteString(",")
				}
				sb.WriteString("(?,?,?,?,?,?,1,?,?)")
				name := fmt.Sprintf("%s-%07d", prefix, k)
				seq++
				args = append(args, fmt.Sprintf("uid-%s", name), store.Key(parent), store.Key(name), store.Key(computeID), status, seq,
					strings.ReplaceAll(tmpl, marker, name), now.UnixMilli())
			}
			if _, err := q.ExecContext(bctx, sb.String(), args...); err != nil {
				return err
			}
		}
		if p.d.DB.Engine() == "postgres" { // the next submit's number follows
			_, err := q.ExecContext(bctx, `SELECT setval('jobs_seq_source', ?)`, seq)
			return err
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	checkpoint(b, p)
}

// checkpoint copies what a seed wrote into the database file before the
// measurement: SQLite's checkpointer would do it meanwhile.
func checkpoint(b *testing.B, p *plane) {
	b.Helper()
	if err := p.d.DB.Checkpoint(bctx); err != nil {
		b.Fatal(err)
	}
}

// seedNodes inserts n idle nodes of a compute (records only: no agents).
func seedNodes(b *testing.B, p *plane, computeID, prefix string, n int) {
	b.Helper()
	now := time.Now().UTC()
	err := p.d.DB.Tx(bctx, func(q store.Querier) error {
		for i := 0; i < n; i++ {
			if err := store.PutNode(bctx, q, store.Node{ID: fmt.Sprintf("%s-%06d", prefix, i), Compute: computeID, State: api.NodeIdle,
				VMSize: "STANDARD_DS3_V2", Provider: "sim", Created: now, Ready: now, IdleSince: now, Heartbeat: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	checkpoint(b, p)
}

var _ = sql.ErrNoRows
