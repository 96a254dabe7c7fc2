package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kinds of ARM resource kept in the resources table.
const (
	KindWorkspace = "workspace"
	KindCompute   = "compute"
	KindBudget    = "budget" // parent: the workspace's id
	// Datastores a user added (the built-in ones are not stored); parent:
	// the workspace's id.
	KindDatastore = "datastore"
	// Data and code asset versions; parent: the workspace's id +
	// "/data/<name>" or "/codes/<name>".
	KindDataVersion = "dataversion"
	KindCodeVersion = "codeversion"
)

// Doc is a stored resource with its version and creation time.
type Doc[T any] struct {
	Value   T
	Version int64
	Created time.Time
	Key     string // parent/name, the paging cursor
}

// ETag is the quoted entity tag of the stored version.
func (d Doc[T]) ETag() string { return ETagOf(d.Version) }

// ETagOf renders a version as an HTTP entity tag.
func ETagOf(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

// Preconditions of Put besides a version.
const (
	IfNoneMatch int64 = -1 // If-None-Match: *
	IfExists    int64 = -2 // If-Match: *
)

// Key normalises a resource name or parent id: ARM names are case-insensitive.
func Key(s string) string { return strings.ToLower(s) }

// SameKey reports whether two names or ids name the same resource.
func SameKey(a, b string) bool { return strings.EqualFold(a, b) }

// Get reads one resource; ErrNotFound when absent.
func Get[T any](ctx context.Context, q Querier, kind, parent, name string) (Doc[T], error) {
	var d Doc[T]
	r, err := getResource(ctx, q, kind, parent, name)
	if err != nil {
		return d, err
	}
	if d.Value, err = decodeVia[T](r.dec, r.body); err != nil {
		return d, fmt.Errorf("decode %s %s: %w", kind, name, err)
	}
	d.Version, d.Created = r.version, time.UnixMilli(r.created).UTC()
	return d, nil
}

// getResource reads a resource's row, from the view when q's store keeps
// one and it holds the row.
func getResource(ctx context.Context, q Querier, kind, parent, name string) (resourceRow, error) {
	id := resourceID(kind, parent, name)
	v := viewOf(q, resourcesOf, id)
	r, ok, from := v.held(id)
	if ok {
		return r, nil
	}
	r = resourceRow{kind: kind}
	err := q.QueryRowContext(ctx, `SELECT version, body, created FROM resources WHERE kind = ? AND parent = ? AND name = ?`,
		kind, Key(parent), Key(name)).Scan(&r.version, &r.body, &r.created)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%s %s: %w", kind, name, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("get %s: %w", kind, err)
	}
	v.fill(id, r, from)
	return r, nil
}

// resourceView holds the workspaces and computes as this process last
// wrote or read them (rowView), their rows as stored: every API request
// reads its workspace, and every job placed on a node its compute (for
// the identity the node hands it).
type resourceView = rowView[resourceRow]

type resourceChange = rowChange[resourceRow]

// resourceRow is a resource's row: its kind, version, stored document and
// creation.
type resourceRow struct {
	kind, body       string
	version, created int64
	dec              *decoded // body decoded, once held
}

// maxViewedResources bounds the resources the view holds.
const maxViewedResources = 1 << 12

func newResourceView() *resourceView {
	return newRowView(func(r resourceRow) resourceRow { r.dec = holder(r.dec); return r }, func(r resourceRow) bool {
		return r.kind == KindWorkspace || r.kind == KindCompute
	}, maxViewedResources)
}

// resourceID is a resource's key in the view.
func resourceID(kind, parent, name string) string {
	return kind + "\x00" + Key(parent) + "\x00" + Key(name)
}

// Put writes a resource. ifVersion IfNoneMatch means "create; fail with
// ErrExists if present", 0 means "create or overwrite", IfExists means
// "only if present", > 0 means "only if the stored version is this one"
// (ErrETagMismatch otherwise, also when absent).
// It returns the new version.
func Put[T any](ctx context.Context, q Querier, kind, parent, name string, v T, ifVersion int64, now time.Time) (int64, error) {
	var version int64
	if own, err := inOwnTx(ctx, q, func(q Querier) (err error) {
		version, err = Put(ctx, q, kind, parent, name, v, ifVersion, now)
		return err
	}); own {
		return version, err
	}
	body, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", kind, err)
	}
	var cur int64
	err = q.QueryRowContext(ctx, `SELECT version FROM resources WHERE kind = ? AND parent = ? AND name = ?`,
		kind, Key(parent), Key(name)).Scan(&cur)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("put %s: %w", kind, err)
	}
	switch {
	case ifVersion == IfNoneMatch && exists:
		return 0, fmt.Errorf("%s %s: %w", kind, name, ErrExists)
	case (ifVersion > 0 || ifVersion == IfExists) && !exists:
		return 0, fmt.Errorf("%s %s: %w", kind, name, ErrETagMismatch)
	case ifVersion > 0 && cur != ifVersion:
		return 0, fmt.Errorf("%s %s: %w", kind, name, ErrETagMismatch)
	}
	id, stored := resourceID(kind, parent, name), string(body)
	if exists {
		_, err = q.ExecContext(ctx, `UPDATE resources SET version = ?, body = ? WHERE kind = ? AND parent = ? AND name = ?`,
			cur+1, stored, kind, Key(parent), Key(name))
		if err != nil {
			return 0, fmt.Errorf("put %s: %w", kind, err)
		}
		wrote(q, resourcesOf, resourceChange{id: id, edit: func(r resourceRow) resourceRow {
			r.version, r.body = cur+1, stored
			return r
		}})
		return cur + 1, nil
	}
	_, err = q.ExecContext(ctx, `INSERT INTO resources (kind, parent, name, version, body, created) VALUES (?, ?, ?, 1, ?, ?)`,
		kind, Key(parent), Key(name), stored, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", kind, err)
	}
	wrote(q, resourcesOf, resourceChange{id: id, put: &resourceRow{kind: kind, body: stored, version: 1, created: now.UnixMilli()}})
	return 1, nil
}

// Delete removes a resource; ErrNotFound when absent. ifVersion > 0 makes
// it conditional.
func Delete(ctx context.Context, q Querier, kind, parent, name string, ifVersion int64) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return Delete(ctx, q, kind, parent, name, ifVersion) }); own {
		return err
	}
	query := `DELETE FROM resources WHERE kind = ? AND parent = ? AND name = ?`
	args := []any{kind, Key(parent), Key(name)}
	if ifVersion > 0 {
		query += ` AND version = ?`
		args = append(args, ifVersion)
	}
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("delete %s: %w", kind, err)
	}
	wrote(q, resourcesOf, resourceChange{id: resourceID(kind, parent, name)})
	if kind == KindWorkspace || kind == KindCompute {
		wrote(q, locksOf, lockChange{id: allLocks}) // its locks went with it
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if ifVersion > 0 {
			if _, err := Get[json.RawMessage](ctx, q, kind, parent, name); err == nil {
				return fmt.Errorf("%s %s: %w", kind, name, ErrETagMismatch)
			}
		}
		return fmt.Errorf("%s %s: %w", kind, name, ErrNotFound)
	}
	return nil
}

// List returns up to limit resources of kind under parent whose key sorts
// after the given one, in name order. parent "" lists every parent whose
// id starts with prefix.
func List[T any](ctx context.Context, q Querier, kind, parentPrefix string, exact bool, after string, limit int) ([]Doc[T], error) {
	query := `SELECT version, body, created, parent || '/' || name FROM resources WHERE kind = ? AND `
	args := []any{kind}
	if exact {
		query += `parent = ?`
		args = append(args, Key(parentPrefix))
	} else {
		query += `(parent = ? OR substr(parent, 1, ?) = ?)`
		p := Key(strings.TrimSuffix(parentPrefix, "/")) + "/"
		args = append(args, Key(parentPrefix), len(p), p)
	}
	query += ` AND parent || '/' || name > ? ORDER BY parent || '/' || name LIMIT ?`
	args = append(args, Key(after), limit)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	defer rows.Close()
	var out []Doc[T]
	for rows.Next() {
		var d Doc[T]
		var body string
		var created int64
		if err := rows.Scan(&d.Version, &body, &created, &d.Key); err != nil {
			return nil, fmt.Errorf("list %s: %w", kind, err)
		}
		if err := json.Unmarshal([]byte(body), &d.Value); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kind, err)
		}
		d.Created = time.UnixMilli(created).UTC()
		out = append(out, d)
	}
	return out, rows.Err()
}

// Count counts resources of kind under exactly parent.
func Count(ctx context.Context, q Querier, kind, parent string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM resources WHERE kind = ? AND parent = ?`, kind, Key(parent)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", kind, err)
	}
	return n, nil
}
