package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Node is one machine of a cluster, as the control plane records it. The
// record is written before the provider is asked to create the machine
// (intent first), so a crash in between leaves a record to reconcile, never
// an unknown machine.
type Node struct {
	ID         string    `json:"id"`
	Compute    string    `json:"compute"` // the compute's ARM id
	State      string    `json:"state"`   // api.Node* states
	JobID      string    `json:"jobId,omitempty"`
	Priority   string    `json:"priority"`
	VMSize     string    `json:"vmSize"`
	Provider   string    `json:"provider"`
	ProviderID string    `json:"providerId,omitempty"`
	Address    string    `json:"address,omitempty"`
	Port       int       `json:"port,omitempty"`
	Created    time.Time `json:"created"`
	Ready      time.Time `json:"ready,omitempty"`     // when the agent registered
	IdleSince  time.Time `json:"idleSince,omitempty"` // when it last became idle
	Heartbeat  time.Time `json:"heartbeat,omitempty"` // last heartbeat
	TokenHash  string    `json:"tokenHash,omitempty"` // the agent's token, hashed
	JoinHash   string    `json:"joinHash,omitempty"`  // the one-time join token, hashed
	Reason     string    `json:"reason,omitempty"`    // why it is unusable/leaving
	// Wait is why a preparing node's machine is not there yet, as a value
	// of the scheduler the provider hands nodes to (Slurm's reason).
	Wait *api.NodeWait `json:"wait,omitempty"`
	GPUs []int         `json:"gpus,omitempty"` // device indexes the agent reported
	// GPUDevices are the devices of the machine the provider's nodes
	// share that this node holds, by gpu.ID, given when it was created
	// (local and docker providers); freed when the record goes.
	GPUDevices []string  `json:"gpuDevices,omitempty"`
	Evicted    time.Time `json:"evicted,omitzero"`      // when a preemption notice came (low priority)
	SSHOpen    int       `json:"sshSessions,omitempty"` // open SSH sessions: the node is busy
	PublicSSH  bool      `json:"publicSsh,omitempty"`   // remoteLoginPortPublicAccess Enabled: listNodes shows the address
	Image      string    `json:"image,omitempty"`       // the job image the node runs in (image-bound providers); "" the node image
	Allocated  time.Time `json:"allocated,omitzero"`    // when the provider had made its machine
	Changed    time.Time `json:"changed,omitzero"`      // when it last became leaving, preempted or unusable
	// LostJob is the job that ran on the node when it was lost (preempted,
	// unusable): the provider's later word on the loss goes to that job's
	// attempt (lifecycle.ExplainLoss).
	LostJob string `json:"lostJob,omitempty"`
}

// PutNode inserts or replaces a node record.
func PutNode(ctx context.Context, q Querier, n Node) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return PutNode(ctx, q, n) }); own {
		return err
	}
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode node: %w", err)
	}
	nt, noted := noting(q)
	// The state it had: the writer's view holds a node's as committed,
	// unless this transaction wrote it.
	var was string
	if held, ok := viewOf(q, nodesOf, n.ID).get(n.ID); ok {
		was = held.State
	} else if err := q.QueryRowContext(ctx, `SELECT state FROM nodes WHERE id = ?`, n.ID).Scan(&was); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("put node %s: %w", n.ID, err)
	}
	_, err = q.ExecContext(ctx, `INSERT INTO nodes (id, compute, state, job, body, created) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, job = excluded.job, body = excluded.body`,
		n.ID, Key(n.Compute), n.State, n.JobID, string(body), n.Created.UnixMilli())
	if err != nil {
		return fmt.Errorf("put node %s: %w", n.ID, err)
	}
	wroteNode(q, n.ID, body, "")
	if was == "" {
		if err := ledgerNode(ctx, q, n); err != nil {
			return err
		}
	}
	if e, ok := nodeEvent(was, n); ok {
		if err := AddEvent(ctx, q, e); err != nil {
			return err
		}
	}
	if noted && n.State != was {
		t := NodeTransition{Compute: n.Compute, From: was, To: n.State, Reason: n.Reason}
		if was == api.NodePreparing && !n.Ready.IsZero() {
			t.Provisioned = n.Ready.Sub(n.Created)
		}
		nt.note(t)
	}
	return nil
}

// ClaimIdleNodes gives idle, free nodes to a job: each becomes running it.
// If any of them is not idle and free it changes nothing and returns false.
// Each node is claimed by a conditional update (only if still idle and
// free) whose rows affected are checked, so two claims of one node can
// never both succeed. The document is edited in SQL, not decoded: the
// scheduler writes thousands of these a second.
func ClaimIdleNodes(ctx context.Context, q Querier, ids []string, jobUID string) (bool, error) {
	var all bool
	if own, err := inOwnTx(ctx, q, func(q Querier) (err error) {
		all, err = ClaimIdleNodes(ctx, q, ids, jobUID)
		return err
	}); own {
		return all, err
	}
	// Several nodes are counted first, so that none is claimed unless all
	// are free; one is claimed or not by its update alone.
	if len(ids) > 1 {
		args := make([]any, 0, len(ids)+1)
		for _, id := range ids {
			args = append(args, id)
		}
		args = append(args, api.NodeIdle)
		var free int
		err := q.QueryRowContext(ctx, `SELECT count(*) FROM nodes WHERE id IN (`+placeholders(len(ids))+`) AND state = ? AND job = ''`, args...).Scan(&free)
		if err != nil {
			return false, fmt.Errorf("claim nodes: %w", err)
		}
		if free != len(ids) {
			return false, nil
		}
	}
	claim := `UPDATE nodes SET state = ?, job = ?, body = json_set(body, '$.state', ?, '$.jobId', ?) WHERE id = ? AND state = 'idle' AND job = ''`
	if engineOf(q) == postgresEngine {
		claim = `UPDATE nodes SET state = ?, job = ?, body = jsonb_set(jsonb_set(body::jsonb, '{state}', to_jsonb(?::text)), '{jobId}', to_jsonb(?::text))::text
			WHERE id = ? AND state = 'idle' AND job = ''`
	}
	for _, id := range ids {
		res, err := q.ExecContext(ctx, claim, api.NodeRunning, jobUID, api.NodeRunning, jobUID, id)
		if err != nil {
			return false, fmt.Errorf("claim node %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if len(ids) == 1 && err == nil {
				return false, nil // not idle and free: nothing changed
			}
			// Taken since the count: fail the transaction rather than
			// leave the nodes before this one claimed.
			return false, fmt.Errorf("claim node %s: %w", id, ErrConflict)
		}
		wroteNode(q, id, nil, jobUID)
	}
	return true, nil
}

// wroteNode tells the node view of q's store, if it keeps one, of a node
// write just made through q: the document written (body), its claim by a
// job (claimBy), or, neither given, its removal. The view keeps the
// document as a read would decode it (times, empty lists), not the value
// the writer had.
func wroteNode(q Querier, id string, body []byte, claimBy string) {
	c := nodeChange{id: id}
	if claimBy != "" {
		c.edit = claimed(claimBy)
	}
	if body != nil {
		var n Node
		if err := json.Unmarshal(body, &n); err == nil {
			c.put = &n
		} // else: forgotten, read again
	}
	wrote(q, nodesOf, c)
}

// GetNode reads one node.
func GetNode(ctx context.Context, q Querier, id string) (Node, error) {
	v := viewOf(q, nodesOf, id)
	if v == nil {
		return getNode(ctx, q, id)
	}
	n, ok, from := v.held(id)
	if ok {
		return n, nil
	}
	n, err := getNode(ctx, q, id)
	if err == nil {
		v.fill(n.ID, n, from)
	}
	return n, err
}

// getNode reads one node from SQL.
func getNode(ctx context.Context, q Querier, id string) (Node, error) {
	var body string
	err := q.QueryRowContext(ctx, `SELECT body FROM nodes WHERE id = ?`, id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return Node{}, fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Node{}, fmt.Errorf("get node: %w", err)
	}
	var n Node
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		return Node{}, fmt.Errorf("decode node %s: %w", id, err)
	}
	return n, nil
}

// NodesOf lists the nodes of one compute, oldest first.
func NodesOf(ctx context.Context, q Querier, compute string) ([]Node, error) {
	return queryNodes(ctx, q, `SELECT body FROM nodes WHERE compute = ? ORDER BY created, id`, Key(compute))
}

// NodesIn lists a compute's nodes in the given states, oldest first.
func NodesIn(ctx context.Context, q Querier, compute string, states ...string) ([]Node, error) {
	args := []any{Key(compute)}
	for _, s := range states {
		args = append(args, s)
	}
	return queryNodes(ctx, q, `SELECT body FROM nodes WHERE compute = ? AND state IN (`+placeholders(len(states))+`) ORDER BY created, id`, args...)
}

// AllNodes lists every node, oldest first.
func AllNodes(ctx context.Context, q Querier) ([]Node, error) {
	return queryNodes(ctx, q, `SELECT body FROM nodes ORDER BY created, id`)
}

// NodesHoldingGPUs lists the nodes whose records hold devices of the
// machine the nodes share (Node.GPUDevices), oldest first.
func NodesHoldingGPUs(ctx context.Context, q Querier) ([]Node, error) {
	return queryNodes(ctx, q, `SELECT body FROM nodes WHERE body LIKE '%"gpuDevices":%' ORDER BY created, id`)
}

// DeleteNode removes a node record and records its removal at a time;
// absent is not an error.
func DeleteNode(ctx context.Context, q Querier, id string, at time.Time) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return DeleteNode(ctx, q, id, at) }); own {
		return err
	}
	n, err := GetNode(ctx, q, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete node: %w", err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM nodes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete node: %w", err)
	}
	wroteNode(q, id, nil, "")
	if err := ledgerRemoved(ctx, q, id, at); err != nil {
		return err
	}
	return AddEvent(ctx, q, removedEvent(n, at))
}

func queryNodes(ctx context.Context, q Querier, query string, args ...any) ([]Node, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		var n Node
		if err := json.Unmarshal([]byte(body), &n); err != nil {
			return nil, fmt.Errorf("decode node: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// NodeCounts counts a compute's nodes by state, in the store (no decoding).
func NodeCounts(ctx context.Context, q Querier, compute string) (map[string]int, error) {
	rows, err := q.QueryContext(ctx, `SELECT state, sum(n) FROM node_counts WHERE compute = ? GROUP BY state HAVING sum(n) > 0`, Key(compute))
	if err != nil {
		return nil, fmt.Errorf("count nodes: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count nodes: %w", err)
		}
		out[st] = n
	}
	return out, rows.Err()
}
