package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// LockAPIVersion is the api-version of Microsoft.Authorization/locks.
const LockAPIVersion = "2016-09-01"

// lockScope is the id locks are listed and written at: the compute when
// one is named, else the workspace.
func (c *Client) lockScope(compute string) string {
	if compute != "" {
		return c.wsPath() + "/computes/" + url.PathEscape(compute)
	}
	return c.wsPath()
}

func (c *Client) lockPath(compute, name string) string {
	return c.lockScope(compute) + "/providers/" + api.LockProvider + "/locks/" + url.PathEscape(name) + "?api-version=" + LockAPIVersion
}

// PutLock creates or replaces the lock name at the workspace, or at one
// of its computes.
func (c *Client) PutLock(ctx context.Context, compute, name string, p api.LockProperties) (api.Lock, error) {
	var out api.Lock
	_, err := c.Do(ctx, http.MethodPut, c.lockPath(compute, name), api.Lock{Properties: p}, &out)
	return out, err
}

// GetLock reads the lock name at the workspace or one of its computes.
func (c *Client) GetLock(ctx context.Context, compute, name string) (api.Lock, error) {
	var out api.Lock
	_, err := c.Do(ctx, http.MethodGet, c.lockPath(compute, name), nil, &out)
	return out, err
}

// ListLocks lists the locks that apply at the workspace or compute (its
// own and those above it) and those of the resources under it.
func (c *Client) ListLocks(ctx context.Context, compute string) ([]api.Lock, error) {
	out := []api.Lock{}
	path := c.lockScope(compute) + "/providers/" + api.LockProvider + "/locks?api-version=" + LockAPIVersion
	for path != "" {
		var page api.LockList
		if _, err := c.Do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
		path = page.NextLink
	}
	return out, nil
}

// DeleteLock removes a lock; existed is false when there was none.
func (c *Client) DeleteLock(ctx context.Context, compute, name string) (existed bool, err error) {
	r, err := c.Do(ctx, http.MethodDelete, c.lockPath(compute, name), nil, nil)
	if err != nil {
		return false, err
	}
	return r.Status != http.StatusNoContent, nil
}
