package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// NodeCache keeps decoded node documents between reads of a compute's
// nodes: a document read again unchanged is not decoded again. The cluster
// controller reads every node of every cluster on each pass; with 10,000
// nodes decoding was most of a pass.
type NodeCache struct {
	mu   sync.Mutex
	byID map[string]map[string]cachedNode // compute → node id → last read
}

type cachedNode struct {
	body string
	node Node
}

// NewNodeCache returns an empty cache.
func NewNodeCache() *NodeCache { return &NodeCache{byID: map[string]map[string]cachedNode{}} }

// NodesOfCached is NodesOf through the cache. Entries of nodes that are
// gone are dropped. The nodes share their slices (GPUs) with the cache:
// assign fields, never change a slice's elements in place.
func NodesOfCached(ctx context.Context, q Querier, compute string, c *NodeCache) ([]Node, error) {
	// Sorted here rather than in SQL: the index is by (compute, state), so
	// SQLite would sort every row before returning the first.
	rows, err := q.QueryContext(ctx, `SELECT id, body FROM nodes WHERE compute = ?`, Key(compute))
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	c.mu.Lock()
	old := c.byID[compute]
	c.mu.Unlock()
	seen := make(map[string]cachedNode, len(old))
	out := make([]Node, 0, len(old))
	for rows.Next() {
		var id string
		var body sql.RawBytes
		if err := rows.Scan(&id, &body); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		if e, ok := old[id]; ok && e.body == string(body) {
			seen[id] = e
			out = append(out, e.node)
			continue
		}
		var n Node
		if err := json.Unmarshal(body, &n); err != nil {
			return nil, fmt.Errorf("decode node: %w", err)
		}
		seen[id] = cachedNode{body: string(body), node: n}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.byID[compute] = seen
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Node) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}
