package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func (c *Client) wsPath() string { return c.Scope.WorkspaceID() }
func (c *Client) locPath(loc string) string {
	if loc == "" {
		loc = c.Location
	}
	if loc == "" {
		loc = "local"
	}
	return "/subscriptions/" + c.Scope.Subscription + "/providers/" + api.Provider + "/locations/" + url.PathEscape(loc)
}

// PutCompute creates or updates a compute; the response starts an operation.
func (c *Client) PutCompute(ctx context.Context, comp api.Compute) (api.Compute, *Response, error) {
	var out api.Compute
	r, err := c.Do(ctx, http.MethodPut, c.wsPath()+"/computes/"+url.PathEscape(comp.Name), comp, &out)
	return out, r, err
}

// GetCompute reads a compute.
func (c *Client) GetCompute(ctx context.Context, name string) (api.Compute, error) {
	var out api.Compute
	_, err := c.Do(ctx, http.MethodGet, c.wsPath()+"/computes/"+url.PathEscape(name), nil, &out)
	return out, err
}

// ListComputes reads every compute of the workspace.
func (c *Client) ListComputes(ctx context.Context) ([]api.Compute, error) {
	return ListAll[api.Compute](ctx, c, http.MethodGet, c.wsPath()+"/computes")
}

// UpdateScale PATCHes a compute's scale settings.
func (c *Client) UpdateScale(ctx context.Context, name string, s api.ScaleSettings) (api.Compute, error) {
	return c.UpdateCompute(ctx, name, api.ClusterUpdateProperties{ScaleSettings: &s})
}

// UpdateCompute PATCHes what a PATCH may change: scale settings (merged)
// and the idle policy (replaced).
func (c *Client) UpdateCompute(ctx context.Context, name string, u api.ClusterUpdateProperties) (api.Compute, error) {
	body := map[string]any{"properties": map[string]any{"properties": u}}
	var out api.Compute
	_, err := c.Do(ctx, http.MethodPatch, c.wsPath()+"/computes/"+url.PathEscape(name), body, &out)
	return out, err
}

// DeleteCompute starts deleting a compute.
func (c *Client) DeleteCompute(ctx context.Context, name string) (*Response, error) {
	return c.Do(ctx, http.MethodDelete, c.wsPath()+"/computes/"+url.PathEscape(name)+"?underlyingResourceAction=Delete", nil, nil)
}

// ListNodes reads every node of a compute.
func (c *Client) ListNodes(ctx context.Context, name string) ([]api.NodeInfo, error) {
	var all []api.NodeInfo
	method, path := http.MethodPost, c.wsPath()+"/computes/"+url.PathEscape(name)+"/listNodes"
	for path != "" {
		var page api.NodesPage
		if _, err := c.Do(ctx, method, path, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Nodes...)
		method, path = http.MethodGet, page.NextLink
	}
	return all, nil
}

// ListKeys reads a compute's admin credentials.
func (c *Client) ListKeys(ctx context.Context, name string) (api.ComputeSecrets, error) {
	var out api.ComputeSecrets
	_, err := c.Do(ctx, http.MethodPost, c.wsPath()+"/computes/"+url.PathEscape(name)+"/listKeys", nil, &out)
	return out, err
}

// ListSizes reads the VM size catalog of a location.
func (c *Client) ListSizes(ctx context.Context, loc string) ([]api.VMSize, error) {
	var out api.VMSizeList
	_, err := c.Do(ctx, http.MethodGet, c.locPath(loc)+"/vmSizes", nil, &out)
	return out.Value, err
}

// ListUsages reads core usage of a location.
func (c *Client) ListUsages(ctx context.Context, loc string) ([]api.Usage, error) {
	return ListAll[api.Usage](ctx, c, http.MethodGet, c.locPath(loc)+"/usages")
}

// ListQuotas reads the quotas of a location.
func (c *Client) ListQuotas(ctx context.Context, loc string) ([]api.Quota, error) {
	return ListAll[api.Quota](ctx, c, http.MethodGet, c.locPath(loc)+"/quotas")
}

// UpdateQuotas sets quota limits in a location.
func (c *Client) UpdateQuotas(ctx context.Context, loc string, req api.QuotaUpdateRequest) ([]api.QuotaUpdate, error) {
	var out api.Page[api.QuotaUpdate]
	_, err := c.Do(ctx, http.MethodPost, c.locPath(loc)+"/updateQuotas", req, &out)
	return out.Value, err
}

// PutWorkspace creates or updates a workspace.
func (c *Client) PutWorkspace(ctx context.Context, w api.Workspace) (api.Workspace, error) {
	var out api.Workspace
	_, err := c.Do(ctx, http.MethodPut, c.Scope.GroupID()+"/providers/"+api.Provider+"/workspaces/"+url.PathEscape(w.Name), w, &out)
	return out, err
}

// GetWorkspace reads a workspace.
func (c *Client) GetWorkspace(ctx context.Context, name string) (api.Workspace, error) {
	var out api.Workspace
	_, err := c.Do(ctx, http.MethodGet, c.Scope.GroupID()+"/providers/"+api.Provider+"/workspaces/"+url.PathEscape(name), nil, &out)
	return out, err
}

// ListWorkspaces reads the workspaces of the resource group.
func (c *Client) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	return ListAll[api.Workspace](ctx, c, http.MethodGet, c.Scope.GroupID()+"/providers/"+api.Provider+"/workspaces")
}

// DeleteWorkspace deletes a workspace (force also deletes its computes).
func (c *Client) DeleteWorkspace(ctx context.Context, name string, force bool) (*Response, error) {
	p := c.Scope.GroupID() + "/providers/" + api.Provider + "/workspaces/" + url.PathEscape(name)
	if force {
		p += "?forceToPurge=true"
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}

// GetComputeWithETag reads a compute and its ETag.
func (c *Client) GetComputeWithETag(ctx context.Context, name string) (api.Compute, string, error) {
	var out api.Compute
	r, err := c.Do(ctx, http.MethodGet, c.wsPath()+"/computes/"+url.PathEscape(name), nil, &out)
	if err != nil {
		return out, "", err
	}
	return out, r.Header.Get("ETag"), nil
}

// ReplaceCompute PUTs a full compute only if it still has the given ETag.
func (c *Client) ReplaceCompute(ctx context.Context, comp api.Compute, etag string) (api.Compute, error) {
	var out api.Compute
	_, err := c.DoWithHeaders(ctx, http.MethodPut, c.wsPath()+"/computes/"+url.PathEscape(comp.Name), map[string]string{"If-Match": etag}, comp, &out)
	return out, err
}

// JoinToken issues a token with which a machine joins a compute by hand.
func (c *Client) JoinToken(ctx context.Context, name string) (token, command string, err error) {
	var out api.JoinToken
	_, err = c.Do(ctx, http.MethodPost, c.wsPath()+"/computes/"+url.PathEscape(name)+"/joinToken", nil, &out)
	return out.Token, out.Command, err
}

// SimulateEviction preempts a node of a low-priority compute.
func (c *Client) SimulateEviction(ctx context.Context, name, node string) error {
	_, err := c.Do(ctx, http.MethodPost, c.wsPath()+"/computes/"+url.PathEscape(name)+"/nodes/"+url.PathEscape(node)+"/simulateEviction", nil, nil)
	return err
}

// EditCompute reads a compute, lets edit change it, and PUTs the result
// guarded by the ETag it read. When the compute changed meanwhile (a 412:
// the controllers record a cluster's status on it too), it reads it again
// and edits that, up to five times. edit returns false to write nothing;
// EditCompute then returns the compute as read and false.
func (c *Client) EditCompute(ctx context.Context, name string, edit func(cur api.Compute) (next api.Compute, write bool, err error)) (api.Compute, bool, error) {
	for try := 1; ; try++ {
		cur, etag, err := c.GetComputeWithETag(ctx, name)
		if err != nil {
			return cur, false, err
		}
		next, write, err := edit(cur)
		if err != nil || !write {
			return cur, false, err
		}
		out, err := c.ReplaceCompute(ctx, next, etag)
		var ae *api.Error
		if err == nil || try == 5 || !errors.As(err, &ae) || ae.Status != http.StatusPreconditionFailed {
			return out, err == nil, err
		}
	}
}

// GetQueue reads a compute's queue in the order its scheduler will start
// it: the first top jobs (0: the server's default).
func (c *Client) GetQueue(ctx context.Context, name string, top int) (api.QueueView, error) {
	var out api.QueueView
	path := c.wsPath() + "/computes/" + url.PathEscape(name) + "/queue"
	if top > 0 {
		path += "?$top=" + strconv.Itoa(top)
	}
	_, err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}
