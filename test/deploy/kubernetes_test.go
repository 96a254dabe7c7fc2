// Package deploy checks the deployment files in deploy/ against the real
// programs that read them.
package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/cumulus-ml/cumulus/test/kubelab"
)

const haManifest = "../../deploy/kubernetes/cumulus-ha.yaml"

// namespace is the one the manifest's ClusterRoleBinding names.
const namespace = "cumulus"

// TestHAManifestDryRun creates every object of the HA manifest on a real
// API server, as a server-side dry run with strict field validation: an
// unknown or misplaced field, a wrong type or a value the API refuses fails
// the test, and nothing is persisted.
func TestHAManifestDryRun(t *testing.T) {
	objs := decodeManifest(t, haManifest)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	for _, k := range []string{"Secret", "PersistentVolumeClaim", "ServiceAccount", "Role", "RoleBinding",
		"Deployment", "Service", "PodDisruptionBudget"} {
		if kinds[k] == 0 {
			t.Errorf("the manifest has no %s", k)
		}
	}

	ap := newApplier(t)
	for _, o := range objs {
		if err := ap.dryRun(t.Context(), o); err != nil {
			t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// The dry run must be able to fail: a field the API does not know is
	// refused, not dropped.
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		bad := o.DeepCopy()
		containers, _, _ := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["readinessProbes"] = []any{}
		if err := unstructured.SetNestedSlice(bad.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
		err := ap.dryRun(t.Context(), bad)
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("a Deployment with an unknown field: got %v, want an unknown field error", err)
		}
	}
}

func decodeManifest(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: document %d: %v", path, len(objs)+1, err)
		}
		if m == nil {
			continue // an empty document
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no objects", path)
	}
	return objs
}

type applier struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// newApplier starts the Kubernetes lab's control plane (no nodes) and
// creates the namespace the manifest is applied to.
func newApplier(t *testing.T) *applier {
	t.Helper()
	lab, err := kubelab.Start(t.Context(), t.TempDir())
	if errors.Is(err, kubelab.ErrNoTools) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lab.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := lab.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(lab.Config)
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(lab.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// dryRun creates o as kubectl apply -n namespace would, without persisting it.
func (a *applier) dryRun(ctx context.Context, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}
	r := dynamic.ResourceInterface(a.client.Resource(m.Resource))
	if m.Scope.Name() == "namespace" {
		r = a.client.Resource(m.Resource).Namespace(namespace)
	}
	_, err = r.Create(ctx, o, opts)
	return err
}
