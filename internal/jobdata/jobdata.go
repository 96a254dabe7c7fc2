// Package jobdata resolves where a submitted job's code, inputs and
// outputs are in its workspace's blob store: data assets by name
// (azureml:NAME:V, azureml:NAME@latest, a version's id), datastore paths
// (azureml://datastores/<ds>/paths/<p>), blob URLs of the workspace's
// account, code versions by id, and outputs at the path Azure uses by
// default. What it finds is recorded on the job as api.BlobPath values,
// which the agent protocol reads (the node downloads inputs and code
// file by file; the server files outputs under their path).
//
// One call, Resolve, from the path that creates a job; what it reads
// comes through Source (Store reads the store).
package jobdata

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// Source is what resolution reads of one workspace.
type Source interface {
	// Account is the workspace's blob store account.
	Account() string
	// Datastore reads a datastore, built in or added; an error wrapping
	// store.ErrNotFound when there is none of that name.
	Datastore(ctx context.Context, name string) (api.Datastore, error)
	// DataVersion reads a data asset version (api.LatestVersion: the
	// one made last); CodeVersion a code asset version. Both wrap
	// store.ErrNotFound when absent.
	DataVersion(ctx context.Context, name, version string) (api.DataVersion, error)
	CodeVersion(ctx context.Context, name, version string) (api.CodeVersion, error)
	// Exists reports whether a container holds a blob at path or, with
	// folder, any blob under it.
	Exists(ctx context.Context, container, path string, folder bool) (bool, error)
}

// invalid is the 400 of a job whose data cannot be resolved.
func invalid(target, format string, args ...any) error {
	return &api.Error{Status: 400, Code: api.CodeValidationError, Target: target, Message: fmt.Sprintf(format, args...)}
}

// Container is the container a blob path is in.
func Container(ctx context.Context, src Source, b api.BlobPath) (string, error) {
	if b.Datastore == "" {
		return b.Container, nil
	}
	d, err := src.Datastore(ctx, b.Datastore)
	if err != nil {
		return "", err
	}
	return d.Properties.ContainerName, nil
}

// ResolvePath reads a data URI (api.ParseDataURI) of workspace sc and
// checks that something is there: the blob, with file, or else at least
// one blob under the folder.
func ResolvePath(ctx context.Context, src Source, sc api.Scope, uri string, file bool) (api.BlobPath, error) {
	loc, err := api.ParseDataURI(uri, src.Account())
	if err != nil {
		return api.BlobPath{}, err
	}
	if s := loc.Scope; s != nil && !(strings.EqualFold(s.Subscription, sc.Subscription) && strings.EqualFold(s.ResourceGroup, sc.ResourceGroup) && strings.EqualFold(s.Workspace, sc.Workspace)) {
		return api.BlobPath{}, fmt.Errorf("%.200q names workspace %s of resource group %s; a job reads data of its own workspace (%s)", uri, s.Workspace, s.ResourceGroup, sc.Workspace)
	}
	b := loc.BlobPath
	b.File = file
	if file {
		b.Path = strings.TrimSuffix(b.Path, "/")
		if b.Path == "" {
			return b, fmt.Errorf("%.200q names a folder, not a file (uri_file)", uri)
		}
	}
	container, err := Container(ctx, src, b)
	if errors.Is(err, store.ErrNotFound) {
		return b, fmt.Errorf("%.200q: datastore %s does not exist in workspace %s ('cumulus datastore list')", uri, b.Datastore, sc.Workspace)
	}
	if err != nil {
		return b, err
	}
	ok, err := src.Exists(ctx, container, b.Path, !file)
	if err != nil {
		return b, err
	}
	if !ok {
		what := "no files under"
		if file {
			what = "no file at"
		}
		return b, fmt.Errorf("there are %s %.200q: upload the data first (a local path in a job or 'cumulus data create' uploads it)", what, uri)
	}
	return b, nil
}

// Resolve records where a job's code, inputs and outputs are (command and
// sweep jobs; the caller has run api.PrepareJob). A command job's outputs
// that name no path get Azure's default, azureml/<job>/<output>/ in the
// default datastore; a sweep's get theirs per trial (api.Job.Trial).
// Inputs that are literals, direct, cumulus://blobs/ snapshots or URLs
// outside the blob store are left as they are: the job reads them itself.
func Resolve(ctx context.Context, src Source, sc api.Scope, job string, p *api.JobProperties) error {
	codeID := p.CodeID
	if p.Trial != nil {
		codeID = p.Trial.CodeID
	}
	if codeID != "" {
		b, err := resolveCode(ctx, src, sc, codeID)
		if err != nil {
			return err
		}
		p.CodeBlobPath = b
	}
	for name, in := range p.Inputs {
		b, err := resolveInput(ctx, src, sc, name, in)
		if err != nil {
			return err
		}
		in.BlobPath = b
		p.Inputs[name] = in
	}
	if p.Trial == nil {
		p.Outputs = api.WithDefaultOutputs(p.Outputs, job)
	}
	for name, out := range p.Outputs {
		if out.URI == "" {
			continue // a sweep's: set per trial
		}
		b, err := resolveOutput(ctx, src, sc, name, out.URI)
		if err != nil {
			return err
		}
		out.BlobPath = &b
		p.Outputs[name] = out
	}
	return nil
}

// resolveCode finds a code version's folder; nil for a code snapshot the
// Cumulus CLI uploaded (…/codes/NAME/versions/<sha256>, which names the
// snapshot itself).
func resolveCode(ctx context.Context, src Source, sc api.Scope, codeID string) (*api.BlobPath, error) {
	const target = "properties.codeId"
	name, version, ok := api.ParseCodeID(codeID)
	if !ok {
		return nil, invalid(target, "codeId %.200q is not a code version's id (…/codes/<name>/versions/<version>)", codeID)
	}
	c, err := src.CodeVersion(ctx, name, version)
	if errors.Is(err, store.ErrNotFound) {
		if isSHA256(version) {
			return nil, nil
		}
		return nil, invalid(target, "code %s version %s does not exist in workspace %s", name, version, sc.Workspace)
	}
	if err != nil {
		return nil, err
	}
	b, err := ResolvePath(ctx, src, sc, c.Properties.CodeURI, false)
	if err != nil {
		return nil, invalid(target, "code %s version %s: %s", name, version, err)
	}
	return &b, nil
}

func resolveInput(ctx context.Context, src Source, sc api.Scope, name string, in api.JobInput) (*api.BlobPath, error) {
	target := "properties.inputs." + name
	t := strings.ToLower(in.JobInputType)
	if t == "literal" || in.Mode == api.ModeDirect || strings.HasPrefix(in.URI, api.BlobURIScheme) {
		return nil, nil
	}
	file := t == api.DataURIFile
	if n, v, ok := api.ParseDataAssetRef(in.URI); ok {
		d, err := src.DataVersion(ctx, n, v)
		if errors.Is(err, store.ErrNotFound) {
			if v == api.LatestVersion {
				return nil, invalid(target, "input %s: data asset %s has no versions in workspace %s ('cumulus data list')", name, n, sc.Workspace)
			}
			return nil, invalid(target, "input %s: data asset %s version %s does not exist in workspace %s ('cumulus data list')", name, n, v, sc.Workspace)
		}
		if err != nil {
			return nil, err
		}
		if d.Properties.DataType != t {
			return nil, invalid(target, "input %s is %s but data asset %s:%s is %s", name, in.JobInputType, n, d.Name, d.Properties.DataType)
		}
		b, err := ResolvePath(ctx, src, sc, d.Properties.DataURI, file)
		if err != nil {
			return nil, invalid(target, "input %s: data asset %s:%s: %s", name, n, d.Name, err)
		}
		return &b, nil
	}
	if _, err := api.ParseDataURI(in.URI, src.Account()); err != nil {
		if strings.HasPrefix(strings.ToLower(in.URI), "azureml:") {
			return nil, invalid(target, "input %s: %s", name, err)
		}
		return nil, nil // another URL: the job's own to read
	}
	b, err := ResolvePath(ctx, src, sc, in.URI, file)
	if err != nil {
		return nil, invalid(target, "input %s: %s", name, err)
	}
	return &b, nil
}

func resolveOutput(ctx context.Context, src Source, sc api.Scope, name, uri string) (api.BlobPath, error) {
	target := "properties.outputs." + name
	loc, err := api.ParseDataURI(uri, src.Account())
	if err != nil {
		return api.BlobPath{}, invalid(target, "output %s: %s", name, err)
	}
	if s := loc.Scope; s != nil && !strings.EqualFold(s.Workspace, sc.Workspace) {
		return api.BlobPath{}, invalid(target, "output %s: %.200q names workspace %s; a job writes to its own workspace (%s)", name, uri, s.Workspace, sc.Workspace)
	}
	b := loc.BlobPath
	if b.Datastore == "" {
		return b, invalid(target, "output %s: %.200q is not a datastore path (azureml://datastores/<datastore>/paths/<path>)", name, uri)
	}
	if strings.Trim(b.Path, "/") == "" {
		return b, invalid(target, "output %s: %.200q names a whole datastore; an output is a folder in one (…/paths/<folder>/), which the job's files replace", name, uri)
	}
	d, err := src.Datastore(ctx, b.Datastore)
	if errors.Is(err, store.ErrNotFound) {
		return b, invalid(target, "output %s: datastore %s does not exist in workspace %s", name, b.Datastore, sc.Workspace)
	}
	if err != nil {
		return b, err
	}
	if d.Properties.ContainerName == api.ArtifactContainer {
		return b, invalid(target, "output %s: %s holds job artifacts, which Cumulus writes itself; write outputs to %s or a datastore you added", name, api.ArtifactDatastore, api.DefaultDatastore)
	}
	return b, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}
