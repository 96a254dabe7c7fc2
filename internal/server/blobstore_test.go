package server_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
	"github.com/cumulus-ml/cumulus/internal/clock"
)

// blob calls the blob store (path-style URLs on the server). Every error
// answer is checked for Azure's storage shape: an XML <Error> whose code
// is also x-ms-error-code (HEAD answers carry the header only).
func (h *harness) blob(method, u string, body []byte, hdr ...string) *resp {
	h.t.Helper()
	if !strings.HasPrefix(u, "http") {
		u = h.url + u
	}
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("x-ms-version", "2021-08-06")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	r := &resp{Status: res.StatusCode, Header: res.Header, Body: data}
	if r.Status >= 500 {
		h.failed = append(h.failed, method+" "+u+": "+string(data))
	}
	if r.Status >= 400 && method != "HEAD" {
		var e struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}
		if err := xml.Unmarshal(data, &e); err != nil || e.Code == "" || e.Message == "" || e.Code != res.Header.Get("x-ms-error-code") {
			h.t.Errorf("%s %s: %d is not a storage error: %q (x-ms-error-code %q)", method, u, r.Status, data, res.Header.Get("x-ms-error-code"))
		}
	}
	return r
}

// wantBlob asserts a status and, for errors, the storage error code.
func (r *resp) wantBlob(t *testing.T, status int, code ...string) *resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if len(code) > 0 && r.Header.Get("x-ms-error-code") != code[0] {
		t.Fatalf("x-ms-error-code %q, want %q; body %s", r.Header.Get("x-ms-error-code"), code[0], r.Body)
	}
	return r
}

// sasFor is a datastore's SAS as token's holder gets it from listSecrets,
// with the path-style URL of the datastore's container.
func (h *harness) sasFor(token, wsPath, datastore string) (containerURL, sas string) {
	h.t.Helper()
	var d api.Datastore
	h.as(token, "GET", wsPath+"/datastores/"+datastore, nil).want(h.t, 200).json(h.t, &d)
	var s api.DatastoreSecrets
	h.as(token, "POST", wsPath+"/datastores/"+datastore+"/listSecrets", nil).want(h.t, 200).json(h.t, &s)
	if s.SecretsType != "Sas" || s.SASToken == "" {
		h.t.Fatalf("listSecrets = %+v", s)
	}
	return "/cumulus/blob/" + d.Properties.AccountName + "/" + d.Properties.ContainerName, s.SASToken
}

func putBlock(h *harness, u string, data []byte, hdr ...string) *resp {
	return h.blob("PUT", u, data, append([]string{"x-ms-blob-type", "BlockBlob"}, hdr...)...)
}

// A datastore's SAS opens its container for what the holder's role
// allows, and nothing else: not without it, not another workspace's
// container, not once tampered with, not for writing when the holder
// only reads, not after the holder's role is gone.
func TestBlobStoreSASIsScoped(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ws2 := wsPath(hRG, "ws2")
	h.do("PUT", ws2, map[string]any{"location": hLoc}).want(t, 201)
	writer := h.user("wes", "Contributor", hWSPath)
	reader := h.user("rita", "Reader", hWSPath)
	nobody := h.user("nora", "", "")

	c1, sas1 := h.sasFor(writer, hWSPath, "workspaceblobstore")
	c2, sas2 := h.sasFor(h.token, ws2, "workspaceblobstore")
	putBlock(h, c1+"/a/b.txt?"+sas1, []byte("hello")).wantBlob(t, 201)
	putBlock(h, c1+"/a/b.txt", []byte("hello")).wantBlob(t, 401, "NoAuthenticationInformation")
	h.blob("GET", c1+"/a/b.txt?"+sas2, nil).wantBlob(t, 403, "AuthenticationFailed")
	h.blob("GET", c2+"/a/b.txt?"+sas1, nil).wantBlob(t, 403, "AuthenticationFailed")
	tampered := strings.Replace(sas1, "sp=racwdl", "sp=racwdlx", 1)
	h.blob("GET", c1+"/a/b.txt?"+tampered, nil).wantBlob(t, 403, "AuthenticationFailed")
	if got := h.blob("GET", c1+"/a/b.txt?"+sas1, nil).wantBlob(t, 200); string(got.Body) != "hello" {
		t.Errorf("GET = %q", got.Body)
	}

	// A reader's SAS reads and lists, and writes nothing.
	_, rsas := h.sasFor(reader, hWSPath, "workspaceblobstore")
	if !strings.Contains(rsas, "sp=rl") {
		t.Errorf("a reader's SAS %q gives more than read and list", rsas)
	}
	h.blob("GET", c1+"/a/b.txt?"+rsas, nil).wantBlob(t, 200)
	putBlock(h, c1+"/a/c.txt?"+rsas, []byte("x")).wantBlob(t, 403, "AuthorizationPermissionMismatch")
	// The artifact store is Cumulus's to write: even a writer's SAS for it reads only.
	ca, asas := h.sasFor(writer, hWSPath, "workspaceartifactstore")
	putBlock(h, ca+"/x.txt?"+asas, []byte("x")).wantBlob(t, 403, "AuthorizationPermissionMismatch")

	// No role, no SAS and no upload container.
	h.as(nobody, "POST", hWSPath+"/datastores/workspaceblobstore/listSecrets", nil).want(t, 403, api.CodeForbidden)
	h.as(nobody, "POST", hWSPath+"/codes/c/versions/1/startPendingUpload", map[string]any{"pendingUploadType": "TemporaryBlobReference"}).want(t, 403, api.CodeForbidden)
	h.as(reader, "POST", hWSPath+"/codes/c/versions/1/startPendingUpload", map[string]any{"pendingUploadType": "TemporaryBlobReference"}).want(t, 403, api.CodeForbidden)

	// The role taken away, the SAS issued with it stops working.
	var as struct {
		Value []struct{ ID, Principal string } `json:"value"`
	}
	h.do("GET", "/cumulus/v1/auth/roleAssignments", nil).want(t, 200).json(t, &as)
	for _, a := range as.Value {
		if a.Principal == "wes" {
			h.do("DELETE", "/cumulus/v1/auth/roleAssignments/"+a.ID, nil).want(t, 200)
		}
	}
	h.blob("GET", c1+"/a/b.txt?"+sas1, nil).wantBlob(t, 403, "AuthorizationPermissionMismatch")

	// A datastore GET never answers a secret.
	r := h.do("GET", hWSPath+"/datastores", nil).want(t, 200)
	if strings.Contains(string(r.Body), "sig=") || strings.Contains(string(r.Body), "sasToken") {
		t.Errorf("datastore list carries a secret: %s", r.Body)
	}
}

// A SAS expires after its lifetime (the server's clock decides).
func TestBlobStoreSASExpires(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHarness(t, harnessOpts{clock: clk})
	c, sas := h.sasFor(h.token, hWSPath, "workspaceblobstore")
	putBlock(h, c+"/f?"+sas, []byte("1")).wantBlob(t, 201)
	clk.Step(59 * time.Minute)
	h.blob("HEAD", c+"/f?"+sas, nil).wantBlob(t, 200)
	clk.Step(time.Minute)
	r := h.blob("GET", c+"/f?"+sas, nil).wantBlob(t, 403, "AuthenticationFailed")
	if !strings.Contains(string(r.Body), "expiry") {
		t.Errorf("expired SAS refused for another reason: %s", r.Body)
	}
}

// Put Blob, Put Block and Put Block List, Set Blob Metadata, Get Blob
// with ranges, the conditions and checks azure-storage-blob relies on.
func TestBlobStoreOperations(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c, sas := h.sasFor(h.token, hWSPath, "workspaceblobstore")
	u := func(name string, q ...string) string {
		s := c + "/" + name + "?" + sas
		for _, x := range q {
			s += "&" + x
		}
		return s
	}
	sum := md5.Sum([]byte("hello"))
	putBlock(h, u("m.txt"), []byte("hello"), "Content-MD5", base64.StdEncoding.EncodeToString(sum[:])).wantBlob(t, 201)
	putBlock(h, u("m.txt"), []byte("hellO"), "Content-MD5", base64.StdEncoding.EncodeToString(sum[:])).wantBlob(t, 400, "Md5Mismatch")
	putBlock(h, u("m.txt"), []byte("again"), "If-None-Match", "*").wantBlob(t, 409, "BlobAlreadyExists")
	h.blob("PUT", u("m.txt"), []byte("x"), "x-ms-blob-type", "PageBlob").wantBlob(t, 400, "InvalidHeaderValue")

	// Blocks, committed in the order the list gives.
	id := func(s string) string { return url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(s))) }
	h.blob("PUT", u("big.bin", "comp=block", "blockid="+id("b1")), []byte("world")).wantBlob(t, 201)
	h.blob("PUT", u("big.bin", "comp=block", "blockid="+id("b0")), []byte("hello ")).wantBlob(t, 201)
	h.blob("HEAD", u("big.bin"), nil).wantBlob(t, 404, "BlobNotFound")
	list := `<?xml version="1.0" encoding="utf-8"?><BlockList><Latest>` + base64.StdEncoding.EncodeToString([]byte("b0")) +
		`</Latest><Latest>` + base64.StdEncoding.EncodeToString([]byte("b1")) + `</Latest></BlockList>`
	bad := strings.Replace(list, base64.StdEncoding.EncodeToString([]byte("b1")), base64.StdEncoding.EncodeToString([]byte("nope")), 1)
	h.blob("PUT", u("big.bin", "comp=blocklist"), []byte(bad)).wantBlob(t, 400, "InvalidBlockList")
	h.blob("PUT", u("big.bin", "comp=blocklist"), []byte(list), "x-ms-meta-kind", "weights").wantBlob(t, 201)
	if r := h.blob("GET", u("big.bin"), nil).wantBlob(t, 200); string(r.Body) != "hello world" || r.Header.Get("x-ms-meta-kind") != "weights" {
		t.Errorf("committed blob %q, metadata %q", r.Body, r.Header.Get("x-ms-meta-kind"))
	}
	r := h.blob("GET", u("big.bin"), nil, "x-ms-range", "bytes=6-10").wantBlob(t, 206)
	if string(r.Body) != "world" || r.Header.Get("Content-Range") != "bytes 6-10/11" {
		t.Errorf("range: %q %q", r.Body, r.Header.Get("Content-Range"))
	}
	h.blob("GET", u("big.bin"), nil, "x-ms-range", "bytes=11-20").wantBlob(t, 416, "InvalidRange")

	// Metadata as the SDKs mark an upload complete (written back lower
	// case, as azure-storage-blob reads it: the sdk test sees that).
	h.blob("PUT", u("m.txt", "comp=metadata"), nil, "x-ms-meta-upload_status", "completed", "x-ms-meta-name", "src").wantBlob(t, 200)
	r = h.blob("HEAD", u("m.txt"), nil).wantBlob(t, 200)
	if r.Header.Get("x-ms-meta-upload_status") != "completed" || r.Header.Get("Content-Length") != "5" {
		t.Errorf("properties: %v", r.Header)
	}
	h.blob("PUT", u("gone.txt", "comp=metadata"), nil, "x-ms-meta-a", "b").wantBlob(t, 404, "BlobNotFound")
	h.blob("DELETE", u("m.txt"), nil).wantBlob(t, 202)
	h.blob("GET", u("m.txt"), nil).wantBlob(t, 404, "BlobNotFound")
	h.blob("GET", u("../x"), nil).wantBlob(t, 400, "InvalidResourceName")
}

// List Blobs pages with a marker and folds names into prefixes with a
// delimiter.
func TestBlobStoreList(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c, sas := h.sasFor(h.token, hWSPath, "workspaceblobstore")
	for _, n := range []string{"d/1", "d/2", "d/e/3", "d/e/4", "d/f/5", "z"} {
		putBlock(h, c+"/"+n+"?"+sas, []byte(n)).wantBlob(t, 201)
	}
	type page struct {
		Blobs struct {
			Blob []struct {
				Name     string            `xml:"Name"`
				Metadata map[string]string `xml:"-"`
			} `xml:"Blob"`
			Prefix []struct {
				Name string `xml:"Name"`
			} `xml:"BlobPrefix"`
		} `xml:"Blobs"`
		NextMarker string `xml:"NextMarker"`
	}
	list := func(q string) ([]string, string) {
		t.Helper()
		r := h.blob("GET", c+"?restype=container&comp=list&"+q+"&"+sas, nil).wantBlob(t, 200)
		var p page
		if err := xml.Unmarshal(r.Body, &p); err != nil {
			t.Fatalf("%s: %v", r.Body, err)
		}
		var names []string
		for _, b := range p.Blobs.Blob {
			names = append(names, b.Name)
		}
		for _, b := range p.Blobs.Prefix {
			names = append(names, b.Name+"…")
		}
		return names, p.NextMarker
	}
	var all []string
	marker := ""
	for {
		names, next := list("prefix=d/&maxresults=2&marker=" + url.QueryEscape(marker))
		all = append(all, names...)
		if next == "" {
			break
		}
		marker = next
	}
	if strings.Join(all, ",") != "d/1,d/2,d/e/3,d/e/4,d/f/5" {
		t.Errorf("paged listing = %v", all)
	}
	if names, _ := list("prefix=d/&delimiter=/"); strings.Join(names, ",") != "d/1,d/2,d/e/…,d/f/…" {
		t.Errorf("delimited listing = %v", names)
	}
	if names, next := list("prefix=d/&delimiter=/&maxresults=3"); strings.Join(names, ",") != "d/1,d/2,d/e/…" || next != "d/e/" {
		t.Errorf("delimited page = %v next %q", names, next)
	} else if names, _ := list("prefix=d/&delimiter=/&marker=d/e/"); strings.Join(names, ",") != "d/f/…" {
		t.Errorf("after d/e/: %v", names)
	}
}
