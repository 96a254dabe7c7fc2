package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Costs reads a cost report: of the client's workspace, or of its whole
// resource group when group is set. Zero times take the server's
// defaults (the current month until now).
func (c *Client) Costs(ctx context.Context, by string, since, until time.Time, group bool) (api.CostReport, error) {
	v := url.Values{"by": {by}}
	if !since.IsZero() {
		v.Set("since", since.UTC().Format(time.RFC3339))
	}
	if !until.IsZero() {
		v.Set("until", until.UTC().Format(time.RFC3339))
	}
	path := c.wsPath() + "/costs"
	if group {
		path = c.Scope.GroupID() + "/providers/" + api.Provider + "/costs"
	}
	var out api.CostReport
	_, err := c.Do(ctx, http.MethodGet, path+"?"+v.Encode(), nil, &out)
	return out, err
}
