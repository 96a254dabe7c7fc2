package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func (c *Client) budgetPath(name string) string {
	return c.wsPath() + "/budgets/" + url.PathEscape(name)
}

// PutBudget creates or replaces a budget of the workspace.
func (c *Client) PutBudget(ctx context.Context, b api.Budget) (api.Budget, error) {
	var out api.Budget
	_, err := c.Do(ctx, http.MethodPut, c.budgetPath(b.Name), b, &out)
	return out, err
}

// GetBudget reads a budget with its status.
func (c *Client) GetBudget(ctx context.Context, name string) (api.Budget, error) {
	var out api.Budget
	_, err := c.Do(ctx, http.MethodGet, c.budgetPath(name), nil, &out)
	return out, err
}

// ListBudgets lists the workspace's budgets.
func (c *Client) ListBudgets(ctx context.Context) ([]api.Budget, error) {
	return ListAll[api.Budget](ctx, c, http.MethodGet, c.wsPath()+"/budgets")
}

// DeleteBudget deletes a budget (absent is not an error).
func (c *Client) DeleteBudget(ctx context.Context, name string) error {
	_, err := c.Do(ctx, http.MethodDelete, c.budgetPath(name), nil, nil)
	return err
}
