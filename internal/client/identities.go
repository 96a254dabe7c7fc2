package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// User-assigned identities (Microsoft.ManagedIdentity), in a resource group
// of the client's subscription; sent with the ManagedIdentity api-version.

func (c *Client) userIdentities(group string) string {
	return api.Scope{Subscription: c.Scope.Subscription, ResourceGroup: group}.GroupID() + "/providers/" + api.TypeUserIdentity
}

// PutUserIdentity creates a user-assigned identity (or updates its tags
// and location).
func (c *Client) PutUserIdentity(ctx context.Context, group string, u api.UserIdentity) (api.UserIdentity, error) {
	var out api.UserIdentity
	_, err := c.Do(ctx, http.MethodPut, c.userIdentities(group)+"/"+url.PathEscape(u.Name), u, &out)
	return out, err
}

// GetUserIdentity reads a user-assigned identity.
func (c *Client) GetUserIdentity(ctx context.Context, group, name string) (api.UserIdentity, error) {
	var out api.UserIdentity
	_, err := c.Do(ctx, http.MethodGet, c.userIdentities(group)+"/"+url.PathEscape(name), nil, &out)
	return out, err
}

// ListUserIdentities lists the user-assigned identities of a group.
func (c *Client) ListUserIdentities(ctx context.Context, group string) ([]api.UserIdentity, error) {
	return ListAll[api.UserIdentity](ctx, c, http.MethodGet, c.userIdentities(group))
}

// DeleteUserIdentity deletes a user-assigned identity; existed is false
// when there was none of that name.
func (c *Client) DeleteUserIdentity(ctx context.Context, group, name string) (existed bool, err error) {
	r, err := c.Do(ctx, http.MethodDelete, c.userIdentities(group)+"/"+url.PathEscape(name), nil, nil)
	if err != nil {
		return false, err
	}
	return r.Status != http.StatusNoContent, nil
}
