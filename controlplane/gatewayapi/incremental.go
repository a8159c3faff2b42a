package gatewayapi

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// A change to one HTTPRoute among thousands changes the policies of the host names it is served for, and no
// other: a translation given the previous one (Input.Previous) still attaches every route and decides
// every host name's routes in precedence order, but makes anew only the policies whose inputs moved, and
// hands the others on as they were, the same pointers, so that nothing downstream compares them.

// attachedRoute is what attaching one HTTPRoute made: its parent statuses and the rules it attached to
// listeners (placed, each without its order among the routes, which replay gives), with the Services its
// backends were looked up in. A translation given the previous one takes it again for the same route
// object (an informer hands on an unchanged object as the same pointer) when nothing else attach reads
// moved (world, see attachWorld, and the Services): resolving every route's backends and matching it to
// listeners was the largest part of a translation of one change among thousands of routes. Its parent
// statuses are then the same slice, which the status writer takes as unchanged without comparing it.
type attachedRoute struct {
	route    *gwv1.HTTPRoute
	world    string
	parents  []gwv1.RouteParentStatus
	placed   []placedRule
	services []seenService
	// rollout is what the route's rollout annotations ask (see routeAsk), shared by the rules it placed.
	rollout *rolloutAsk
}

// placedRule is one rule attached to listener index listener of a Gateway.
type placedRule struct {
	gateway  types.NamespacedName
	listener int
	rule     attachedRule
}

// seenService is a Service a route's backends were looked up in: its ports, or not found.
type seenService struct {
	name  types.NamespacedName
	ports []int32
	found bool
}

// still says whether attaching r now would make what a made: the same object, the same world, and every
// Service it looked up as it was.
func (a *attachedRoute) still(r *gwv1.HTTPRoute, world string, in Input) bool {
	if a == nil || a.route != r || world == "" || a.world != world {
		return false
	}
	for _, s := range a.services {
		ports, ok := in.Services[s.name]
		if ok != s.found || !slices.Equal(ports, s.ports) {
			return false
		}
	}
	return true
}

// replay attaches a's rules again, at the route's place order.
func (a *attachedRoute) replay(order int, gateways map[types.NamespacedName]*gateway) {
	for _, p := range a.placed {
		ar := p.rule
		ar.order = order
		l := gateways[p.gateway].listeners[p.listener]
		l.rules = append(l.rules, ar)
	}
}

// attachWorld is the key of what attach reads besides the route and the Services: the Gateways of lbplane's
// classes (each by UID and generation, which cover allowedRoutes), each listener as attach sees it (name,
// port, host name, valid, the route kinds it takes), the ReferenceGrants, and the namespaces' labels when a
// listener selects namespaces by them. Objects without UID and generation (read from files) make no key
// (""): every route is attached anew.
func attachWorld(in Input, gateways []*gateway, grants grants) string {
	k := keyWriter{ok: true}
	selector := false
	for _, gw := range gateways {
		k.object(&gw.obj.ObjectMeta)
		for _, l := range gw.listeners {
			k.str(string(l.spec.Name))
			k.int(int64(l.spec.Port))
			k.str(l.hostname())
			k.bool(l.valid)
			for _, kind := range l.kinds {
				if kind.Group != nil {
					k.str(string(*kind.Group))
				}
				k.str(string(kind.Kind))
			}
			k.sep()
			if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil && ar.Namespaces.From != nil && *ar.Namespaces.From == gwv1.NamespacesFromSelector {
				selector = true
			}
		}
		k.sep()
	}
	k.sep()
	sorted := slices.Clone(grants)
	slices.SortFunc(sorted, func(a, b *gwv1.ReferenceGrant) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, g := range sorted {
		k.object(&g.ObjectMeta)
	}
	k.sep()
	if selector {
		for _, ns := range slices.Sorted(maps.Keys(in.Namespaces)) {
			k.str(ns)
			labels := in.Namespaces[ns]
			for _, name := range slices.Sorted(maps.Keys(labels)) {
				k.str(name)
				k.str(labels[name])
			}
			k.sep()
		}
	}
	if !k.ok {
		return ""
	}
	return string(k.b)
}

// builtPolicy is one policy made by a translation, with the key of what it was made of and the backends it
// made for rules that a BackendLoadBalancerPolicy targets (see policyBackends).
type builtPolicy struct {
	key          string
	policy       *v1alpha1.LoadBalancerPolicy
	ruleBackends map[string]types.NamespacedName
}

// builtKey is the key of everything gateway.policy reads to make the policy of host name v of an Envoy
// port, whose entries are in precedence order, and whose listener is l: the Gateway's identity and Envoy
// port, the listener's protocol and certificate, the host name and its listeners, and for each entry its
// HTTPRoute rule and match, the backends it resolved to, and the BackendLoadBalancerPolicies that apply
// to them. A rule and a BackendLoadBalancerPolicy stand in by their object's UID and metadata.generation,
// which the API server moves with every change of the spec; an object without them (read from a file, not
// from an API server) leaves the policy without a key (""): it is made anew every time.
func (gw *gateway) builtKey(in Input, bp *backendPolicies, port gwv1.PortNumber, v *vhost, l *listener) string {
	k := keyWriter{ok: true}
	k.str(in.ProxyGroup)
	k.str(in.Address)
	k.str(gw.obj.Namespace)
	k.str(gw.obj.Name)
	k.str(string(gw.obj.UID))
	k.int(gw.obj.CreationTimestamp.UnixNano())
	k.int(int64(port))
	k.int(int64(gw.envoyPort[port]))
	k.str(string(l.spec.Protocol))
	k.str(l.secret.Namespace)
	k.str(l.secret.Name)
	k.str(v.hostname)
	for _, name := range slices.Sorted(maps.Keys(v.listeners)) {
		k.str(string(name))
	}
	k.sep()
	for _, e := range v.entries {
		ar := e.rule
		k.str(ar.route.Namespace)
		k.str(ar.route.Name)
		k.version(ar.uid, ar.generation)
		k.int(int64(ar.index))
		k.int(int64(e.index))
		k.str(ar.rollout.key)
		if rp := ar.policy; rp != nil {
			k.object(&rp.ObjectMeta)
		} else {
			k.str("")
		}
		for _, b := range ar.backends {
			k.str(b.namespace)
			k.str(b.name)
			k.int(int64(b.port))
			k.int(int64(b.weight))
			k.int(int64(b.percent))
			k.bool(b.invalid)
			k.bool(b.mirror)
			if ar.policy == nil && !b.invalid {
				if winner, _ := bp.forPort(servicePort{namespace: b.namespace, name: b.name, port: b.port}); winner != nil {
					k.object(&winner.ObjectMeta)
				}
			}
			k.sep()
		}
		k.sep()
	}
	if !k.ok {
		return ""
	}
	return string(k.b)
}

// keyWriter writes the parts of a key, each ended by a NUL (which no name, host name or UID holds); ok
// turns false when a part has no version.
type keyWriter struct {
	b  []byte
	ok bool
}

func (k *keyWriter) str(s string) { k.b = append(append(k.b, s...), 0) }
func (k *keyWriter) int(i int64)  { k.b = append(strconv.AppendInt(k.b, i, 10), 0) }
func (k *keyWriter) sep()         { k.b = append(k.b, 1) }

func (k *keyWriter) bool(v bool) {
	if v {
		k.b = append(k.b, 't')
	}
	k.b = append(k.b, 0)
}

// version writes an object's UID and generation; without either, the key is not one (see builtKey).
func (k *keyWriter) version(uid types.UID, generation int64) {
	if uid == "" || generation <= 0 {
		k.ok = false
	}
	k.str(string(uid))
	k.int(generation)
}

func (k *keyWriter) object(m *metav1.ObjectMeta) {
	k.str(m.Namespace)
	k.str(m.Name)
	k.version(m.UID, m.Generation)
}
