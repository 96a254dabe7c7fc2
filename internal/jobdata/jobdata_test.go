package jobdata

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/store"
)

// fakeSource is a workspace with one data asset, one code version and
// the blobs listed.
type fakeSource struct {
	blobs map[string]bool // container/path
}

var _ Source = fakeSource{}

func (fakeSource) Account() string { return "cmlacct" }

func (fakeSource) Datastore(_ context.Context, name string) (api.Datastore, error) {
	for _, d := range api.BuiltinDatastores(api.Scope{Subscription: "s", ResourceGroup: "g", Workspace: "w"}, "uid") {
		if d.Name == name {
			return d, nil
		}
	}
	return api.Datastore{}, fmt.Errorf("datastore %s: %w", name, store.ErrNotFound)
}

func (fakeSource) DataVersion(_ context.Context, name, version string) (api.DataVersion, error) {
	if name == "numbers" && (version == "2" || version == api.LatestVersion) {
		return api.DataVersion{Name: "2", Properties: api.DataVersionProperties{DataType: "uri_folder", DataURI: "azureml://datastores/workspaceblobstore/paths/n/"}}, nil
	}
	return api.DataVersion{}, fmt.Errorf("data: %w", store.ErrNotFound)
}

func (fakeSource) CodeVersion(_ context.Context, name, version string) (api.CodeVersion, error) {
	if name == "c" && version == "1" {
		return api.CodeVersion{Properties: api.CodeVersionProperties{CodeURI: "https://cmlacct.blob.core.windows.net/upload-1/src"}}, nil
	}
	return api.CodeVersion{}, fmt.Errorf("code: %w", store.ErrNotFound)
}

func (f fakeSource) Exists(_ context.Context, container, path string, folder bool) (bool, error) {
	for k := range f.blobs {
		c, p, _ := strings.Cut(k, "/")
		if c == container && (p == path || folder && strings.HasPrefix(p, store.FolderPrefix(path))) {
			return true, nil
		}
	}
	return false, nil
}

func TestResolve(t *testing.T) {
	src := fakeSource{blobs: map[string]bool{"azureml-blobstore-uid/n/a.txt": true, "upload-1/src/main.py": true}}
	sc := api.Scope{Subscription: "s", ResourceGroup: "g", Workspace: "w"}
	p := api.JobProperties{CodeID: "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/codes/c/versions/1",
		Inputs: map[string]api.JobInput{
			"a":   {JobInputType: "uri_folder", URI: "azureml:numbers@latest"},
			"b":   {JobInputType: "uri_file", URI: "azureml://datastores/workspaceblobstore/paths/n/a.txt"},
			"lit": {JobInputType: "literal", Value: "3"},
			"web": {JobInputType: "uri_file", URI: "https://example.com/x.csv"},
			"dir": {JobInputType: "uri_folder", URI: "azureml://datastores/workspaceblobstore/paths/n/", Mode: api.ModeDirect},
		},
		Outputs: map[string]api.JobOutput{"out": {JobOutputType: "uri_folder"}, "mine": {JobOutputType: "uri_folder", URI: "azureml://datastores/workspaceblobstore/paths/results/"}},
	}
	if err := Resolve(context.Background(), src, sc, "j1", &p); err != nil {
		t.Fatal(err)
	}
	if b := p.CodeBlobPath; b == nil || b.Container != "upload-1" || b.Path != "src" {
		t.Errorf("code = %+v", b)
	}
	if b := p.Inputs["a"].BlobPath; b == nil || b.Datastore != "workspaceblobstore" || b.Path != "n/" || b.File {
		t.Errorf("a = %+v", b)
	}
	if b := p.Inputs["b"].BlobPath; b == nil || b.Path != "n/a.txt" || !b.File {
		t.Errorf("b = %+v", b)
	}
	for _, k := range []string{"lit", "web", "dir"} {
		if p.Inputs[k].BlobPath != nil {
			t.Errorf("%s resolved: %+v", k, p.Inputs[k].BlobPath)
		}
	}
	if o := p.Outputs["out"]; o.URI != "azureml://datastores/workspaceblobstore/paths/azureml/j1/out/" || o.BlobPath == nil || o.BlobPath.Path != "azureml/j1/out/" {
		t.Errorf("default output = %+v", o)
	}
	if o := p.Outputs["mine"]; o.BlobPath == nil || o.BlobPath.Path != "results/" {
		t.Errorf("named output = %+v", o)
	}

	// A sweep's outputs get their paths per trial.
	sw := api.JobProperties{Trial: &api.TrialComponent{Command: "x"}, Outputs: map[string]api.JobOutput{"out": {JobOutputType: "uri_folder"}}}
	if err := Resolve(context.Background(), src, sc, "s1", &sw); err != nil || sw.Outputs["out"].BlobPath != nil {
		t.Errorf("sweep output resolved: %+v, %v", sw.Outputs["out"], err)
	}
	j := api.Job{Name: "s1", Properties: sw}
	if tr := j.Trial("s1_0", nil); tr.Properties.Outputs["out"].URI != "azureml://datastores/workspaceblobstore/paths/azureml/s1_0/out/" {
		t.Errorf("trial output = %+v", tr.Properties.Outputs["out"])
	}

	for _, c := range []struct {
		in   api.JobInput
		want string
	}{
		{api.JobInput{JobInputType: "uri_folder", URI: "azureml:numbers:9"}, "version 9 does not exist"},
		{api.JobInput{JobInputType: "uri_file", URI: "azureml:numbers:2"}, "is uri_file but data asset numbers:2 is uri_folder"},
		{api.JobInput{JobInputType: "uri_folder", URI: "azureml://datastores/nope/paths/x/"}, "datastore nope does not exist"},
		{api.JobInput{JobInputType: "uri_folder", URI: "azureml://datastores/workspaceblobstore/paths/empty/"}, "no files under"},
		{api.JobInput{JobInputType: "uri_folder", URI: "azureml:what"}, "is not azureml://datastores"},
	} {
		q := api.JobProperties{Inputs: map[string]api.JobInput{"x": c.in}}
		err := Resolve(context.Background(), src, sc, "j", &q)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in.URI, err, c.want)
		}
	}
	q := api.JobProperties{Outputs: map[string]api.JobOutput{"o": {URI: "azureml://datastores/workspaceblobstore/paths/"}}}
	if err := Resolve(context.Background(), src, sc, "j", &q); err == nil || !strings.Contains(err.Error(), "whole datastore") {
		t.Errorf("an output over a whole datastore: %v", err)
	}
}
