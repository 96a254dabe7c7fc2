package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// UsageRange selects samples: of one node (compute samples only), since
// and until (zero: the server's defaults — the last hour of a compute,
// the whole of a job).
type UsageRange struct {
	Node         string
	Since, Until time.Time
}

func (r UsageRange) query() string {
	v := url.Values{}
	if r.Node != "" {
		v.Set("node", r.Node)
	}
	if !r.Since.IsZero() {
		v.Set("since", r.Since.UTC().Format(time.RFC3339Nano))
	}
	if !r.Until.IsZero() {
		v.Set("until", r.Until.UTC().Format(time.RFC3339Nano))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// ComputeUsage reads the utilization samples of a compute's nodes.
func (c *Client) ComputeUsage(ctx context.Context, name string, r UsageRange) ([]api.UsageSample, error) {
	var out api.UsageSamples
	_, err := c.Do(ctx, http.MethodGet, c.wsPath()+"/computes/"+url.PathEscape(name)+"/usageSamples"+r.query(), nil, &out)
	return out.Value, err
}

// JobUsage reads the utilization samples of a job on each of its nodes.
func (c *Client) JobUsage(ctx context.Context, name string, r UsageRange) ([]api.UsageSample, error) {
	var out api.UsageSamples
	_, err := c.Do(ctx, http.MethodGet, c.jobPath(name)+"/usageSamples"+r.query(), nil, &out)
	return out.Value, err
}
