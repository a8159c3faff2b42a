package kubesource

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// serviceNameIndex indexes EndpointSlices by "namespace/service": a Service's slices are then found
// without looking at every slice of its namespace (a label selector on the cache filters them all).
const serviceNameIndex = "lbplane.serviceName"

func indexServiceName(o client.Object) []string {
	if n := o.GetLabels()[discoveryv1.LabelServiceName]; n != "" {
		return []string{n}
	}
	return nil
}

// resolved remembers what the last resync read, so that the next one reads again only what events say
// changed: a resync after one EndpointSlice event resolves that Service alone, and policies that did not
// change keep the copy (and so the pointer) the engine has, which its translator takes as unchanged
// without looking inside.
type resolved struct {
	mu sync.Mutex
	// dirty names the objects (namespace/name) changed since the last resync: Services (an EndpointSlice
	// event marks its Service) and Secrets.
	dirtyServices map[types.NamespacedName]bool
	dirtySecrets  map[types.NamespacedName]bool
	// all is set by an event the dirty sets cannot describe; the next resync reads everything.
	all bool

	// Owned by the resync loop.
	services map[translate.ServiceRef]translate.ServiceEndpoints
	secrets  map[translate.SecretRef]translate.TLSSecret
	policies map[types.UID]*v1alpha1.LoadBalancerPolicy
}

func newResolved() *resolved {
	return &resolved{dirtyServices: map[types.NamespacedName]bool{}, dirtySecrets: map[types.NamespacedName]bool{}, all: true,
		services: map[translate.ServiceRef]translate.ServiceEndpoints{}, secrets: map[translate.SecretRef]translate.TLSSecret{},
		policies: map[types.UID]*v1alpha1.LoadBalancerPolicy{}}
}

// mark records an event on obj.
func (r *resolved) mark(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		if n := o.Labels[discoveryv1.LabelServiceName]; n != "" {
			r.dirtyServices[types.NamespacedName{Namespace: o.Namespace, Name: n}] = true
		}
	case client.Object:
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		switch o.(type) {
		case *v1alpha1.LoadBalancerPolicy:
			// Policies are compared by resource version at every resync.
		default:
			if isSecret(o) {
				r.dirtySecrets[key] = true
			} else {
				r.dirtyServices[key] = true
			}
		}
	default:
		r.all = true
	}
}

// take returns what changed since the last call and starts a new round.
func (r *resolved) take() (services, secrets map[types.NamespacedName]bool, all bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	services, secrets, all = r.dirtyServices, r.dirtySecrets, r.all
	r.dirtyServices, r.dirtySecrets, r.all = map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}, false
	return services, secrets, all
}
