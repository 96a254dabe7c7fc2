package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// JobCache keeps decoded job documents between reads of pages of the job
// list: a job read again unchanged (the same stored body) is not decoded
// again. A page is 100 documents; decoding them was most of what a page
// cost, and the pages people look at (the newest, the first) are read
// again and again while few of their jobs change.
//
// The cache holds at most JobCacheSize jobs; past that it forgets half of
// them, whichever the map yields first (no order is kept: keeping one
// would cost every hit a write under the lock).
type JobCache struct {
	mu  sync.Mutex
	max int
	by  map[string]cachedJob // uid → last read
}

type cachedJob struct {
	body string
	job  Job
}

// JobCacheSize is how many decoded jobs a JobCache keeps.
const JobCacheSize = 8192

// NewJobCache returns an empty cache of at most JobCacheSize jobs.
func NewJobCache() *JobCache { return &JobCache{max: JobCacheSize, by: map[string]cachedJob{}} }

// ListJobsCached is ListJobs through the cache. The jobs share their
// slices and maps (history, nodes, variables…) with the cache: a caller
// may assign fields of its copy, never change a slice's or map's
// elements in place.
func ListJobsCached(ctx context.Context, q Querier, c *JobCache, parent, status, after string, limit int) ([]Job, error) {
	query, args := listJobsQuery(parent, status, after, limit)
	return queryJobsVia(ctx, q, c, query, args...)
}

// get returns the cached job uid when its stored body is still body (a nil
// cache holds nothing).
func (c *JobCache) get(uid string, body []byte) (Job, bool) {
	if c == nil {
		return Job{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.by[uid]
	if !ok || e.body != string(body) { // compared without a copy
		return Job{}, false
	}
	return e.job, true
}

// put keeps j as decoded from body (a nil cache keeps nothing).
func (c *JobCache) put(j Job, body string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.by) >= c.max {
		for uid := range c.by {
			delete(c.by, uid)
			if len(c.by) <= c.max/2 {
				break
			}
		}
	}
	c.by[j.UID] = cachedJob{body: body, job: j}
}

// decodeJobBody fills j from its stored body and creation time.
func decodeJobBody(j *Job, body []byte, created int64) error {
	var b jobBody
	if err := json.Unmarshal(body, &b); err != nil {
		return fmt.Errorf("decode job %s: %w", j.UID, err)
	}
	j.setBody(b, created)
	return nil
}

// setBody fills j from its decoded body and creation time.
func (j *Job) setBody(b jobBody, created int64) {
	j.Doc, j.Attempt, j.Nodes, j.Exits, j.Preemptions = b.Doc, b.Attempt, b.Nodes, b.Exits, b.Preempt
	j.PortRetries, j.MPIDone = b.Ports, b.MPIDone
	j.Reclaims, j.Reclaimed = b.Reclaim, b.Last
	j.EmptyOutputs = b.Empty
	j.Created = time.UnixMilli(created).UTC()
	j.ran = markOf(j)
	j.stored = b.Doc.Properties.Status
}
