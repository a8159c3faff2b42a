// Package gatewayapi turns Gateway API objects (GatewayClass, Gateway, HTTPRoute, ReferenceGrant) into the
// LoadBalancerPolicies the rest of the pipeline already translates, and into the status the Gateway API
// specification asks for. It is a pure function of its input, as translate is: Kubernetes objects in,
// policies and status out, nothing read or written on the way.
//
// Each Gateway listener port gets an Envoy port of its own from the operator's range (three Gateways may all
// listen on 80), and each host name served on it becomes one policy: a virtual host whose routes are every
// attached HTTPRoute rule for that name, in the specification's precedence order. Within a policy, every
// route naming the same Service port shares one backend, and so one Envoy cluster.
package gatewayapi

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// AddService records what the translation reads of a Service: its ports, and the names of the named ones
// (a BackendLoadBalancerPolicy's sectionName). lbplane serve adds those of its cache, lbctl those of files.
func (in *Input) AddService(svc *corev1.Service) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	ports := []int32{}
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
		if p.Name != "" {
			if in.PortNames[key] == nil {
				in.PortNames[key] = map[int32]string{}
			}
			in.PortNames[key][p.Port] = p.Name
		}
	}
	in.Services[key] = ports
}

// ControllerName is the GatewayClass controller name lbplane answers to.
const ControllerName = "lbplane.io/gateway-controller"

// Annotations on the policies made here: which Gateway, port and host name each one serves (see also
// AnnotationListeners and AnnotationRules).
const (
	AnnotationGateway  = v1alpha1.AnnotationGateway
	AnnotationPort     = "gateway.lbplane.io/port"
	AnnotationHostname = "gateway.lbplane.io/hostname"
)

// Input is what the translator reads: the Gateway API objects, and what it needs to know of the cluster.
type Input struct {
	// ProxyGroup is the group of Envoys the Gateways are served by.
	ProxyGroup string
	// Address is what the Envoy listeners bind (the Envoys' pod address: 0.0.0.0 in a pod).
	Address string
	// Ports are the Envoy ports Gateway listeners are given, one per Gateway and listener port.
	Ports []int32

	Classes    []*gwv1.GatewayClass
	Gateways   []*gwv1.Gateway
	Routes     []*gwv1.HTTPRoute
	Grants     []*gwv1.ReferenceGrant
	Namespaces map[string]map[string]string // namespace name → labels
	// Services lists the ports of every Service by namespace/name, and PortNames names its named ports.
	Services  map[types.NamespacedName][]int32
	PortNames map[types.NamespacedName]map[int32]string
	// BackendPolicies are the BackendLoadBalancerPolicies: how to balance over the Services routes send to.
	BackendPolicies []*v1alpha1.BackendLoadBalancerPolicy
	// Secret says what makes a Secret unusable as an HTTPS listener's certificate ("" when it is a Secret of
	// type kubernetes.io/tls with a certificate chain and its key); nil finds none.
	Secret func(types.NamespacedName) string
	// Previous, when set, is the last translation: each of its policies whose inputs did not change is
	// handed on again, the same pointer, instead of being made anew (see builtKey). The output is the same
	// with or without it.
	Previous *Output
}

// Output is what the Gateway API objects become.
type Output struct {
	// Policies are sorted by namespace and name.
	Policies []*v1alpha1.LoadBalancerPolicy
	// Classes holds the status of every GatewayClass of lbplane's controller, by name.
	Classes map[string]gwv1.GatewayClassStatus
	// Gateways holds every Gateway of an lbplane class.
	Gateways map[types.NamespacedName]*Gateway
	// Routes holds, for every HTTPRoute with a parent of lbplane's, the parent statuses lbplane writes.
	Routes map[types.NamespacedName][]gwv1.RouteParentStatus
	// Secrets are the Secrets the Gateways' listeners name and may read: a change to one of them changes
	// the translation.
	Secrets map[types.NamespacedName]bool
	// BackendPolicies holds the status of every BackendLoadBalancerPolicy, by namespace/name.
	BackendPolicies map[types.NamespacedName]*BackendPolicy
	// built holds the policies made, by namespace/name, each with the key of what it was made of (see
	// builtKey), for the next translation (Input.Previous).
	built map[types.NamespacedName]builtPolicy
	// attached holds what attaching each HTTPRoute made, by namespace/name, for the next translation (see
	// attachedRoute).
	attached map[types.NamespacedName]*attachedRoute
}

// Gateway is what one Gateway becomes.
type Gateway struct {
	// Status is the Gateway's status with Programmed still to be decided (see Programmed).
	Status gwv1.GatewayStatus
	// Generation is the Gateway's metadata.generation the status was computed from.
	Generation int64
	// Ports maps each listener port that is served to the Envoy port serving it.
	Ports []PortMapping
	// Policies are the keys (namespace/name) of the policies serving the Gateway, per listener name.
	Policies map[gwv1.SectionName][]types.NamespacedName
	accepted bool
	// unserved holds the listeners that are valid but not served, each with why (an HTTPS listener whose
	// certificate does not resolve).
	unserved map[gwv1.SectionName]string
}

// PortMapping is one port of a Gateway's Service: clients connect to Port, the Envoys listen on EnvoyPort.
type PortMapping struct {
	Name      string
	Port      int32
	EnvoyPort int32
	// AppProtocol is the listener's protocol as a Service port's appProtocol: http or https.
	AppProtocol string
}

// Translate computes the policies and the status of every Gateway API object of lbplane's controller.
func Translate(in Input) *Output {
	out := &Output{Classes: map[string]gwv1.GatewayClassStatus{}, Gateways: map[types.NamespacedName]*Gateway{},
		Routes: map[types.NamespacedName][]gwv1.RouteParentStatus{}, Secrets: map[types.NamespacedName]bool{},
		built: map[types.NamespacedName]builtPolicy{}}
	classes := map[string]*gwv1.GatewayClass{}
	for _, c := range in.Classes {
		if c.Spec.ControllerName != ControllerName {
			continue
		}
		classes[c.Name] = c
		out.Classes[c.Name] = classStatus(c)
	}
	gateways := slices.Clone(in.Gateways)
	slices.SortFunc(gateways, func(a, b *gwv1.Gateway) int { return olderObject(&a.ObjectMeta, &b.ObjectMeta) })
	var ours []*gateway
	used := map[int32]bool{}
	allowed := grants(in.Grants)
	for _, g := range gateways {
		if _, ok := classes[string(g.Spec.GatewayClassName)]; !ok {
			continue
		}
		gw := newGateway(g, in, allowed, out.Secrets)
		gw.assignPorts(in.Ports, used)
		ours = append(ours, gw)
		out.Gateways[gw.key] = gw.result
	}
	byKey := map[types.NamespacedName]*gateway{}
	for _, gw := range ours {
		byKey[gw.key] = gw
	}
	routes := slices.Clone(in.Routes)
	slices.SortFunc(routes, func(a, b *gwv1.HTTPRoute) int { return olderObject(&a.ObjectMeta, &b.ObjectMeta) })
	world := attachWorld(in, ours, allowed)
	out.attached = make(map[types.NamespacedName]*attachedRoute, len(routes))
	for order, r := range routes {
		key := types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
		var a *attachedRoute
		if in.Previous != nil {
			a = in.Previous.attached[key]
		}
		if a.still(r, world, in) {
			a.replay(order, byKey)
		} else {
			a = attach(in, r, order, byKey, allowed)
			a.world = world
		}
		out.attached[key] = a
		if len(a.parents) > 0 {
			out.Routes[key] = a.parents
		}
	}
	bp := newBackendPolicies(in)
	for _, gw := range ours {
		bp.decideRules(gw)
		out.Policies = append(out.Policies, gw.policies(in, bp, out.built)...)
		gw.finish()
	}
	slices.SortFunc(out.Policies, func(a, b *v1alpha1.LoadBalancerPolicy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	out.BackendPolicies = applyBackendPolicies(in, bp, ours, out.Policies)
	return out
}

// Features are the Gateway API features lbplane supports: the GATEWAY-HTTP profile's core, and the extended
// features the conformance suite passes. Every GatewayClass of lbplane's lists them in
// status.supportedFeatures; the suite's run (conformance/) checks that they are the ones it tests.
var Features = []features.FeatureName{
	features.SupportGateway,
	features.SupportReferenceGrant,
	features.SupportHTTPRoute,
	features.SupportGatewayPort8080,
	features.SupportGatewayHTTPListenerIsolation,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteDestinationPortMatching,
	features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRouteNamedRouteRule,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRoute303RedirectStatusCode,
	features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode,
	features.SupportHTTPRouteRequestTimeout,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteRequestMirror,
	features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRoutePathRewrite,
}

// classStatus accepts a class of lbplane's controller: it takes no parameters. It lists the Features, sorted
// by name as the specification asks.
func classStatus(c *gwv1.GatewayClass) gwv1.GatewayClassStatus {
	st := gwv1.GatewayClassStatus{}
	for _, f := range Features {
		st.SupportedFeatures = append(st.SupportedFeatures, gwv1.SupportedFeature{Name: gwv1.FeatureName(f)})
	}
	slices.SortFunc(st.SupportedFeatures, func(a, b gwv1.SupportedFeature) int { return cmp.Compare(a.Name, b.Name) })
	if c.Spec.ParametersRef != nil {
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayClassConditionStatusAccepted), false,
			string(gwv1.GatewayClassReasonInvalidParameters), "lbplane's GatewayClass takes no parametersRef", c.Generation))
	} else {
		st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayClassConditionStatusAccepted), true,
			string(gwv1.GatewayClassReasonAccepted), "handled by "+ControllerName, c.Generation))
	}
	st.Conditions = append(st.Conditions, condition(string(gwv1.GatewayClassConditionStatusSupportedVersion), true,
		string(gwv1.GatewayClassReasonSupportedVersion), "Gateway API "+BundleVersion+" (standard channel)", c.Generation))
	return st
}

// BundleVersion is the Gateway API release whose CRDs lbplane is built and tested against.
const BundleVersion = "v1.6.3"

// condition builds a condition without a transition time: the writer keeps the old one when nothing moved.
func condition(typ string, ok bool, reason, msg string, gen int64) metav1.Condition {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen}
}

// olderObject orders objects as the specification's tie-breaks do: creation time, then namespace/name.
func olderObject(a, b *metav1.ObjectMeta) int {
	return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// hash32 is a stable hash of parts (FNV-1a, each part ended by a NUL).
func hash32(parts ...string) uint32 {
	h := fnv.New32a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum32()
}

// hash8 is hash32 in eight hex digits, for names.
func hash8(parts ...string) string { return fmt.Sprintf("%08x", hash32(parts...)) }

// dnsLabel makes s fit in an RFC 1123 label of at most n characters (lowercase, digits, '-').
func dnsLabel(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > n {
		out = strings.TrimRight(out[:n], "-")
	}
	if out == "" {
		out = "x"
	}
	return out
}
