package api

import (
	"strings"
	"testing"
)

func TestParseDataURI(t *testing.T) {
	const acct = "cml0123456789abcdef01234"
	for _, c := range []struct {
		uri  string
		want BlobPath
		ws   string
		err  string
	}{
		{uri: "azureml://datastores/workspaceblobstore/paths/LocalUpload/abc/data/", want: BlobPath{Datastore: "workspaceblobstore", Path: "LocalUpload/abc/data/"}},
		{uri: "azureml://subscriptions/s/resourcegroups/g/workspaces/w/datastores/mine/paths/x/y.csv", want: BlobPath{Datastore: "mine", Path: "x/y.csv"}, ws: "w"},
		{uri: "https://" + acct + ".blob.core.windows.net/azureml-blobstore-1/LocalUpload/a%20b/src", want: BlobPath{Container: "azureml-blobstore-1", Path: "LocalUpload/a b/src"}},
		{uri: "https://localhost:8443/cumulus/blob/" + acct + "/upload-abc/src", want: BlobPath{Container: "upload-abc", Path: "src"}},
		{uri: "https://other.blob.core.windows.net/c1/x", err: "not in this workspace's blob store"},
		{uri: "azureml://datastores/ws/paths/a/../b", err: "'..'"},
		{uri: "azureml://datastores/ws/x", err: "is not azureml://datastores"},
		{uri: "s3://bucket/x", err: "is not azureml://datastores"},
		{uri: "https://" + acct + ".blob.core.windows.net/Bad_Container/x", err: "container name"},
	} {
		loc, err := ParseDataURI(c.uri, acct)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.uri, err, c.err)
			}
			continue
		}
		if err != nil || loc.BlobPath != c.want || (c.ws != "" && (loc.Scope == nil || loc.Scope.Workspace != c.ws)) {
			t.Errorf("%s = %+v %+v, %v", c.uri, loc.BlobPath, loc.Scope, err)
		}
	}
}

func TestParseDataAssetRef(t *testing.T) {
	for _, c := range []struct{ ref, name, version string }{
		{"azureml:numbers:3", "numbers", "3"},
		{"azureml:numbers@latest", "numbers", LatestVersion},
		{"/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/data/numbers/versions/2", "numbers", "2"},
		{"azureml:/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/data/azureml:numbers/versions/1", "numbers", "1"},
	} {
		if n, v, ok := ParseDataAssetRef(c.ref); !ok || n != c.name || v != c.version {
			t.Errorf("%s = %q %q %v", c.ref, n, v, ok)
		}
	}
	for _, ref := range []string{"azureml://datastores/x/paths/y", "numbers:3", "https://x/y", "azureml:a:b:c"} {
		if _, _, ok := ParseDataAssetRef(ref); ok {
			t.Errorf("%s read as a data asset", ref)
		}
	}
}

func TestStorageNames(t *testing.T) {
	a := StorageAccountName("3f2504e0-4f89-11d3-9a0c-0305e82c3301")
	if len(a) != 24 || strings.Trim(a, "abcdefghijklmnopqrstuvwxyz0123456789") != "" || a == StorageAccountName("other") {
		t.Errorf("account name %q", a)
	}
	if c := DefaultContainer("3F2504E0-4f89-11d3-9a0c-0305e82c3301"); c != "azureml-blobstore-3f2504e0-4f89-11d3-9a0c-0305e82c3301" {
		t.Errorf("default container %q", c)
	}
	if c := DefaultContainer("/subscriptions/s/resourceGroups/g"); CheckContainerName(c) != nil {
		t.Errorf("default container of an old workspace %q is not a container name", c)
	}
	if CanonicalMode("ro_mount") != ModeReadOnlyMount || CanonicalMode("Upload") != ModeUpload || CanonicalMode("rw_mount") != ModeReadWriteMount || CanonicalMode("x") != "" {
		t.Error("CanonicalMode")
	}
	if NextVersion([]string{"1", "7", "beta"}) != "8" || NextVersion(nil) != "1" {
		t.Error("NextVersion")
	}
}
