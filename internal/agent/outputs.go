package agent

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
	"github.com/cumulus-ml/cumulus/internal/files"
)

// uploadOutputs sends each named output folder and then the main outputs
// folder (without the named ones) as tar.gz. It returns the first failure
// after trying every folder.
func (j *job) uploadOutputs(ctx context.Context) error {
	out := filepath.Join(j.dir, outputDir)
	if _, err := os.Stat(out); errors.Is(err, fs.ErrNotExist) {
		return nil // the command never ran
	}
	named := map[string]bool{}
	var first error
	var empty []string
	upload := func(name, dir string, skip func(string, fs.DirEntry) bool) {
		if err := os.MkdirAll(dir, 0o755); err != nil { // the job may have removed it
			first = cmp.Or(first, fmt.Errorf("%s: %w", name, err))
			return
		}
		if none, err := files.EmptyTree(dir, skip); err == nil && none {
			empty = append(empty, name) // told with the exit (agentapi.JobState.EmptyOutputs)
			return
		}
		if err := j.uploadOutput(ctx, name, dir, skip); err != nil {
			first = cmp.Or(first, err)
		}
	}
	for _, name := range j.asg.Outputs {
		if !safeName(name) || name == agentapi.DefaultOutput {
			continue // refused when the job was prepared
		}
		named[name] = true
		upload(name, filepath.Join(out, name), nil)
	}
	upload(agentapi.DefaultOutput, out, func(rel string, d fs.DirEntry) bool { return named[rel] })
	// Not saved on its own: the exit report is saved when acknowledged, and
	// an agent that restarts before finishes the job again from here.
	j.mu.Lock()
	j.state.EmptyOutputs = empty
	j.mu.Unlock()
	if err := j.uploadCheckpoint(ctx); err != nil && first == nil {
		first = err
	}
	return first
}

// uploadCheckpoint saves $CUMULUS_CHECKPOINT_DIR when the job left
// something there, so the next attempt (after a preemption) resumes.
func (j *job) uploadCheckpoint(ctx context.Context) error {
	dir := filepath.Join(j.dir, checkpointDir)
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return nil
	}
	return j.uploadOutput(ctx, agentapi.CheckpointOutput, dir, j.restoredUnchanged)
}

// fileStamp is what tells a restored checkpoint file from a rewritten one.
type fileStamp struct {
	size  int64
	mtime time.Time
}

// restoredUnchanged reports a checkpoint file that is still as it was
// restored: each attempt uploads only what it wrote, so that a rank's
// stale copy of another rank's shard never replaces the newer one (the
// server merges attempts, the later winning).
func (j *job) restoredUnchanged(rel string, d fs.DirEntry) bool {
	if d.IsDir() {
		return false
	}
	j.mu.Lock()
	st, ok := j.restored[rel]
	j.mu.Unlock()
	if !ok {
		return false
	}
	info, err := d.Info()
	return err == nil && info.Size() == st.size && info.ModTime().Equal(st.mtime)
}

// stampRestored records the checkpoint files as restored.
func (j *job) stampRestored(dir string) error {
	stamps := map[string]fileStamp{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		stamps[filepath.ToSlash(rel)] = fileStamp{info.Size(), info.ModTime()}
		return nil
	})
	j.mu.Lock()
	j.restored = stamps
	j.mu.Unlock()
	return err
}

// fetchCheckpoint restores the checkpoint an earlier attempt saved.
func (j *job) fetchCheckpoint(ctx context.Context) error {
	dir := filepath.Join(j.dir, checkpointDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	err := j.a.retry(ctx, j.log, "download the checkpoint", func(ctx context.Context) error {
		buf.Reset()
		resp, err := j.a.c.send(ctx, request{method: http.MethodGet, path: agentapi.Prefix + "/jobs/" + j.asg.UID + "/checkpoint"})
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(&buf, resp.Body)
		return err
	})
	if err != nil {
		return err
	}
	if err := files.Unpack(&buf, dir); err != nil {
		return err
	}
	return j.stampRestored(dir)
}

// uploadOutput packs dir (which exists) into a temporary file next to the
// outputs and PUTs it, retrying until the server takes it.
func (j *job) uploadOutput(ctx context.Context, name, dir string, skip func(string, fs.DirEntry) bool) error {
	tmp, err := os.CreateTemp(j.dir, ".output-"+name+"-*.tar.gz")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if err := files.PackFunc(tmp, dir, skip); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	q := url.Values{"attempt": {strconv.Itoa(j.asg.Attempt)}}
	err = j.a.retry(ctx, j.log, "upload output "+name, func(ctx context.Context) error {
		return j.a.c.do(ctx, request{
			method: http.MethodPut, path: agentapi.Prefix + "/jobs/" + j.asg.UID + "/outputs/" + name, query: q,
			contentType: "application/gzip",
			body: func() (io.ReadCloser, int64, error) {
				f, err := os.Open(tmp.Name())
				if err != nil {
					return nil, 0, err
				}
				fi, err := f.Stat()
				if err != nil {
					f.Close()
					return nil, 0, err
				}
				return f, fi.Size(), nil
			},
		}, nil)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
