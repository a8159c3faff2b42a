package gatewayapi

import (
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
