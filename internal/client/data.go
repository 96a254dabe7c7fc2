package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// ListDatastores reads the workspace's datastores.
func (c *Client) ListDatastores(ctx context.Context) ([]api.Datastore, error) {
	return ListAll[api.Datastore](ctx, c, http.MethodGet, c.wsPath()+"/datastores")
}

// GetDatastore reads a datastore (never its secrets).
func (c *Client) GetDatastore(ctx context.Context, name string) (api.Datastore, error) {
	var out api.Datastore
	_, err := c.Do(ctx, http.MethodGet, c.wsPath()+"/datastores/"+url.PathEscape(name), nil, &out)
	return out, err
}

func (c *Client) dataPath(name string) string { return c.wsPath() + "/data/" + url.PathEscape(name) }

// PutDataVersion registers a data asset version.
func (c *Client) PutDataVersion(ctx context.Context, name, version string, d api.DataVersion) (api.DataVersion, error) {
	var out api.DataVersion
	_, err := c.Do(ctx, http.MethodPut, c.dataPath(name)+"/versions/"+url.PathEscape(version), d, &out)
	return out, err
}

// GetDataVersion reads a data asset version.
func (c *Client) GetDataVersion(ctx context.Context, name, version string) (api.DataVersion, error) {
	var out api.DataVersion
	_, err := c.Do(ctx, http.MethodGet, c.dataPath(name)+"/versions/"+url.PathEscape(version), nil, &out)
	return out, err
}

// ListDataVersions reads a data asset's versions, newest first.
func (c *Client) ListDataVersions(ctx context.Context, name string) ([]api.DataVersion, error) {
	return ListAll[api.DataVersion](ctx, c, http.MethodGet, c.dataPath(name)+"/versions?$orderBy="+url.QueryEscape("createdtime desc"))
}

// GetDataAsset reads a data asset: its latest and next version.
func (c *Client) GetDataAsset(ctx context.Context, name string) (api.AssetContainer, error) {
	var out api.AssetContainer
	_, err := c.Do(ctx, http.MethodGet, c.dataPath(name), nil, &out)
	return out, err
}

// ListDataAssets reads the workspace's data assets.
func (c *Client) ListDataAssets(ctx context.Context) ([]api.AssetContainer, error) {
	return ListAll[api.AssetContainer](ctx, c, http.MethodGet, c.wsPath()+"/data")
}

// UploadToDatastore copies a local file or folder into a datastore under
// LocalUpload/<content hash>/<base name> (as azure-ai-ml lays out local
// uploads), through the blob protocol with the datastore's SAS, and
// returns its azureml://datastores/<ds>/paths/<path> URI (a folder's with
// a trailing '/'). The same content lands at the same path.
func (c *Client) UploadToDatastore(ctx context.Context, datastore, local string) (string, error) {
	st, err := os.Stat(local)
	if err != nil {
		return "", err
	}
	type file struct{ rel, path string }
	var files []file
	if st.IsDir() {
		err = filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(local, p)
			files = append(files, file{filepath.ToSlash(rel), p})
			return err
		})
		if err != nil {
			return "", err
		}
		if len(files) == 0 {
			return "", fmt.Errorf("%s holds no files to upload", local)
		}
	} else {
		files = []file{{"", local}}
	}
	sort.Slice(files, func(i, k int) bool { return files[i].rel < files[k].rel })
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s\x00%x\n", f.rel, sum)
	}
	base := filepath.Base(filepath.Clean(local))
	prefix := "LocalUpload/" + hex.EncodeToString(h.Sum(nil))[:32] + "/" + base

	d, err := c.GetDatastore(ctx, datastore)
	if err != nil {
		return "", err
	}
	var secrets api.DatastoreSecrets
	if _, err := c.Do(ctx, http.MethodPost, c.wsPath()+"/datastores/"+url.PathEscape(datastore)+"/listSecrets", nil, &secrets); err != nil {
		return "", err
	}
	container := api.BlobPathPrefix + d.Properties.AccountName + "/" + d.Properties.ContainerName + "/"
	for _, f := range files {
		name := prefix
		if f.rel != "" {
			name += "/" + f.rel
		}
		if err := c.putBlobFile(ctx, container+escapePath(name)+"?"+secrets.SASToken, f.path); err != nil {
			return "", fmt.Errorf("upload %s: %w", f.path, err)
		}
	}
	if st.IsDir() {
		return api.DatastoreURI(datastore, prefix+"/"), nil
	}
	return api.DatastoreURI(datastore, prefix), nil
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// putBlobFile uploads a file with Put Blob.
func (c *Client) putBlobFile(ctx context.Context, path, file string) error {
	hdr := http.Header{"x-ms-blob-type": {"BlockBlob"}, "Content-Type": {"application/octet-stream"}}
	resp, err := c.send(ctx, http.MethodPut, path, hdr, func() io.Reader {
		f, err := os.Open(file)
		if err != nil {
			return errReader{err}
		}
		return f
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}
		if xml.Unmarshal(data, &e) == nil && e.Code != "" {
			msg, _, _ := strings.Cut(e.Message, "\n")
			return &api.Error{Status: resp.StatusCode, Code: e.Code, Message: msg}
		}
		return decodeError(resp.StatusCode, data)
	}
	return nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
