package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// BlobOwner records that a workspace owns a blob: someone who may write
// in the workspace uploaded it (and so proved they hold its content), or
// a job of the workspace referenced it before ownership was recorded.
type BlobOwner struct {
	Digest    string
	Workspace string // the workspace's ARM id
	Size      int64
	Uploaded  time.Time // the last upload: the grace period runs from it
	Principal string
}

// PutBlobOwner records (or refreshes) a workspace's ownership of a blob.
func PutBlobOwner(ctx context.Context, q Querier, o BlobOwner) error {
	_, err := q.ExecContext(ctx, `INSERT INTO blob_owners (digest, workspace, size, uploaded, principal) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (digest, workspace) DO UPDATE SET size = excluded.size, uploaded = excluded.uploaded, principal = excluded.principal`,
		o.Digest, Key(o.Workspace), o.Size, o.Uploaded.UnixMilli(), o.Principal)
	if err != nil {
		return fmt.Errorf("put blob owner: %w", err)
	}
	return nil
}

// GetBlobOwner reads a workspace's ownership of a blob; ErrNotFound when
// the workspace does not own it.
func GetBlobOwner(ctx context.Context, q Querier, digest, workspace string) (BlobOwner, error) {
	o := BlobOwner{Digest: digest}
	var uploaded int64
	err := q.QueryRowContext(ctx, `SELECT workspace, size, uploaded, principal FROM blob_owners WHERE digest = ? AND workspace = ?`,
		digest, Key(workspace)).Scan(&o.Workspace, &o.Size, &uploaded, &o.Principal)
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Errorf("blob %s of %s: %w", digest, workspace, ErrNotFound)
	}
	if err != nil {
		return o, fmt.Errorf("get blob owner: %w", err)
	}
	o.Uploaded = time.UnixMilli(uploaded).UTC()
	return o, nil
}

// WorkspaceBlobBytes adds up the sizes of the blobs a workspace owns, but
// for the blob except (one being uploaded again).
func WorkspaceBlobBytes(ctx context.Context, q Querier, workspace, except string) (int64, error) {
	var n sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT SUM(size) FROM blob_owners WHERE workspace = ? AND digest != ?`, Key(workspace), except).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("workspace blob bytes: %w", err)
	}
	return n.Int64, nil
}

// BlobOwned reports whether any workspace owns the blob.
func BlobOwned(ctx context.Context, q Querier, digest string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM blob_owners WHERE digest = ?`, digest).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("blob owned: %w", err)
	}
	return n > 0, nil
}

// UnreferencedBlobOwners lists ownerships last uploaded before cutoff
// whose blob no job of the owning workspace mentions (a job's document
// names its code snapshot and cumulus://blobs/ inputs by digest; any
// mention keeps the blob) and no blob path or uncommitted block of the
// workspace names.
func UnreferencedBlobOwners(ctx context.Context, q Querier, cutoff time.Time, limit int) ([]BlobOwner, error) {
	rows, err := q.QueryContext(ctx, `SELECT b.digest, b.workspace, b.size, b.uploaded, b.principal FROM blob_owners b
		WHERE b.uploaded < ? AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.parent = b.workspace AND lower(j.body) LIKE '%' || b.digest || '%')
			AND NOT EXISTS (SELECT 1 FROM blob_paths p WHERE p.digest = b.digest AND p.workspace = b.workspace)
			AND NOT EXISTS (SELECT 1 FROM blob_blocks k WHERE k.digest = b.digest AND k.workspace = b.workspace)
		ORDER BY b.uploaded LIMIT ?`, cutoff.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("unreferenced blobs: %w", err)
	}
	defer rows.Close()
	var out []BlobOwner
	for rows.Next() {
		var o BlobOwner
		var uploaded int64
		if err := rows.Scan(&o.Digest, &o.Workspace, &o.Size, &uploaded, &o.Principal); err != nil {
			return nil, fmt.Errorf("unreferenced blobs: %w", err)
		}
		o.Uploaded = time.UnixMilli(uploaded).UTC()
		out = append(out, o)
	}
	return out, rows.Err()
}

// DeleteBlobOwner removes a workspace's ownership of a blob if it was last
// uploaded before cutoff (an upload since then keeps it); it reports
// whether it removed it.
func DeleteBlobOwner(ctx context.Context, q Querier, digest, workspace string, cutoff time.Time) (bool, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM blob_owners WHERE digest = ? AND workspace = ? AND uploaded < ?`,
		digest, Key(workspace), cutoff.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("delete blob owner: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete blob owner: %w", err)
	}
	return n > 0, nil
}
