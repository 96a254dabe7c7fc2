package kubernetes

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// LoadConfig finds the API server to talk to: the kubeconfig at path when
// given, else in-cluster config when this process runs in a pod, else
// $KUBECONFIG or ~/.kube/config. It returns the namespace the config names
// ("default" when it names none).
func LoadConfig(path string) (*rest.Config, string, error) {
	if path == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster Kubernetes config: %w", err)
		}
		ns := "default"
		if b, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
			ns = strings.TrimSpace(string(b))
		}
		return cfg, ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) || errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("no Kubernetes config: pass --kubeconfig, set KUBECONFIG, or run in a pod: %w", err)
		}
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}
