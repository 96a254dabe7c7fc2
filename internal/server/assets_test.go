package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// Every workspace has workspaceblobstore (the default) and
// workspaceartifactstore; a user adds datastores on the workspace's own
// blob store, with no secret, and cannot replace the built-in ones.
func TestDatastores(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var page api.Page[api.Datastore]
	h.do("GET", hWSPath+"/datastores", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 2 || page.Value[0].Name != "workspaceartifactstore" || page.Value[1].Name != "workspaceblobstore" || !page.Value[1].Properties.IsDefault {
		t.Fatalf("datastores = %+v", page.Value)
	}
	account := page.Value[1].Properties.AccountName
	h.do("GET", hWSPath+"/datastores?isDefault=true", nil).want(t, 200).json(t, &page)
	if len(page.Value) != 1 || page.Value[0].Name != "workspaceblobstore" || page.Value[0].Properties.Credentials.CredentialsType != "Sas" {
		t.Fatalf("default = %+v", page.Value)
	}

	body := func(props map[string]any) map[string]any { return map[string]any{"properties": props} }
	h.do("PUT", hWSPath+"/datastores/mine", body(map[string]any{"datastoreType": "AzureBlob", "containerName": "mydata"})).want(t, 201)
	var d api.Datastore
	h.do("GET", hWSPath+"/datastores/mine", nil).want(t, 200).json(t, &d)
	if d.Properties.AccountName != account || d.Properties.ContainerName != "mydata" || d.Properties.IsDefault {
		t.Errorf("added datastore = %+v", d.Properties)
	}
	h.do("PUT", hWSPath+"/datastores/far", body(map[string]any{"datastoreType": "AzureBlob", "accountName": "someoneelse", "containerName": "c1"})).want(t, 400, api.CodeValidationError)
	h.do("PUT", hWSPath+"/datastores/keyed", body(map[string]any{"datastoreType": "AzureBlob", "containerName": "c1",
		"credentials": map[string]any{"credentialsType": "AccountKey", "secrets": map[string]any{"secretsType": "AccountKey", "key": "abc"}}})).want(t, 400, api.CodeValidationError)
	h.do("PUT", hWSPath+"/datastores/files", body(map[string]any{"datastoreType": "AzureFile", "containerName": "c1"})).want(t, 400, api.CodeValidationError)
	h.do("PUT", hWSPath+"/datastores/workspaceblobstore", body(map[string]any{"datastoreType": "AzureBlob", "containerName": "c1"})).want(t, 400, api.CodeInvalidName)
	h.do("DELETE", hWSPath+"/datastores/workspaceblobstore", nil).want(t, 400)
	h.do("GET", hWSPath+"/datastores/keyed", nil).want(t, 404)

	// Its SAS opens its own container.
	c, sas := h.sasFor(h.token, hWSPath, "mine")
	if !strings.HasSuffix(c, "/mydata") {
		t.Errorf("container URL %s", c)
	}
	putBlock(h, c+"/x?"+sas, []byte("1")).wantBlob(t, 201)
	h.do("DELETE", hWSPath+"/datastores/mine", nil).want(t, 200)
	h.do("GET", hWSPath+"/datastores/mine", nil).want(t, 404)

	// The workspace answers where the SDKs find the other services and
	// its storage account.
	var ws api.Workspace
	h.do("GET", hWSPath, nil).want(t, 200).json(t, &ws)
	if ws.Properties.DiscoveryURL != h.url+"/cumulus/discovery" || !strings.HasSuffix(ws.Properties.StorageAccount, "/storageAccounts/"+account) {
		t.Errorf("workspace: discoveryUrl %q, storageAccount %q", ws.Properties.DiscoveryURL, ws.Properties.StorageAccount)
	}
	res, err := http.Get(ws.Properties.DiscoveryURL)
	if err != nil {
		t.Fatal(err)
	}
	var disc map[string]string
	json.NewDecoder(res.Body).Decode(&disc)
	res.Body.Close()
	if disc["api"] != h.url || disc["history"] != h.url {
		t.Errorf("discovery = %v", disc)
	}
}

// upload puts files into the default datastore under prefix.
func (h *harness) upload(prefix string, files map[string]string) {
	h.t.Helper()
	c, sas := h.sasFor(h.token, hWSPath, "workspaceblobstore")
	for name, content := range files {
		putBlock(h, c+"/"+prefix+name+"?"+sas, []byte(content)).wantBlob(h.t, 201)
	}
}

// Data and code asset versions name paths of the blob store that hold
// something; a version's path cannot change; @latest is the newest.
func TestDataAndCodeAssets(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	data := func(uri, typ string) map[string]any {
		return map[string]any{"properties": map[string]any{"dataType": typ, "dataUri": uri, "description": "numbers"}}
	}
	dsURI := "azureml://datastores/workspaceblobstore/paths/LocalUpload/abc/numbers/"
	h.do("PUT", hWSPath+"/data/numbers/versions/1", data(dsURI, "uri_folder")).want(t, 400, api.CodeValidationError)
	h.upload("LocalUpload/abc/numbers/", map[string]string{"a.txt": "1", "b.txt": "2"})
	h.do("PUT", hWSPath+"/data/numbers/versions/1", data(dsURI, "uri_folder")).want(t, 201)
	h.do("PUT", hWSPath+"/data/numbers/versions/1", data(dsURI, "uri_folder")).want(t, 200)
	h.do("PUT", hWSPath+"/data/numbers/versions/1", data("azureml://datastores/workspaceblobstore/paths/LocalUpload/abc/", "uri_folder")).want(t, 409)
	h.do("PUT", hWSPath+"/data/numbers/versions/2", data(dsURI+"a.txt", "uri_file")).want(t, 201)
	h.do("PUT", hWSPath+"/data/numbers/versions/3", data(dsURI, "mltable")).want(t, 400, api.CodeValidationError)
	h.do("PUT", hWSPath+"/data/numbers/versions/3", data("https://elsewhere.blob.core.windows.net/c/x", "uri_file")).want(t, 400, api.CodeValidationError)
	h.do("PUT", hWSPath+"/data/numbers/versions/3", data("azureml://datastores/nosuch/paths/x", "uri_file")).want(t, 400, api.CodeValidationError)

	var c api.AssetContainer
	h.do("GET", hWSPath+"/data/numbers", nil).want(t, 200).json(t, &c)
	if c.Properties.LatestVersion != "2" || c.Properties.NextVersion != "3" || c.Properties.Versions != 2 {
		t.Errorf("container = %+v", c.Properties)
	}
	var vs api.Page[api.DataVersion]
	h.do("GET", hWSPath+"/data/numbers/versions?$orderBy=createdtime%20desc&$top=1", nil).want(t, 200).json(t, &vs)
	if len(vs.Value) != 1 || vs.Value[0].Name != "2" {
		t.Errorf("newest = %+v", vs.Value)
	}
	// azure-ai-ml 1.4.0 asks for the versions of "azureml:NAME".
	h.do("GET", hWSPath+"/data/azureml:numbers/versions?$orderBy=createdtime%20desc&$top=1", nil).want(t, 200).json(t, &vs)
	if len(vs.Value) != 1 || vs.Value[0].Name != "2" {
		t.Errorf("newest by azureml:NAME = %+v", vs.Value)
	}
	h.do("GET", hWSPath+"/data/nothing", nil).want(t, 404)

	// Code versions, found again by the hash of their content.
	h.upload("LocalUpload/def/src/", map[string]string{"train.py": "print(1)"})
	code := map[string]any{"properties": map[string]any{"codeUri": "azureml://datastores/workspaceblobstore/paths/LocalUpload/def/src",
		"properties": map[string]string{"hash_sha256": "h1", "hash_version": "202208"}}}
	h.do("PUT", hWSPath+"/codes/c1/versions/1", code).want(t, 201)
	var cv api.Page[api.CodeVersion]
	h.do("GET", hWSPath+"/codes/c1/versions?hash=h1&hashVersion=202208", nil).want(t, 200).json(t, &cv)
	if len(cv.Value) != 1 {
		t.Errorf("by hash = %+v", cv.Value)
	}
	h.do("GET", hWSPath+"/codes/c1/versions?hash=h2&hashVersion=202208", nil).want(t, 200).json(t, &cv)
	if len(cv.Value) != 0 {
		t.Errorf("by another hash = %+v", cv.Value)
	}
}

// The pending upload hands out a container of its own, writable by SAS,
// that a code version then names.
func TestPendingUpload(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var p api.PendingUploadResponse
	h.do("POST", hWSPath+"/codes/c1/versions/1/startPendingUpload", map[string]any{"pendingUploadType": "TemporaryBlobReference"}).want(t, 200).json(t, &p)
	ref := p.BlobReferenceForConsumption
	if !strings.HasPrefix(ref.BlobURI, h.url+"/cumulus/blob/") || !strings.HasPrefix(ref.Credential.SASURI, ref.BlobURI+"?") || ref.Credential.CredentialType != "SAS" {
		t.Fatalf("pending upload = %+v", ref)
	}
	sas := strings.TrimPrefix(ref.Credential.SASURI, ref.BlobURI+"?")
	putBlock(h, ref.BlobURI+"/src/main.py?"+sas, []byte("print(2)")).wantBlob(t, 201)
	h.do("PUT", hWSPath+"/codes/c1/versions/1", map[string]any{"properties": map[string]any{"codeUri": ref.BlobURI + "/src"}}).want(t, 201)
	h.do("PUT", hWSPath+"/codes/c1/versions/2", map[string]any{"properties": map[string]any{"codeUri": ref.BlobURI + "/nothing"}}).want(t, 400)
	// Its SAS opens that container only.
	var other api.PendingUploadResponse
	h.do("POST", hWSPath+"/codes/c1/versions/2/startPendingUpload", map[string]any{}).want(t, 200).json(t, &other)
	h.blob("GET", other.BlobReferenceForConsumption.BlobURI+"/src/main.py?"+sas, nil).wantBlob(t, 403, "AuthenticationFailed")
}

// A job's inputs, outputs and code are resolved at submission to places
// in the blob store, or refused saying what is missing.
func TestJobDataResolution(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.create("cpu", computeBody())
	h.upload("LocalUpload/abc/numbers/", map[string]string{"a.txt": "1"})
	h.upload("LocalUpload/def/src/", map[string]string{"train.py": "print(1)"})
	h.do("PUT", hWSPath+"/data/numbers/versions/1", map[string]any{"properties": map[string]any{"dataType": "uri_folder",
		"dataUri": "azureml://datastores/workspaceblobstore/paths/LocalUpload/abc/numbers/"}}).want(t, 201)
	h.do("PUT", hWSPath+"/codes/c1/versions/1", map[string]any{"properties": map[string]any{"codeUri": "azureml://datastores/workspaceblobstore/paths/LocalUpload/def/src"}}).want(t, 201)
	job := func(inputs map[string]any, outputs map[string]any, code string) map[string]any {
		p := map[string]any{"jobType": "Command", "command": "true", "computeId": computePath("cpu"), "inputs": inputs, "outputs": outputs}
		if code != "" {
			p["codeId"] = code
		}
		return map[string]any{"properties": p}
	}
	in := func(uri string, more ...string) map[string]any {
		m := map[string]any{"jobInputType": "uri_folder", "uri": uri}
		if len(more) > 0 {
			m["mode"] = more[0]
		}
		return m
	}
	var j api.Job
	h.do("PUT", hWSPath+"/jobs/j1", job(map[string]any{
		"byVersion": in("azureml:numbers:1"),
		"byLatest":  in("azureml:numbers@latest", "ro_mount"),
		"byPath":    in("azureml://datastores/workspaceblobstore/paths/LocalUpload/abc/numbers/", "download"),
		"byID":      in(hWSPath + "/data/numbers/versions/1"),
		"elsewhere": in("https://example.com/data.csv"),
	}, map[string]any{"out": map[string]any{"jobOutputType": "uri_folder"}}, hWSPath+"/codes/c1/versions/1")).want(t, 201).json(t, &j)
	for _, k := range []string{"byVersion", "byLatest", "byPath", "byID"} {
		b := j.Properties.Inputs[k].BlobPath
		if b == nil || b.Datastore != "workspaceblobstore" || b.Path != "LocalUpload/abc/numbers/" {
			t.Errorf("input %s resolved to %+v", k, b)
		}
	}
	if j.Properties.Inputs["byLatest"].Mode != api.ModeReadOnlyMount {
		t.Errorf("mode ro_mount read as %q", j.Properties.Inputs["byLatest"].Mode)
	}
	if j.Properties.Inputs["elsewhere"].BlobPath != nil {
		t.Errorf("a URL outside the blob store was resolved: %+v", j.Properties.Inputs["elsewhere"])
	}
	if o := j.Properties.Outputs["out"]; o.URI != "azureml://datastores/workspaceblobstore/paths/azureml/j1/out/" || o.BlobPath == nil {
		t.Errorf("default output = %+v", o)
	}
	if b := j.Properties.CodeBlobPath; b == nil || b.Path != "LocalUpload/def/src" {
		t.Errorf("code = %+v", b)
	}

	refused := func(name string, body map[string]any, target, words string) {
		t.Helper()
		r := h.do("PUT", hWSPath+"/jobs/"+name, body).want(t, 400)
		if !strings.Contains(string(r.Body), target) || !strings.Contains(string(r.Body), words) {
			t.Errorf("%s refused with %s", name, r.Body)
		}
	}
	refused("r1", job(map[string]any{"x": in("azureml:numbers:9")}, nil, ""), "properties.inputs.x", "version 9 does not exist")
	refused("r2", job(map[string]any{"x": in("azureml:nothing@latest")}, nil, ""), "properties.inputs.x", "has no versions")
	refused("r3", job(map[string]any{"x": in("azureml://datastores/workspaceblobstore/paths/nowhere/")}, nil, ""), "properties.inputs.x", "upload the data first")
	refused("r4", job(map[string]any{"x": in("azureml://subscriptions/" + hSub + "/resourcegroups/" + hRG + "/workspaces/ws2/datastores/workspaceblobstore/paths/LocalUpload/abc/numbers/")}, nil, ""), "properties.inputs.x", "names workspace ws2")
	refused("r5", job(map[string]any{"x": in("azureml:numbers:1", "rw_mount")}, nil, ""), "properties.inputs.x.mode", "rw_mount is not supported")
	refused("r6", job(nil, map[string]any{"o": map[string]any{"jobOutputType": "uri_folder", "uri": "azureml://datastores/workspaceartifactstore/paths/x/"}}, ""), "properties.outputs.o", "job artifacts")
	refused("r7", job(nil, nil, hWSPath+"/codes/c1/versions/7"), "properties.codeId", "does not exist")
	refused("r8", job(map[string]any{"x": map[string]any{"jobInputType": "uri_file", "uri": "azureml:numbers:1"}}, nil, ""), "properties.inputs.x", "is uri_folder")
}
