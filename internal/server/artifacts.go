package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/blobapi"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Job artifacts in the workspaceartifactstore container, laid out as
// Azure lays them out under ExperimentRun/dcid.<job>/: the job's default
// outputs (outputs/…, filed there when the job's nodes upload them) and
// its logs, which are read from the job's log files when asked for
// (user_logs/std_log.txt, or std_log_process_<rank>.txt for a job on
// several nodes; a sweep's progress as azureml-logs/hyperdrive.txt).
// The logs appear in a listing whose prefix names the job.

// artifactJob reads the job a path of the artifact container names
// (ExperimentRun/dcid.<job>/…); ok is false for other paths.
func artifactJob(path string) (job, rest string, ok bool) {
	after, found := strings.CutPrefix(path, "ExperimentRun/dcid.")
	if !found {
		return "", "", false
	}
	job, rest, _ = strings.Cut(after, "/")
	return job, rest, job != ""
}

// logBlobs are the log blobs of the job prefix names, under prefix.
func (s *Server) logBlobs(ctx context.Context, st storeWorkspace, prefix string) ([]blobContent, error) {
	name, _, ok := artifactJob(prefix)
	if !ok {
		return nil, nil
	}
	j, err := store.GetJob(ctx, s.db.Q(), st.id(), name)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	base := api.ArtifactPath(j.Doc.Name)
	var out []blobContent
	if j.Doc.IsSweep() {
		text, modified, err := s.sweepLog(ctx, st, j)
		if err != nil {
			return nil, err
		}
		out = append(out, memoryBlob(base+"azureml-logs/hyperdrive.txt", text, modified))
	}
	key := logKey(j.UID, j.Attempt)
	ranks := s.logs.Ranks(key)
	for _, rank := range ranks {
		file := "user_logs/std_log.txt"
		if len(ranks) > 1 || rank != 0 {
			file = "user_logs/std_log_process_" + strconv.Itoa(rank) + ".txt"
		}
		f, err := s.logs.Open(key, rank)
		if err != nil {
			continue
		}
		info, err := f.Stat()
		f.Close()
		if err != nil {
			continue
		}
		rank := rank
		out = append(out, blobContent{
			Blob: blobapi.Blob{Name: base + file, Size: info.Size(), ContentType: "text/plain", Created: j.Created, Modified: info.ModTime().UTC(),
				ETag: fmt.Sprintf(`"0x%X%X"`, info.ModTime().UnixNano(), info.Size())},
			open: func() (io.ReadSeekCloser, error) { return s.logs.Open(key, rank) },
		})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	kept := out[:0]
	for _, b := range out {
		if strings.HasPrefix(b.Name, prefix) {
			kept = append(kept, b)
		}
	}
	return kept, nil
}

// logBlob finds one log blob of the artifact container by name.
func (s *Server) logBlob(ctx context.Context, st storeWorkspace, name string) (blobContent, bool, error) {
	job, _, ok := artifactJob(name)
	if !ok {
		return blobContent{}, false, nil
	}
	all, err := s.logBlobs(ctx, st, api.ArtifactPath(job))
	if err != nil {
		return blobContent{}, false, err
	}
	for _, b := range all {
		if b.Name == name {
			return b, true, nil
		}
	}
	return blobContent{}, false, nil
}

// memoryBlob is a blob made on the fly.
func memoryBlob(name string, content []byte, modified time.Time) blobContent {
	return blobContent{
		Blob: blobapi.Blob{Name: name, Size: int64(len(content)), ContentType: "text/plain", Created: modified, Modified: modified,
			ETag: fmt.Sprintf(`"0x%X%X"`, modified.UnixNano(), len(content))},
		open: func() (io.ReadSeekCloser, error) { return nopSeekCloser{bytes.NewReader(content)}, nil },
	}
}

type nopSeekCloser struct{ *bytes.Reader }

func (nopSeekCloser) Close() error { return nil }

// sweepLog is a sweep's progress as a log: each trial's status changes in
// time order, then the best trial. What was written stays as it was as
// the sweep goes on (streaming prints only the lines it has not printed).
func (s *Server) sweepLog(ctx context.Context, st storeWorkspace, sw store.Job) ([]byte, time.Time, error) {
	type line struct {
		t    time.Time
		text string
	}
	var lines []line
	modified := sw.Created
	for _, h := range sw.Doc.Properties.History {
		lines = append(lines, line{h.Time, fmt.Sprintf("%s sweep %s: %s %s", h.Time.UTC().Format(time.RFC3339), sw.Doc.Name, h.Status, h.Reason)})
	}
	if sp := sw.Doc.Properties.Sweep; sp != nil {
		for i := range sp.TrialsCreated {
			t, err := store.GetJob(ctx, s.db.Q(), st.id(), api.TrialName(sw.Doc.Name, i))
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, modified, err
			}
			for _, h := range t.Doc.Properties.History {
				text := fmt.Sprintf("%s trial %s: %s", h.Time.UTC().Format(time.RFC3339), t.Doc.Name, h.Status)
				if h.Status == api.JobQueued && len(t.Doc.Properties.Parameters) > 0 {
					text += fmt.Sprintf(" %v", t.Doc.Properties.Parameters)
				}
				lines = append(lines, line{h.Time, strings.TrimSpace(text + " " + h.Reason)})
			}
		}
	}
	sort.SliceStable(lines, func(i, k int) bool { return lines[i].t.Before(lines[k].t) })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimSpace(l.text))
		b.WriteByte('\n')
		if l.t.After(modified) {
			modified = l.t
		}
	}
	if sp := sw.Doc.Properties.Sweep; sp != nil && sp.BestTrial != nil && api.JobTerminal(sw.Doc.Properties.Status) {
		fmt.Fprintf(&b, "best trial %s: %s = %g %v\n", sp.BestTrial.Name, sp.BestTrial.Metric, sp.BestTrial.Value, sp.BestTrial.Parameters)
	}
	return []byte(b.String()), modified, nil
}
