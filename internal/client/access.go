package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Principal, TokenInfo, RoleAssignment and AuditEntry mirror the server's
// access-management answers.
type (
	Principal struct {
		Name    string    `json:"name"`
		Kind    string    `json:"kind"`
		Created time.Time `json:"created"`
	}
	TokenInfo struct {
		ID        string     `json:"id"`
		Principal string     `json:"principal"`
		Token     string     `json:"token,omitempty"`
		Created   time.Time  `json:"created,omitzero"`
		Expires   *time.Time `json:"expires,omitempty"`
		Revoked   bool       `json:"revoked"`
	}
	RoleAssignment struct {
		ID        string    `json:"id"`
		Principal string    `json:"principal"`
		Role      string    `json:"role"`
		Scope     string    `json:"scope"`
		Created   time.Time `json:"created"`
	}
	AuditEntry struct {
		Seq       int64     `json:"seq"`
		Time      time.Time `json:"time"`
		Principal string    `json:"principal"`
		Operation string    `json:"operation"`
		Resource  string    `json:"resource"`
		Status    int       `json:"status"`
	}
)

const authPath = "/cumulus/v1/auth"

// CreatePrincipal adds a user or service principal.
func (c *Client) CreatePrincipal(ctx context.Context, name, kind string) (Principal, error) {
	var out Principal
	_, err := c.Do(ctx, http.MethodPost, authPath+"/principals", Principal{Name: name, Kind: kind}, &out)
	return out, err
}

// ListPrincipals lists principals.
func (c *Client) ListPrincipals(ctx context.Context) ([]Principal, error) {
	return ListAll[Principal](ctx, c, http.MethodGet, authPath+"/principals")
}

// CreateToken issues a token for a principal; the token is in the answer only.
func (c *Client) CreateToken(ctx context.Context, principal, expiresIn string) (TokenInfo, error) {
	var out TokenInfo
	_, err := c.Do(ctx, http.MethodPost, authPath+"/tokens", map[string]string{"principal": principal, "expiresIn": expiresIn}, &out)
	return out, err
}

// ListTokens lists tokens (never their secrets).
func (c *Client) ListTokens(ctx context.Context, principal string) ([]TokenInfo, error) {
	return ListAll[TokenInfo](ctx, c, http.MethodGet, authPath+"/tokens?principal="+url.QueryEscape(principal))
}

// RevokeToken revokes a token by id.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodDelete, authPath+"/tokens/"+url.PathEscape(id), nil, nil)
	return err
}

// AssignRole gives a principal a role at a scope.
func (c *Client) AssignRole(ctx context.Context, principal, role, scope string) (RoleAssignment, error) {
	var out RoleAssignment
	_, err := c.Do(ctx, http.MethodPost, authPath+"/roleAssignments", RoleAssignment{Principal: principal, Role: role, Scope: scope}, &out)
	return out, err
}

// ListRoleAssignments lists role assignments (of one principal when given).
func (c *Client) ListRoleAssignments(ctx context.Context, principal string) ([]RoleAssignment, error) {
	return ListAll[RoleAssignment](ctx, c, http.MethodGet, authPath+"/roleAssignments?principal="+url.QueryEscape(principal))
}

// RemoveRoleAssignment deletes a role assignment.
func (c *Client) RemoveRoleAssignment(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodDelete, authPath+"/roleAssignments/"+url.PathEscape(id), nil, nil)
	return err
}

// ListAudit reads the audit log with filters.
func (c *Client) ListAudit(ctx context.Context, principal, resource string, since time.Time) ([]AuditEntry, error) {
	q := url.Values{}
	if principal != "" {
		q.Set("principal", principal)
	}
	if resource != "" {
		q.Set("resource", resource)
	}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	return ListAll[AuditEntry](ctx, c, http.MethodGet, "/cumulus/v1/audit?"+q.Encode())
}
