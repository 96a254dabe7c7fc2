package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// EventQuery filters a history. Zero fields filter nothing; Limit bounds
// how many of the newest events are read (0: all).
type EventQuery struct {
	Types        []string
	Node         string // compute events only
	Since, Until time.Time
	Limit        int
}

func (q EventQuery) values() url.Values {
	v := url.Values{}
	if len(q.Types) > 0 {
		v.Set("type", strings.Join(q.Types, ","))
	}
	if q.Node != "" {
		v.Set("node", q.Node)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339))
	}
	if q.Limit > 0 {
		v.Set("$top", strconv.Itoa(q.Limit))
	}
	return v
}

// ComputeEvents reads a compute's and its nodes' events, newest first.
func (c *Client) ComputeEvents(ctx context.Context, name string, q EventQuery) ([]api.Event, error) {
	return c.events(ctx, c.wsPath()+"/computes/"+url.PathEscape(name)+"/events", q)
}

// JobEvents reads a job's status changes, newest first.
func (c *Client) JobEvents(ctx context.Context, name string, q EventQuery) ([]api.Event, error) {
	return c.events(ctx, c.wsPath()+"/jobs/"+url.PathEscape(name)+"/events", q)
}

func (c *Client) events(ctx context.Context, path string, q EventQuery) ([]api.Event, error) {
	out := []api.Event{}
	if v := q.values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	for path != "" && (q.Limit <= 0 || len(out) < q.Limit) {
		var page api.EventsPage
		if _, err := c.Do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
		path = page.NextLink
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}
