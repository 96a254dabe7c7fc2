package kubernetes

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// KUBECONFIG names several files: the first to define a context, cluster
// or user wins, the current context comes from the first that sets one,
// and a path in an entry is relative to its own file's folder.
func TestLoadConfigMergesKubeconfigs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(b, "ca.pem"), "CA PEM")
	first := writeFile(t, filepath.Join(a, "config"), `apiVersion: v1
kind: Config
current-context: work
contexts:
- name: work
  context: {cluster: prod, user: me, namespace: ml}
users:
- name: me
  user: {token: first-token}
`)
	second := writeFile(t, filepath.Join(b, "config"), `apiVersion: v1
kind: Config
current-context: other
clusters:
- name: prod
  cluster: {server: "https://kube.example:6443", certificate-authority: ca.pem, tls-server-name: kube.internal}
users:
- name: me
  user: {token: second-token}
contexts:
- name: work
  context: {cluster: nowhere, user: nobody}
`)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", first+string(os.PathListSeparator)+filepath.Join(a, "missing")+string(os.PathListSeparator)+second)
	cfg, ns, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://kube.example:6443" || string(cfg.CAData) != "CA PEM" || cfg.TLSServerName != "kube.internal" {
		t.Errorf("cluster: host %q, CA %q, server name %q", cfg.Host, cfg.CAData, cfg.TLSServerName)
	}
	if cfg.BearerToken != "first-token" || ns != "ml" {
		t.Errorf("user token %q, namespace %q: want the first file's", cfg.BearerToken, ns)
	}
	// A file asked for by name must exist.
	if _, _, err := LoadConfig(filepath.Join(a, "missing")); err == nil {
		t.Error("a missing --kubeconfig was accepted")
	}
}

// Client certificates come inline or from files; a context without a
// namespace is in "default".
func TestLoadConfigClientCertificate(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "key.pem"), "KEY")
	path := writeFile(t, filepath.Join(dir, "config"), `current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://10.0.0.1", certificate-authority-data: `+base64.StdEncoding.EncodeToString([]byte("CA"))+`}}]
users: [{name: u, user: {client-certificate-data: `+base64.StdEncoding.EncodeToString([]byte("CERT"))+`, client-key: key.pem}}]
`)
	cfg, ns, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.CAData) != "CA" || string(cfg.CertData) != "CERT" || string(cfg.KeyData) != "KEY" || ns != "default" {
		t.Errorf("config %+v, namespace %q", cfg, ns)
	}
}

// What the provider cannot honour is refused with a line that says so,
// never half applied.
func TestLoadConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"auth-provider": {`current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://k"}}]
users: [{name: u, user: {auth-provider: {name: gcp}}}]`, "auth-provider"},
		"proxy": {`current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://k", proxy-url: "http://proxy:3128"}}]`, "proxy-url"},
		"no context": {`current-context: gone`, `context "gone" is not defined`},
		"no current": {`clusters: [{name: k, cluster: {server: "https://k"}}]`, "no current-context"},
		"no cluster": {`current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]`, `cluster "k"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := LoadConfig(writeFile(t, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")), tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want one naming %q", err, tc.want)
			}
		})
	}
}

// A user whose credentials come from an exec plugin (as on EKS, GKE and
// AKS) is served by running it: the real API server accepts the token it
// prints, and a failing plugin's own words reach the error.
func TestExecPluginCredentialsOnTheLab(t *testing.T) {
	if lab == nil {
		t.Skip(labReason)
	}
	lc, _, err := LoadConfig(lab.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "plugin"), `#!/bin/sh
case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*) ;; *) echo "no exec info" >&2; exit 3 ;; esac
[ "$PLUGIN_MODE" = fail ] && { echo "you are not signed in; run plugin login" >&2; exit 1; }
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$LAB_TOKEN"
`)
	if err := os.Chmod(filepath.Join(dir, "plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(mode string) string {
		return writeFile(t, filepath.Join(dir, "config-"+mode), `current-context: c
contexts: [{name: c, context: {cluster: lab, user: u}}]
clusters: [{name: lab, cluster: {server: "`+lc.Host+`", insecure-skip-tls-verify: true}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin
      env: [{name: LAB_TOKEN, value: "`+lc.BearerToken+`"}, {name: PLUGIN_MODE, value: `+mode+`}]
`)
	}
	ctx := context.Background()
	for _, mode := range []string{"ok", "fail"} {
		cfg, _, err := LoadConfig(kubeconfig(mode))
		if err != nil {
			t.Fatal(err)
		}
		c, err := newAPIClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var list PodList
		err = c.do(ctx, "GET", "/api/v1/namespaces/default/pods", "", nil, &list)
		switch {
		case mode == "ok" && err != nil:
			t.Errorf("with the plugin's token: %v", err)
		case mode == "fail" && (err == nil || !strings.Contains(err.Error(), "run plugin login")):
			t.Errorf("a failing plugin: err = %v; want its own words", err)
		}
	}
}

func TestBinaryQuantity(t *testing.T) {
	for in, want := range map[int64]string{112 << 30: "112Gi", 1536 << 20: "1536Mi", 512: "512", 3 << 10: "3Ki"} {
		if got := binaryQuantity(in); got != want {
			t.Errorf("binaryQuantity(%d) = %s; want %s", in, got, want)
		}
	}
}
