package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func (c *Client) jobPath(name string) string { return c.wsPath() + "/jobs/" + url.PathEscape(name) }

// PutJob submits a job.
func (c *Client) PutJob(ctx context.Context, j api.Job) (api.Job, error) {
	var out api.Job
	_, err := c.Do(ctx, http.MethodPut, c.jobPath(j.Name), j, &out)
	return out, err
}

// GetJob reads a job.
func (c *Client) GetJob(ctx context.Context, name string) (api.Job, error) {
	var out api.Job
	_, err := c.Do(ctx, http.MethodGet, c.jobPath(name), nil, &out)
	return out, err
}

// ListJobs reads the workspace's jobs, optionally in one status.
func (c *Client) ListJobs(ctx context.Context, status string) ([]api.Job, error) {
	p := c.wsPath() + "/jobs"
	if status != "" {
		p += "?status=" + url.QueryEscape(status)
	}
	return ListAll[api.Job](ctx, c, http.MethodGet, p)
}

// CancelJob asks for a job to be canceled; the response starts an operation.
func (c *Client) CancelJob(ctx context.Context, name string) (*Response, error) {
	return c.Do(ctx, http.MethodPost, c.jobPath(name)+"/cancel", nil, nil)
}

// DeleteJob deletes a finished job.
func (c *Client) DeleteJob(ctx context.Context, name string) (*Response, error) {
	return c.Do(ctx, http.MethodDelete, c.jobPath(name), nil, nil)
}

// JobLog reads a job's log from offset (attempt < 0: the latest).
func (c *Client) JobLog(ctx context.Context, name string, attempt, rank int, offset int64) (api.LogChunk, error) {
	q := url.Values{"rank": {strconv.Itoa(rank)}, "offset": {strconv.FormatInt(offset, 10)}}
	if attempt >= 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	var out api.LogChunk
	_, err := c.Do(ctx, http.MethodGet, c.jobPath(name)+"/logs?"+q.Encode(), nil, &out)
	return out, err
}

// JobOutput streams one output archive (tar.gz) of a job into w.
func (c *Client) JobOutput(ctx context.Context, name, output string, w io.Writer) error {
	return c.stream(ctx, http.MethodGet, c.jobPath(name)+"/outputs/"+url.PathEscape(output)+"?api-version="+APIVersion, nil, nil, w)
}

// UploadBlob stores data content-addressed in the client's workspace and
// returns its sha256. The blob belongs to the workspace: jobs of the
// workspace can use it, and only callers who may read the workspace can
// read it.
func (c *Client) UploadBlob(ctx context.Context, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	h := http.Header{"Content-Type": {"application/octet-stream"}}
	body := func() io.Reader { return bytes.NewReader(data) } // in memory already: each attempt re-reads it
	return digest, c.stream(ctx, http.MethodPut, c.blobPath(digest), h, body, io.Discard)
}

// DownloadBlob streams a blob of the client's workspace into w.
func (c *Client) DownloadBlob(ctx context.Context, digest string, w io.Writer) error {
	return c.stream(ctx, http.MethodGet, c.blobPath(digest), nil, nil, w)
}

// blobPath is the path of a blob of the client's workspace.
func (c *Client) blobPath(digest string) string {
	return "/cumulus/v1/blobs/" + url.PathEscape(digest) + "?workspace=" + url.QueryEscape(c.Scope.WorkspaceID())
}

// stream sends a non-JSON request and copies a 2xx body into w.
func (c *Client) stream(ctx context.Context, method, path string, h http.Header, body func() io.Reader, w io.Writer) error {
	resp, err := c.send(ctx, method, path, h, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return decodeError(resp.StatusCode, data)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// PutEnvironment creates or replaces an environment version.
func (c *Client) PutEnvironment(ctx context.Context, name, version string, e api.Environment) (api.Environment, error) {
	var out api.Environment
	_, err := c.Do(ctx, http.MethodPut, c.wsPath()+"/environments/"+url.PathEscape(name)+"/versions/"+url.PathEscape(version), e, &out)
	return out, err
}

// GetEnvironment reads an environment version.
func (c *Client) GetEnvironment(ctx context.Context, name, version string) (api.Environment, error) {
	var out api.Environment
	_, err := c.Do(ctx, http.MethodGet, c.wsPath()+"/environments/"+url.PathEscape(name)+"/versions/"+url.PathEscape(version), nil, &out)
	return out, err
}

// ListEnvironmentVersions reads an environment's versions.
func (c *Client) ListEnvironmentVersions(ctx context.Context, name string) ([]api.Environment, error) {
	return ListAll[api.Environment](ctx, c, http.MethodGet, c.wsPath()+"/environments/"+url.PathEscape(name)+"/versions")
}

// JobMetrics reads what a job logged the MLflow way: the latest value of
// each metric, every value of the metrics named (none: all), params and
// tags.
func (c *Client) JobMetrics(ctx context.Context, name string, metrics ...string) (api.JobMetrics, error) {
	p := c.jobPath(name) + "/metrics"
	if len(metrics) > 0 {
		p += "?" + url.Values{"name": metrics}.Encode()
	}
	var out api.JobMetrics
	_, err := c.Do(ctx, http.MethodGet, p, nil, &out)
	return out, err
}

// ListTrials reads a sweep's trials, in the order they were created.
func (c *Client) ListTrials(ctx context.Context, sweep string) ([]api.Job, error) {
	return ListAll[api.Job](ctx, c, http.MethodGet, c.wsPath()+"/jobs?parentJobName="+url.QueryEscape(sweep))
}

// ListEnvironments reads the workspace's environments, each with its
// latest version.
func (c *Client) ListEnvironments(ctx context.Context) ([]api.EnvironmentContainer, error) {
	return ListAll[api.EnvironmentContainer](ctx, c, http.MethodGet, c.wsPath()+"/environments")
}
