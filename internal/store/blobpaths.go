package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A workspace's blob store (the Azure Blob protocol the SDKs speak, and
// datastores) names content-addressed blobs by path: a row per blob of a
// container, whose content is the blob file of its digest. Paths are
// case-sensitive, as Azure's blob names are. Blocks (Put Block) wait in
// blob_blocks until a block list commits them into one blob.

// BlobEntry is one blob of a workspace's container.
type BlobEntry struct {
	Workspace   string // the workspace's ARM id
	Container   string
	Path        string
	Digest      string // sha256 of the content
	Size        int64
	MD5         string // base64, as Content-MD5
	ContentType string
	Metadata    map[string]string
	Created     time.Time
	Modified    time.Time
	ETag        string
}

// PutBlobPath writes (or replaces) a blob of a container.
func PutBlobPath(ctx context.Context, q Querier, e BlobEntry) error {
	meta, err := json.Marshal(nonNilMeta(e.Metadata))
	if err != nil {
		return fmt.Errorf("put blob path: %w", err)
	}
	_, err = q.ExecContext(ctx, `INSERT INTO blob_paths (workspace, container, path, digest, size, md5, content_type, metadata, created, modified, etag)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workspace, container, path) DO UPDATE SET digest = excluded.digest, size = excluded.size, md5 = excluded.md5,
			content_type = excluded.content_type, metadata = excluded.metadata, modified = excluded.modified, etag = excluded.etag`,
		Key(e.Workspace), e.Container, e.Path, e.Digest, e.Size, e.MD5, e.ContentType, string(meta), e.Created.UnixMilli(), e.Modified.UnixMilli(), e.ETag)
	if err != nil {
		return fmt.Errorf("put blob path: %w", err)
	}
	return nil
}

func nonNilMeta(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

const blobCols = `workspace, container, path, digest, size, md5, content_type, metadata, created, modified, etag`

func scanBlob(sc interface{ Scan(...any) error }) (BlobEntry, error) {
	var e BlobEntry
	var meta string
	var created, modified int64
	if err := sc.Scan(&e.Workspace, &e.Container, &e.Path, &e.Digest, &e.Size, &e.MD5, &e.ContentType, &meta, &created, &modified, &e.ETag); err != nil {
		return e, err
	}
	if err := json.Unmarshal([]byte(meta), &e.Metadata); err != nil {
		return e, fmt.Errorf("blob %s metadata: %w", e.Path, err)
	}
	e.Created, e.Modified = time.UnixMilli(created).UTC(), time.UnixMilli(modified).UTC()
	return e, nil
}

// GetBlobPath reads one blob; ErrNotFound when the container has none at path.
func GetBlobPath(ctx context.Context, q Querier, workspace, container, path string) (BlobEntry, error) {
	row := q.QueryRowContext(ctx, `SELECT `+blobCols+` FROM blob_paths WHERE workspace = ? AND container = ? AND path = ?`,
		Key(workspace), container, path)
	e, err := scanBlob(row)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("blob %s/%s: %w", container, path, ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("get blob path: %w", err)
	}
	return e, nil
}

// prefixEnd is the least string greater than every string that starts
// with prefix ("" when there is none: prefix is empty or all 0xff bytes).
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// prefixClause restricts path to those starting with prefix, as a range
// an index serves.
func prefixClause(prefix string) (string, []any) {
	if prefix == "" {
		return "", nil
	}
	if end := prefixEnd(prefix); end != "" {
		return ` AND path >= ? AND path < ?`, []any{prefix, end}
	}
	return ` AND path >= ?`, []any{prefix}
}

// ListBlobPaths lists, in path order, up to limit blobs of a container
// whose path starts with prefix and sorts after after.
func ListBlobPaths(ctx context.Context, q Querier, workspace, container, prefix, after string, limit int) ([]BlobEntry, error) {
	clause, args := prefixClause(prefix)
	args = append([]any{Key(workspace), container}, args...)
	query := `SELECT ` + blobCols + ` FROM blob_paths WHERE workspace = ? AND container = ?` + clause
	if after != "" {
		query += ` AND path > ?`
		args = append(args, after)
	}
	query += ` ORDER BY path LIMIT ?`
	args = append(args, limit)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list blob paths: %w", err)
	}
	defer rows.Close()
	var out []BlobEntry
	for rows.Next() {
		e, err := scanBlob(rows)
		if err != nil {
			return nil, fmt.Errorf("list blob paths: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// BlobPathExists reports whether a container holds a blob at path, or,
// with folder, any blob under path (path + "/…"; path "" is the whole
// container).
func BlobPathExists(ctx context.Context, q Querier, workspace, container, path string, folder bool) (bool, error) {
	var n int
	var err error
	if !folder {
		err = q.QueryRowContext(ctx, `SELECT count(*) FROM blob_paths WHERE workspace = ? AND container = ? AND path = ?`,
			Key(workspace), container, path).Scan(&n)
	} else {
		clause, args := prefixClause(FolderPrefix(path))
		err = q.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM blob_paths WHERE workspace = ? AND container = ?`+clause+` LIMIT 1) AS x`,
			append([]any{Key(workspace), container}, args...)...).Scan(&n)
	}
	if err != nil {
		return false, fmt.Errorf("blob path exists: %w", err)
	}
	return n > 0, nil
}

// FolderPrefix is the prefix of the blobs in folder path: path with a
// trailing '/', or "" for the whole container.
func FolderPrefix(path string) string {
	if path == "" || path[len(path)-1] == '/' {
		return path
	}
	return path + "/"
}

// BlobDigestUnder reports whether a blob with the digest is at path or
// under folder path of a container.
func BlobDigestUnder(ctx context.Context, q Querier, workspace, container, path, digest string, folder bool) (bool, error) {
	var n int
	var err error
	if !folder {
		err = q.QueryRowContext(ctx, `SELECT count(*) FROM blob_paths WHERE workspace = ? AND container = ? AND path = ? AND digest = ?`,
			Key(workspace), container, path, digest).Scan(&n)
	} else {
		clause, args := prefixClause(FolderPrefix(path))
		err = q.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM blob_paths WHERE digest = ? AND workspace = ? AND container = ?`+clause+` LIMIT 1) AS x`,
			append([]any{digest, Key(workspace), container}, args...)...).Scan(&n)
	}
	if err != nil {
		return false, fmt.Errorf("blob digest under: %w", err)
	}
	return n > 0, nil
}

// SetBlobMetadata replaces a blob's metadata; ErrNotFound when absent.
func SetBlobMetadata(ctx context.Context, q Querier, workspace, container, path string, meta map[string]string, modified time.Time, etag string) error {
	b, err := json.Marshal(nonNilMeta(meta))
	if err != nil {
		return fmt.Errorf("set blob metadata: %w", err)
	}
	res, err := q.ExecContext(ctx, `UPDATE blob_paths SET metadata = ?, modified = ?, etag = ? WHERE workspace = ? AND container = ? AND path = ?`,
		string(b), modified.UnixMilli(), etag, Key(workspace), container, path)
	if err != nil {
		return fmt.Errorf("set blob metadata: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("blob %s/%s: %w", container, path, ErrNotFound)
	}
	return nil
}

// DeleteBlobPath removes one blob; ErrNotFound when absent.
func DeleteBlobPath(ctx context.Context, q Querier, workspace, container, path string) error {
	res, err := q.ExecContext(ctx, `DELETE FROM blob_paths WHERE workspace = ? AND container = ? AND path = ?`, Key(workspace), container, path)
	if err != nil {
		return fmt.Errorf("delete blob path: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("blob %s/%s: %w", container, path, ErrNotFound)
	}
	return nil
}

// DeleteBlobFolder removes every blob under folder path of a container
// (path "" empties the container) and returns how many.
func DeleteBlobFolder(ctx context.Context, q Querier, workspace, container, path string) (int64, error) {
	clause, args := prefixClause(FolderPrefix(path))
	res, err := q.ExecContext(ctx, `DELETE FROM blob_paths WHERE workspace = ? AND container = ?`+clause,
		append([]any{Key(workspace), container}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("delete blob folder: %w", err)
	}
	return res.RowsAffected()
}

// DeleteWorkspaceBlobs removes a workspace's blob paths and blocks (the
// workspace is gone; the blob files go with the next collection).
func DeleteWorkspaceBlobs(ctx context.Context, q Querier, workspace string) error {
	for _, t := range []string{"blob_paths", "blob_blocks"} {
		if _, err := q.ExecContext(ctx, `DELETE FROM `+t+` WHERE workspace = ?`, Key(workspace)); err != nil {
			return fmt.Errorf("delete workspace blobs: %w", err)
		}
	}
	return nil
}

// Block is an uncommitted block of a blob (Put Block).
type Block struct {
	ID     string // as the client named it (base64)
	Digest string
	Size   int64
}

// PutBlock records an uncommitted block of a blob (replacing one of the
// same id).
func PutBlock(ctx context.Context, q Querier, workspace, container, path string, b Block, now time.Time) error {
	_, err := q.ExecContext(ctx, `INSERT INTO blob_blocks (workspace, container, path, block, digest, size, created) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workspace, container, path, block) DO UPDATE SET digest = excluded.digest, size = excluded.size, created = excluded.created`,
		Key(workspace), container, path, b.ID, b.Digest, b.Size, now.UnixMilli())
	if err != nil {
		return fmt.Errorf("put block: %w", err)
	}
	return nil
}

// Blocks lists the uncommitted blocks of a blob, by id.
func Blocks(ctx context.Context, q Querier, workspace, container, path string) (map[string]Block, error) {
	rows, err := q.QueryContext(ctx, `SELECT block, digest, size FROM blob_blocks WHERE workspace = ? AND container = ? AND path = ?`,
		Key(workspace), container, path)
	if err != nil {
		return nil, fmt.Errorf("blocks: %w", err)
	}
	defer rows.Close()
	out := map[string]Block{}
	for rows.Next() {
		var b Block
		if err := rows.Scan(&b.ID, &b.Digest, &b.Size); err != nil {
			return nil, fmt.Errorf("blocks: %w", err)
		}
		out[b.ID] = b
	}
	return out, rows.Err()
}

// DeleteBlocks drops the uncommitted blocks of a blob (after a commit).
func DeleteBlocks(ctx context.Context, q Querier, workspace, container, path string) error {
	_, err := q.ExecContext(ctx, `DELETE FROM blob_blocks WHERE workspace = ? AND container = ? AND path = ?`, Key(workspace), container, path)
	if err != nil {
		return fmt.Errorf("delete blocks: %w", err)
	}
	return nil
}

// DeleteBlocksBefore drops uncommitted blocks written before cutoff (Azure
// discards them after a week) and returns how many.
func DeleteBlocksBefore(ctx context.Context, q Querier, cutoff time.Time) (int64, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM blob_blocks WHERE created < ?`, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("delete stale blocks: %w", err)
	}
	return res.RowsAffected()
}
