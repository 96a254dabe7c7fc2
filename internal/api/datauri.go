package api

import (
	"fmt"
	"net/url"
	"strings"
)

// BlobPath is a place in a workspace's blob store: a path in a datastore
// or, for what was uploaded to a container of its own (a pending upload),
// in a container. Path has no leading '/'; "" is the whole container. A
// job records where each input, output and its code are as a BlobPath
// (read-only, set at submission).
type BlobPath struct {
	Datastore string `json:"datastore,omitempty"`
	Container string `json:"container,omitempty"`
	Path      string `json:"path"`
	// File: the path names one blob (uri_file), not a folder.
	File bool `json:"file,omitempty"`
}

// URI is the azureml:// form of a datastore path ("" for a container's).
func (b BlobPath) URI() string {
	if b.Datastore == "" {
		return ""
	}
	return DatastoreURI(b.Datastore, b.Path)
}

// DatastoreURI is azureml://datastores/<ds>/paths/<path>.
func DatastoreURI(datastore, path string) string {
	return "azureml://datastores/" + datastore + "/paths/" + path
}

// BlobPathPrefix begins the path-style URLs of the blob store on the
// server's own address: <base>/cumulus/blob/<account>/<container>/<blob>.
const BlobPathPrefix = "/cumulus/blob/"

// DataLocation is what a data or code URI names.
type DataLocation struct {
	BlobPath
	// Scope is the workspace the long azureml://subscriptions/… form
	// names (nil for the other forms, which name the caller's).
	Scope *Scope
}

// ParseDataURI reads a URI that names a place in a workspace's blob
// store, whose account is account:
//
//	azureml://datastores/<ds>/paths/<path>
//	azureml://subscriptions/<s>/resourcegroups/<g>/workspaces/<w>/datastores/<ds>/paths/<path>
//	https://<account>.blob.core.windows.net/<container>/<path>
//	https://<server><BlobPathPrefix><account>/<container>/<path>
func ParseDataURI(uri, account string) (DataLocation, error) {
	if rest, ok := cutPrefixFold(uri, "azureml://"); ok {
		return parseAzureMLURI(uri, rest)
	}
	if !strings.HasPrefix(strings.ToLower(uri), "https://") && !strings.HasPrefix(strings.ToLower(uri), "http://") {
		return DataLocation{}, fmt.Errorf("%.200q is not azureml://datastores/<datastore>/paths/<path> nor a blob URL of this workspace", uri)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return DataLocation{}, fmt.Errorf("%.200q is not a URL: %w", uri, err)
	}
	acct, p := "", strings.TrimPrefix(u.EscapedPath(), "/")
	if rest, ok := strings.CutPrefix(u.EscapedPath(), BlobPathPrefix); ok {
		acct, p, _ = strings.Cut(rest, "/")
	} else if a, suffix, ok := strings.Cut(u.Hostname(), ".blob."); ok && suffix != "" {
		acct = a
	}
	if acct == "" || (account != "" && !strings.EqualFold(acct, account)) {
		return DataLocation{}, fmt.Errorf("%.200q is not in this workspace's blob store (account %s); Cumulus reads data only from its own datastores", uri, account)
	}
	container, blob, _ := strings.Cut(p, "/")
	if err := CheckContainerName(container); err != nil {
		return DataLocation{}, fmt.Errorf("%.200q: %w", uri, err)
	}
	blob, err = url.PathUnescape(blob)
	if err != nil {
		return DataLocation{}, fmt.Errorf("%.200q: %w", uri, err)
	}
	if err := checkBlobName(blob); err != nil {
		return DataLocation{}, fmt.Errorf("%.200q: %w", uri, err)
	}
	return DataLocation{BlobPath: BlobPath{Container: container, Path: blob}}, nil
}

func parseAzureMLURI(uri, rest string) (DataLocation, error) {
	bad := fmt.Errorf("%.200q is not azureml://datastores/<datastore>/paths/<path> (or its long form azureml://subscriptions/<s>/resourcegroups/<g>/workspaces/<w>/datastores/<datastore>/paths/<path>)", uri)
	segs := strings.SplitN(rest, "/", 11)
	var loc DataLocation
	if len(segs) >= 6 && strings.EqualFold(segs[0], "subscriptions") && strings.EqualFold(segs[2], "resourcegroups") && strings.EqualFold(segs[4], "workspaces") {
		loc.Scope = &Scope{Subscription: segs[1], ResourceGroup: segs[3], Workspace: segs[5]}
		rest = strings.Join(segs[6:], "/")
	}
	ds, after, ok := strings.Cut(rest, "/paths/")
	ds, okDS := cutPrefixFold(ds, "datastores/")
	if !ok || !okDS || CheckDatastoreName(ds) != nil {
		return loc, bad
	}
	if err := checkBlobName(after); err != nil {
		return loc, fmt.Errorf("%.200q: %w", uri, err)
	}
	loc.Datastore, loc.Path = ds, after
	return loc, nil
}

// checkBlobName refuses paths that could escape a folder when a job's
// files are written out: "..", empty segments inside, a backslash.
func checkBlobName(p string) error {
	if len(p) > 1024 {
		return fmt.Errorf("path is longer than 1024 characters")
	}
	if strings.ContainsAny(p, "\\\x00") {
		return fmt.Errorf("path %.100q holds a backslash or NUL", p)
	}
	for i, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if seg == ".." || seg == "." || (seg == "" && i > 0) {
			return fmt.Errorf("path %.100q holds an empty, '.' or '..' segment", p)
		}
	}
	return nil
}

// CheckBlobName is checkBlobName for the blob store: a blob's name.
func CheckBlobName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") {
		return fmt.Errorf("blob name %.100q must be non-empty and must not start with '/'", name)
	}
	return checkBlobName(name)
}

// ParseDataAssetRef reads a job input that names a data asset version:
// azureml:NAME:VERSION, azureml:NAME@latest, or a version's ARM id
// (…/data/NAME/versions/VERSION, with or without azureml:). ok is false
// for anything else. version is LatestVersion for @latest.
func ParseDataAssetRef(ref string) (name, version string, ok bool) {
	rest, prefixed := cutPrefixFold(ref, "azureml:")
	if strings.HasPrefix(rest, "//") {
		return "", "", false // azureml://datastores/…: a path
	}
	if strings.Contains(rest, "/") {
		p := strings.Split(strings.Trim(rest, "/"), "/")
		if len(p) >= 4 && strings.EqualFold(p[len(p)-4], "data") && strings.EqualFold(p[len(p)-2], "versions") {
			// azure-ai-ml 1.4.0 builds the id of azureml:NAME@latest with
			// the prefix in the name; a name holds no ':'.
			return strings.TrimPrefix(p[len(p)-3], "azureml:"), p[len(p)-1], true
		}
		return "", "", false
	}
	if !prefixed {
		return "", "", false
	}
	if n, ok := strings.CutSuffix(rest, "@latest"); ok && n != "" && !strings.Contains(n, ":") {
		return n, LatestVersion, true
	}
	n, v, ok := strings.Cut(rest, ":")
	if !ok || n == "" || v == "" || strings.Contains(v, ":") {
		return "", "", false
	}
	return n, v, true
}

// ParseCodeID reads a job's codeId: a code version's ARM id
// (…/codes/NAME/versions/VERSION, with or without azureml:).
func ParseCodeID(id string) (name, version string, ok bool) {
	rest, _ := cutPrefixFold(id, "azureml:")
	p := strings.Split(strings.Trim(rest, "/"), "/")
	if len(p) >= 4 && strings.EqualFold(p[len(p)-4], "codes") && strings.EqualFold(p[len(p)-2], "versions") {
		return p[len(p)-3], p[len(p)-1], true
	}
	return "", "", false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
