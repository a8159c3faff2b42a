package lbctl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// runningGatewayKinds are what lbctl reads of a cluster to preview a change of Gateway API objects: every
// kind the offline translation reads, but Secrets (read one by one, those a Gateway names).
var runningGatewayKinds = []schema.GroupVersionResource{
	gatewayResource("gatewayclasses"),
	gatewayGVR,
	gatewayResource("httproutes"),
	gatewayResource("referencegrants"),
	v1alpha1.GroupVersion.WithResource("backendloadbalancerpolicies"),
	policiesGVR,
	servicesGVR,
	discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
	corev1.SchemeGroupVersion.WithResource("namespaces"),
}

// writeRunningGatewayObjects writes what runs in the cluster, for a diff of Gateway API objects in Kubernetes
// mode, as one List (kubectl get -o yaml's form) to a file of its own in a new 0700 directory, and returns
// its path and what removes it: the Gateway API objects, BackendLoadBalancerPolicies, LoadBalancerPolicies,
// Services, EndpointSlices and Namespaces, and the TLS Secrets the Gateways' listeners name. A kind the
// cluster does not serve (a CRD not installed) is left out.
func (c *Cluster) writeRunningGatewayObjects(ctx context.Context) (string, func(), error) {
	var items []any
	var gateways []unstructured.Unstructured
	for _, gvr := range runningGatewayKinds {
		l, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("reading the cluster's %s: %w", gvr.Resource, err)
		}
		for _, u := range l.Items {
			// Both are of the API server: the offline translation neither reads nor expects them.
			unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
			unstructured.RemoveNestedField(u.Object, "status")
			items = append(items, u.Object)
			if gvr == gatewayGVR {
				gateways = append(gateways, u)
			}
		}
	}
	for _, name := range gatewaySecrets(gateways) {
		u, err := c.Dynamic.Resource(secretsGVR).Namespace(name[0]).Get(ctx, name[1], metav1.GetOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			continue // the listener is then not served offline, and the preview says so
		}
		if err != nil {
			return "", nil, fmt.Errorf("reading Secret %s/%s: %w", name[0], name[1], err)
		}
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		items = append(items, u.Object)
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "lbctl-running-")
	if err != nil {
		return "", nil, err
	}
	done := func() { os.RemoveAll(dir) }
	path := filepath.Join(dir, "running.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		done()
		return "", nil, err
	}
	return path, done, nil
}

// gatewaySecrets lists the Secrets (namespace, name) the listeners of gateways name as certificates.
func gatewaySecrets(gateways []unstructured.Unstructured) [][2]string {
	var out [][2]string
	seen := map[[2]string]bool{}
	for _, u := range gateways {
		listeners, _, _ := unstructured.NestedSlice(u.Object, "spec", "listeners")
		for _, l := range listeners {
			refs, _, _ := unstructured.NestedSlice(l.(map[string]any), "tls", "certificateRefs")
			for _, r := range refs {
				ref := r.(map[string]any)
				if k, _ := ref["kind"].(string); k != "" && k != "Secret" {
					continue
				}
				ns, _ := ref["namespace"].(string)
				if ns == "" {
					ns = u.GetNamespace()
				}
				name, _ := ref["name"].(string)
				if key := [2]string{ns, name}; name != "" && !seen[key] {
					seen[key] = true
					out = append(out, key)
				}
			}
		}
	}
	return out
}
