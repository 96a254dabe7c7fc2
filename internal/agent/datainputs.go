package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/cumulus-ml/cumulus/internal/agentapi"
)

// Code and inputs in the workspace's blob store (Assignment.CodeFiles,
// DataInputs) are copied into the job's folder before the command starts,
// whatever mode the job asked for (ro_mount and download alike): the
// agent lists what the folder holds and downloads each file by its
// sha256, checking it, a few at a time.

// fileWorkers is how many files the agent downloads at once.
const fileWorkers = 4

// fetchData downloads the job's code (into the working directory) and its
// inputs (into inputs/<name>) from the blob store.
func (j *job) fetchData(ctx context.Context) error {
	if j.asg.CodeFiles {
		if err := j.fetchFiles(ctx, agentapi.Prefix+"/jobs/"+j.asg.UID+"/code/files", j.dir); err != nil {
			return fmt.Errorf("code download failed: %w", err)
		}
	}
	names := make([]string, 0, len(j.asg.DataInputs))
	for name := range j.asg.DataInputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !safeName(name) {
			return fmt.Errorf("input name %q may hold only letters, digits, '.', '_' and '-'", name)
		}
		if err := j.fetchFiles(ctx, agentapi.Prefix+"/jobs/"+j.asg.UID+"/inputs/"+name+"/files", filepath.Join(j.dir, inputDir, name)); err != nil {
			return fmt.Errorf("input %s download failed: %w", name, err)
		}
	}
	return nil
}

// dataInputEnv is AZUREML_INPUT_<name> (and CUMULUS_INPUT_<NAME>) of each
// input from the blob store: its folder, or for a file input the file.
func (j *job) dataInputEnv() []string {
	var env []string
	for name, in := range j.asg.DataInputs {
		p := filepath.Join(j.dir, inputDir, name)
		if in.File {
			if ents, err := os.ReadDir(p); err == nil && len(ents) == 1 {
				p = filepath.Join(p, ents[0].Name())
			}
		}
		env = append(env, "AZUREML_INPUT_"+name+"="+p, "CUMULUS_INPUT_"+envName(name)+"="+p)
	}
	sort.Strings(env)
	return env
}

// fetchFiles lists a folder of the blob store and downloads its files
// into dir.
func (j *job) fetchFiles(ctx context.Context, listPath, dir string) error {
	var list agentapi.FileList
	err := j.a.retry(ctx, j.log, "list "+path.Base(path.Dir(listPath)), func(ctx context.Context) error {
		return j.a.c.do(ctx, request{method: http.MethodGet, path: listPath}, &list)
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range list.Files {
		if err := checkRel(f.Path); err != nil {
			return err
		}
	}
	work := make(chan agentapi.ListedFile)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	for range min(fileWorkers, len(list.Files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := j.fetchFile(ctx, f, filepath.Join(dir, filepath.FromSlash(f.Path))); err != nil {
					fail(fmt.Errorf("%s: %w", f.Path, err))
				}
			}
		}()
	}
	for _, f := range list.Files {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		work <- f
	}
	close(work)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// checkRel refuses a listed path that could land outside its folder.
func checkRel(rel string) error {
	if rel == "" || path.IsAbs(rel) || strings.Contains(rel, "\\") {
		return fmt.Errorf("the server listed a file %q that is not a relative path", rel)
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("the server listed a file %q that climbs out of its folder", rel)
		}
	}
	return nil
}

// fetchFile downloads one blob file to dst and checks its sha256.
func (j *job) fetchFile(ctx context.Context, f agentapi.ListedFile, dst string) error {
	sum := strings.ToLower(f.Digest)
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return fmt.Errorf("blob %q is not a sha256 digest", f.Digest)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return j.a.retry(ctx, j.log, "download "+f.Path, func(ctx context.Context) error {
		resp, err := j.a.c.send(ctx, request{method: http.MethodGet, path: agentapi.BlobPrefix + "/" + sum})
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		tmp, err := os.CreateTemp(filepath.Dir(dst), ".download-*")
		if err != nil {
			return final(err)
		}
		defer os.Remove(tmp.Name())
		h := sha256.New()
		_, err = io.Copy(io.MultiWriter(tmp, h), resp.Body)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			return final(&digestError{got: got, want: sum})
		}
		if err := os.Chmod(tmp.Name(), 0o644); err != nil {
			return final(err)
		}
		return os.Rename(tmp.Name(), dst)
	})
}

// writeNotes writes the assignment's notes at the top of the job's log.
func (j *job) writeNotes(w io.Writer) {
	for _, n := range j.asg.Notes {
		fmt.Fprintln(w, n)
	}
}
