// Package objkey is the one identity of the objects lbplane serves: which object, in which namespace. The
// kind is the package's that holds the key (a policy's key is a LoadBalancerPolicy's). It sits at the bottom
// of controlplane: the store, the wire, translation, status, rollouts, the dashboard and metrics labels use
// it, and nothing below the API imports more than this to name a policy.
//
// A key becomes a string only where bytes leave the process (Key.String: "namespace/name"); Parse reads
// that form back. The names Envoy's resources get from a key are derived here, once: nothing parses them
// back into a key.
package objkey

import (
	"cmp"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Key identifies a namespaced object. It is types.NamespacedName, the type of the API's object keys
// (client.ObjectKey), so that a key read from Kubernetes needs no conversion.
type Key = types.NamespacedName

// Of returns the key of a policy, with the default namespace applied.
func Of(p *v1alpha1.LoadBalancerPolicy) Key {
	return Key{Namespace: cmp.Or(p.Namespace, v1alpha1.DefaultNamespace), Name: p.Name}
}

// Parse reads a key back from the form Key.String gives it: "namespace/name", both parts non-empty and the
// name without a slash.
func Parse(s string) (Key, bool) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return Key{}, false
	}
	return Key{Namespace: ns, Name: name}, true
}

// Compare orders keys by namespace, then name.
func Compare(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Name joins the parts of a name derived from a key ("namespace/name/backend" for a policy's cluster), in one
// allocation: translation names every cluster and route of a policy with it.
func Name(k Key, parts ...string) string {
	n := len(k.Namespace) + 1 + len(k.Name)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(k.Namespace)
	b.WriteString(separator)
	b.WriteString(k.Name)
	for _, p := range parts {
		b.WriteString(separator)
		b.WriteString(p)
	}
	return b.String()
}

// separator is what derived names put between their parts.
const separator = "/"

// Join joins the parts of a derived name (a name of Envoy resources made of others, such as a listener's
// route table for one virtual host).
func Join(parts ...string) string { return strings.Join(parts, separator) }

// Cluster is the name of the Envoy cluster of a policy's backend: "namespace/name/backend". Translation names
// the cluster with it, and a rollout finds the cluster of a backend it shifts traffic to with it.
func Cluster(k Key, backend string) string { return Name(k, backend) }
