package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Principal is a user or service principal that tokens belong to.
type Principal struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"` // User or ServicePrincipal
	Created time.Time `json:"created"`
}

// RoleAssignment gives a principal a role at a scope (an ARM id prefix;
// "/" for everything).
type RoleAssignment struct {
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	Role      string    `json:"role"`
	Scope     string    `json:"scope"`
	Created   time.Time `json:"created"`
}

// AuditEntry is one recorded write.
type AuditEntry struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Principal string    `json:"principal"`
	Operation string    `json:"operation"`
	Resource  string    `json:"resource"`
	Status    int       `json:"status"`
}

// PutPrincipal creates a principal (ErrExists if it is there).
func PutPrincipal(ctx context.Context, q Querier, p Principal) error {
	_, err := q.ExecContext(ctx, `INSERT INTO principals (name, kind, created) VALUES (?, ?, ?)`, p.Name, p.Kind, p.Created.UnixMilli())
	if isUnique(err) {
		return fmt.Errorf("principal %s: %w", p.Name, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("put principal: %w", err)
	}
	return nil
}

// GetPrincipal reads a principal.
func GetPrincipal(ctx context.Context, q Querier, name string) (Principal, error) {
	var p Principal
	var created int64
	err := q.QueryRowContext(ctx, `SELECT name, kind, created FROM principals WHERE name = ?`, name).Scan(&p.Name, &p.Kind, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("principal %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("get principal: %w", err)
	}
	p.Created = time.UnixMilli(created).UTC()
	return p, nil
}

// ListPrincipals lists every principal by name.
func ListPrincipals(ctx context.Context, q Querier) ([]Principal, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, kind, created FROM principals ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	defer rows.Close()
	var out []Principal
	for rows.Next() {
		var p Principal
		var created int64
		if err := rows.Scan(&p.Name, &p.Kind, &created); err != nil {
			return nil, fmt.Errorf("list principals: %w", err)
		}
		p.Created = time.UnixMilli(created).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// PutRoleAssignment stores a role assignment.
func PutRoleAssignment(ctx context.Context, q Querier, a RoleAssignment) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return PutRoleAssignment(ctx, q, a) }); own {
		return err
	}
	_, err := q.ExecContext(ctx, `INSERT INTO role_assignments (id, principal, role, scope, created) VALUES (?, ?, ?, ?, ?)`,
		a.ID, a.Principal, a.Role, Key(a.Scope), a.Created.UnixMilli())
	if err != nil {
		return fmt.Errorf("put role assignment: %w", err)
	}
	wrote(q, grantsOf, grantChange{id: a.Principal}) // read again after the commit
	return nil
}

// DeleteRoleAssignment removes one; ErrNotFound when absent.
func DeleteRoleAssignment(ctx context.Context, q Querier, id string) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return DeleteRoleAssignment(ctx, q, id) }); own {
		return err
	}
	var principal string
	err := q.QueryRowContext(ctx, `DELETE FROM role_assignments WHERE id = ? RETURNING principal`, id).Scan(&principal)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("role assignment %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete role assignment: %w", err)
	}
	wrote(q, grantsOf, grantChange{id: principal})
	return nil
}

// RoleAssignments lists assignments, of one principal when given.
func RoleAssignments(ctx context.Context, q Querier, principal string) ([]RoleAssignment, error) {
	var v *grantView
	var from uint64
	if principal != "" {
		v = viewOf(q, grantsOf, principal)
		as, ok, gen := v.held(principal)
		if ok {
			return as, nil
		}
		from = gen
	}
	query := `SELECT id, principal, role, scope, created FROM role_assignments`
	var args []any
	if principal != "" {
		query += ` WHERE principal = ?`
		args = append(args, principal)
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY principal, scope, role`, args...)
	if err != nil {
		return nil, fmt.Errorf("list role assignments: %w", err)
	}
	defer rows.Close()
	var out []RoleAssignment
	for rows.Next() {
		var a RoleAssignment
		var created int64
		if err := rows.Scan(&a.ID, &a.Principal, &a.Role, &a.Scope, &created); err != nil {
			return nil, fmt.Errorf("list role assignments: %w", err)
		}
		a.Created = time.UnixMilli(created).UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list role assignments: %w", err)
	}
	v.fill(principal, out, from)
	return out, nil
}

// grantView holds each principal's role assignments as this process last
// read them (rowView; a write drops the principal's, read again after its
// commit): every API request is authorized by its caller's, and their
// read from SQL was a reader connection's fresh look into the WAL under
// a busy writer. A principal with none is held too (its requests are
// refused as quickly).
type grantView = rowView[[]RoleAssignment]

type grantChange = rowChange[[]RoleAssignment]

// maxViewedGrants bounds the principals the view holds.
const maxViewedGrants = 1 << 12

func newGrantView() *grantView {
	return newRowView(slices.Clone[[]RoleAssignment], nil, maxViewedGrants)
}

// ListTokens lists tokens (never their secrets: only hashes are stored).
func ListTokens(ctx context.Context, q Querier, principal string) ([]Token, error) {
	query := `SELECT id, name, hash, role, created, expires, revoked FROM tokens`
	var args []any
	if principal != "" {
		query += ` WHERE name = ?`
		args = append(args, principal)
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY created`, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var created, expires, revoked int64
		if err := rows.Scan(&t.ID, &t.Name, &t.Hash, &t.Role, &created, &expires, &revoked); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.Created = time.UnixMilli(created).UTC()
		if expires > 0 {
			t.Expires = time.UnixMilli(expires).UTC()
		}
		t.Revoked = revoked != 0
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken marks a token revoked; ErrNotFound when absent.
func RevokeToken(ctx context.Context, q Querier, id string) error {
	if own, err := inOwnTx(ctx, q, func(q Querier) error { return RevokeToken(ctx, q, id) }); own {
		return err
	}
	var hash string
	err := q.QueryRowContext(ctx, `UPDATE tokens SET revoked = 1 WHERE id = ? RETURNING hash`, id).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	wrote(q, tokensOf, tokenChange{id: hash, edit: func(t Token) Token { t.Revoked = true; return t }})
	return nil
}

// AppendAudit records one write and returns its sequence number. A
// write's entry belongs in the write's own transaction (q), so that the
// one is never committed without the other.
func AppendAudit(ctx context.Context, q Querier, e AuditEntry) (int64, error) {
	var seq int64
	err := q.QueryRowContext(ctx, `INSERT INTO audit (time, principal, operation, resource, status) VALUES (?, ?, ?, ?, ?) RETURNING seq`,
		e.Time.UnixMilli(), e.Principal, e.Operation, e.Resource, e.Status).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	return seq, nil
}

// SetAuditStatus corrects the status of an entry written before the
// answer was known (a write's transaction records 200; the answer may be
// 201 or 202).
func SetAuditStatus(ctx context.Context, q Querier, seq int64, status int) error {
	if _, err := q.ExecContext(ctx, `UPDATE audit SET status = ? WHERE seq = ?`, status, seq); err != nil {
		return fmt.Errorf("audit status: %w", err)
	}
	return nil
}

// AuditFilter selects audit entries.
type AuditFilter struct {
	Principal string
	Resource  string // prefix of the resource id (case-insensitive)
	Since     time.Time
	After     int64 // entries after this sequence number (paging)
	Limit     int
}

// ListAudit reads audit entries, oldest first.
func ListAudit(ctx context.Context, q Querier, f AuditFilter) ([]AuditEntry, error) {
	query := `SELECT seq, time, principal, operation, resource, status FROM audit WHERE seq > ? AND time >= ?`
	args := []any{f.After, f.Since.UnixMilli()}
	if f.Principal != "" {
		query += ` AND principal = ?`
		args = append(args, f.Principal)
	}
	if f.Resource != "" {
		query += ` AND lower(substr(resource, 1, ?)) = ?`
		args = append(args, len(f.Resource), Key(f.Resource))
	}
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	query += ` ORDER BY seq LIMIT ?`
	args = append(args, f.Limit)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var t int64
		if err := rows.Scan(&e.Seq, &t, &e.Principal, &e.Operation, &e.Resource, &e.Status); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.Time = time.UnixMilli(t).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}
