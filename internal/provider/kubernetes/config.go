package kubernetes

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is how to reach an API server and who to be there.
type Config struct {
	Host          string // https://host:port
	TLSServerName string // the name the server's certificate must hold, when not Host's
	Insecure      bool   // do not verify the server's certificate
	CAData        []byte // PEM; none: the system's roots

	CertData, KeyData []byte // a client certificate and its key (PEM)
	BearerToken       string
	BearerTokenFile   string // read again every minute (a pod's token rotates)
	Username          string // basic authentication
	Password          string
	Exec              *ExecConfig // a credential plugin (aws, gke-gcloud-auth-plugin, kubelogin…)
}

// ExecConfig is a kubeconfig user's credential plugin: a command that
// prints an ExecCredential.
type ExecConfig struct {
	Command     string
	Args        []string
	Env         []string // NAME=VALUE, added to this process's environment
	APIVersion  string   // client.authentication.k8s.io/v1 or v1beta1
	InstallHint string
	dir         string // the kubeconfig's folder: a relative command is found there
}

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// The service account's token and CA in a pod.
var (
	inClusterToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	inClusterCA    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// LoadConfig finds the API server to talk to: the kubeconfig at path when
// given, else in-cluster config when this process runs in a pod, else
// $KUBECONFIG or ~/.kube/config. It returns the namespace the config names
// ("default" when it names none).
func LoadConfig(path string) (*Config, string, error) {
	if path == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := inClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster Kubernetes config: %w", err)
		}
		ns := "default"
		if b, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
			ns = strings.TrimSpace(string(b))
		}
		return cfg, ns, nil
	}
	var files []string
	switch {
	case path != "":
		files = []string{path}
	case os.Getenv("KUBECONFIG") != "":
		for _, f := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
			if f != "" {
				files = append(files, f)
			}
		}
	default:
		if home, err := os.UserHomeDir(); err == nil {
			files = []string{filepath.Join(home, ".kube", "config")}
		}
	}
	kc, err := readKubeconfigs(files, path != "")
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if kc == nil {
		return nil, "", fmt.Errorf("no Kubernetes config: pass --kubeconfig, set KUBECONFIG, or run in a pod: %w", os.ErrNotExist)
	}
	cfg, ns, err := kc.resolve()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}

// inClusterConfig is a pod's own service account on the cluster it runs in.
func inClusterConfig() (*Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
	}
	if _, err := os.Stat(inClusterToken); err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	ca, err := os.ReadFile(inClusterCA)
	if err != nil {
		return nil, fmt.Errorf("service account CA: %w", err)
	}
	return &Config{Host: "https://" + net.JoinHostPort(host, port), CAData: ca, BearerTokenFile: inClusterToken}, nil
}

// kubeconfig is the part of a kubeconfig file the provider reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			TLSServerName            string `yaml:"tls-server-name"`
			InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
			CertificateAuthority     string `yaml:"certificate-authority"`
			CertificateAuthorityData string `yaml:"certificate-authority-data"`
			ProxyURL                 string `yaml:"proxy-url"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			ClientCertificate     string `yaml:"client-certificate"`
			ClientCertificateData string `yaml:"client-certificate-data"`
			ClientKey             string `yaml:"client-key"`
			ClientKeyData         string `yaml:"client-key-data"`
			Token                 string `yaml:"token"`
			TokenFile             string `yaml:"tokenFile"`
			Username              string `yaml:"username"`
			Password              string `yaml:"password"`
			AuthProvider          *struct {
				Name string `yaml:"name"`
			} `yaml:"auth-provider"`
			Exec *struct {
				Command string   `yaml:"command"`
				Args    []string `yaml:"args"`
				Env     []struct {
					Name  string `yaml:"name"`
					Value string `yaml:"value"`
				} `yaml:"env"`
				APIVersion  string `yaml:"apiVersion"`
				InstallHint string `yaml:"installHint"`
			} `yaml:"exec"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`

	// Where each cluster's and user's entry came from: relative paths
	// in an entry are relative to its file's folder.
	clusterDir, userDir map[string]string
}

// readKubeconfigs merges kubeconfig files as kubectl does: the first file
// that names a cluster, user or context (or the current context) wins.
// A file that does not exist is skipped unless it was asked for by name
// (must); nil when none exists.
func readKubeconfigs(files []string, must bool) (*kubeconfig, error) {
	var out *kubeconfig
	contexts := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) && !must {
			continue
		}
		if err != nil {
			return nil, err
		}
		var kc kubeconfig
		if err := yaml.Unmarshal(raw, &kc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		dir := filepath.Dir(f)
		if out == nil {
			out = &kubeconfig{clusterDir: map[string]string{}, userDir: map[string]string{}}
		}
		if out.CurrentContext == "" {
			out.CurrentContext = kc.CurrentContext
		}
		for _, c := range kc.Clusters {
			if _, seen := out.clusterDir[c.Name]; !seen {
				out.Clusters, out.clusterDir[c.Name] = append(out.Clusters, c), dir
			}
		}
		for _, u := range kc.Users {
			if _, seen := out.userDir[u.Name]; !seen {
				out.Users, out.userDir[u.Name] = append(out.Users, u), dir
			}
		}
		for _, c := range kc.Contexts {
			if !contexts[c.Name] {
				out.Contexts, contexts[c.Name] = append(out.Contexts, c), true
			}
		}
	}
	return out, nil
}

// resolve is the current context's cluster and user as a Config, and its
// namespace.
func (kc *kubeconfig) resolve() (*Config, string, error) {
	if kc.CurrentContext == "" {
		return nil, "", errors.New("no current-context")
	}
	var cluster, user, ns string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			cluster, user, ns, found = c.Context.Cluster, c.Context.User, c.Context.Namespace, true
			break
		}
	}
	if !found {
		return nil, "", fmt.Errorf("context %q is not defined", kc.CurrentContext)
	}
	cfg := &Config{}
	found = false
	for _, c := range kc.Clusters {
		if c.Name != cluster {
			continue
		}
		found = true
		cl, dir := c.Cluster, kc.clusterDir[c.Name]
		if cl.Server == "" {
			return nil, "", fmt.Errorf("cluster %q has no server", cluster)
		}
		if cl.ProxyURL != "" {
			return nil, "", fmt.Errorf("cluster %q: proxy-url is not supported; use HTTPS_PROXY", cluster)
		}
		cfg.Host, cfg.TLSServerName, cfg.Insecure = cl.Server, cl.TLSServerName, cl.InsecureSkipTLSVerify
		var err error
		if cfg.CAData, err = dataOrFile(cl.CertificateAuthorityData, cl.CertificateAuthority, dir); err != nil {
			return nil, "", fmt.Errorf("cluster %q: certificate authority: %w", cluster, err)
		}
	}
	if !found {
		return nil, "", fmt.Errorf("cluster %q of context %q is not defined", cluster, kc.CurrentContext)
	}
	for _, u := range kc.Users {
		if u.Name != user {
			continue
		}
		us, dir := u.User, kc.userDir[u.Name]
		if us.AuthProvider != nil {
			return nil, "", fmt.Errorf("user %q uses the %s auth-provider, which Kubernetes no longer supports; use its exec credential plugin", user, us.AuthProvider.Name)
		}
		var err error
		if cfg.CertData, err = dataOrFile(us.ClientCertificateData, us.ClientCertificate, dir); err != nil {
			return nil, "", fmt.Errorf("user %q: client certificate: %w", user, err)
		}
		if cfg.KeyData, err = dataOrFile(us.ClientKeyData, us.ClientKey, dir); err != nil {
			return nil, "", fmt.Errorf("user %q: client key: %w", user, err)
		}
		cfg.BearerToken, cfg.Username, cfg.Password = us.Token, us.Username, us.Password
		if us.TokenFile != "" && cfg.BearerToken == "" {
			cfg.BearerTokenFile = relTo(us.TokenFile, dir)
		}
		if e := us.Exec; e != nil {
			cfg.Exec = &ExecConfig{Command: e.Command, Args: e.Args, APIVersion: e.APIVersion, InstallHint: e.InstallHint, dir: dir}
			for _, kv := range e.Env {
				cfg.Exec.Env = append(cfg.Exec.Env, kv.Name+"="+kv.Value)
			}
		}
	}
	return cfg, ns, nil
}

// dataOrFile is inline base64 data, else the file's content, else nil.
func dataOrFile(data, file, dir string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file != "" {
		return os.ReadFile(relTo(file, dir))
	}
	return nil, nil
}

func relTo(path, dir string) string {
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, path[2:])
		}
	}
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// execCredential is an exec plugin's answer (ExecCredential.status).
type execCredential struct {
	Token                 string     `json:"token"`
	ClientCertificateData string     `json:"clientCertificateData"`
	ClientKeyData         string     `json:"clientKeyData"`
	ExpirationTimestamp   *time.Time `json:"expirationTimestamp"`
}

// runExecPlugin runs a credential plugin, not interactively, and reads
// the credentials it prints.
func runExecPlugin(ctx context.Context, e *ExecConfig, host string) (*execCredential, error) {
	version := e.APIVersion
	if version == "" {
		version = "client.authentication.k8s.io/v1"
	}
	info, _ := json.Marshal(map[string]any{"apiVersion": version, "kind": "ExecCredential",
		"spec": map[string]any{"interactive": false}})
	command := e.Command
	if strings.ContainsRune(command, filepath.Separator) && !filepath.IsAbs(command) {
		command = filepath.Join(e.dir, command)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, command, e.Args...)
	cmd.Env = append(append(os.Environ(), e.Env...), "KUBERNETES_EXEC_INFO="+string(info))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		hint := ""
		if errors.Is(err, exec.ErrNotFound) && e.InstallHint != "" {
			hint = "; " + strings.TrimSpace(e.InstallHint)
		}
		return nil, fmt.Errorf("credential plugin %s for %s: %w: %s%s", e.Command, host, err, strings.TrimSpace(stderr.String()), hint)
	}
	var ec struct {
		Kind   string          `json:"kind"`
		Status *execCredential `json:"status"`
	}
	if err := json.Unmarshal(out, &ec); err != nil || ec.Kind != "ExecCredential" || ec.Status == nil {
		return nil, fmt.Errorf("credential plugin %s printed no ExecCredential with a status", e.Command)
	}
	if ec.Status.Token == "" && ec.Status.ClientCertificateData == "" {
		return nil, fmt.Errorf("credential plugin %s gave neither a token nor a client certificate", e.Command)
	}
	return ec.Status, nil
}
