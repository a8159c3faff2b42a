package kubesource

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// GatewayAPI turns on the Gateway API source: Gateways of lbplane's GatewayClasses, their HTTPRoutes and
// ReferenceGrants become policies of ProxyGroup (see package gatewayapi), next to the LoadBalancerPolicies.
type GatewayAPI struct {
	// ProxyGroup serves every Gateway; Address is what its Envoys' Gateway listeners bind.
	ProxyGroup, Address string
	// Ports are the Envoy ports Gateway listeners are given.
	Ports []int32
	// ServiceNamespace is where each Gateway's Service is made (the Envoys' namespace); ServiceSelector
	// selects the Envoy pods. Without a selector, the Envoy Service's (EnvoyService) is used.
	ServiceNamespace string
	ServiceSelector  map[string]string
}

// gatewayState is the Gateway API source's part of the resync loop and of the status writer.
type gatewayState struct {
	// on: the CRDs are installed and the source runs; backendPolicies: the BackendLoadBalancerPolicy CRD too.
	on, backendPolicies bool
	mu                  sync.Mutex
	// out is the last translation; policies the policies handed to the engine, by key. Both are replaced
	// whole by each translation, never modified.
	out      *gatewayapi.Output
	policies map[types.NamespacedName]*v1alpha1.LoadBalancerPolicy
	// gens numbers the policies (gatewaygen.go).
	gens gatewayGenerations
}

// gatewayKinds are the Gateway API kinds watched.
var gatewayKinds = []client.Object{&gwv1.GatewayClass{}, &gwv1.Gateway{}, &gwv1.HTTPRoute{}, &gwv1.ReferenceGrant{}}

// ServiceLabelManaged marks the Services lbplane makes for Gateways, so that those of deleted Gateways are
// found and removed; ServiceAnnGateway names the Gateway (namespace/name) a Service is for.
const (
	ServiceLabelManaged = "gateway.lbplane.io/managed"
	ServiceAnnGateway   = "gateway.lbplane.io/gateway"
)

// startGatewayAPI watches the Gateway API kinds when their CRDs are installed; without them it logs why the
// source is off and lbplane serves LoadBalancerPolicies alone.
func (s *Source) startGatewayAPI() error {
	s.gw = &gatewayState{policies: map[types.NamespacedName]*v1alpha1.LoadBalancerPolicy{}}
	if s.GatewayAPI == nil {
		return nil
	}
	for _, k := range gatewayKinds {
		gvk, err := s.mgr.GetClient().GroupVersionKindFor(k)
		if err != nil {
			return err
		}
		if _, err := s.mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version); err != nil {
			s.Log.Warn("Gateway API is enabled but its CRDs are not installed (charts/lbplane/crds/gateway-api): Gateways are not served",
				"missing", gvk.String(), "error", err)
			return nil
		}
	}
	s.gw.on = true
	watched := append(slices.Clone(gatewayKinds), &corev1.Namespace{})
	if _, err := s.mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: v1alpha1.Group, Kind: "BackendLoadBalancerPolicy"}, v1alpha1.Version); err != nil {
		s.Log.Warn("the BackendLoadBalancerPolicy CRD is not installed (charts/lbplane/crds): the Services of Gateways are balanced with lbplane's defaults", "error", err)
	} else {
		s.gw.backendPolicies = true
		watched = append(watched, &v1alpha1.BackendLoadBalancerPolicy{})
	}
	for _, obj := range watched {
		inf, err := s.mgr.GetCache().GetInformer(context.Background(), obj)
		if err != nil {
			return err
		}
		kind := kindOf(obj)
		changed := func() {
			s.Metrics.SourceChange(metrics.SourceKubernetes, kind, 1)
			s.gatewayChanged()
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, initial bool) {
				if !initial {
					changed()
				}
			},
			UpdateFunc: func(old, cur any) {
				if specChanged(old, cur) {
					changed()
				}
			},
			DeleteFunc: func(any) { changed() },
		}); err != nil {
			return err
		}
	}
	return nil
}

// specChanged tells a change that can change what is served (generation, labels, an HTTPRoute's rollout
// annotations) from a status write.
func specChanged(old, cur any) bool {
	o, ok1 := old.(client.Object)
	c, ok2 := cur.(client.Object)
	if !ok1 || !ok2 {
		return true
	}
	if _, ns := cur.(*corev1.Namespace); ns {
		return !maps.Equal(o.GetLabels(), c.GetLabels())
	}
	if _, route := cur.(*gwv1.HTTPRoute); route {
		for _, a := range []string{gatewayapi.AnnotationRollout, apiwire.PausedAnnotation, apiwire.AbortAnnotation} {
			if o.GetAnnotations()[a] != c.GetAnnotations()[a] {
				return true
			}
		}
	}
	return o.GetGeneration() != c.GetGeneration() || (o.GetDeletionTimestamp() == nil) != (c.GetDeletionTimestamp() == nil)
}

// gatewayChanged makes the next resync translate the Gateway API objects again.
func (s *Source) gatewayChanged() {
	s.known.mu.Lock()
	s.known.pending.gateways = true
	s.known.mu.Unlock()
	s.poke()
}

// translateGateways lists the Gateway API objects and translates them; nil when the source is off or a
// list failed (then the last translation's policies are kept).
func (s *Source) translateGateways(ctx context.Context) *gatewayapi.Output {
	if s.gw == nil || !s.gw.on {
		return nil
	}
	c := s.mgr.GetCache()
	in := gatewayapi.Input{ProxyGroup: s.GatewayAPI.ProxyGroup, Address: s.GatewayAPI.Address, Ports: s.GatewayAPI.Ports,
		Namespaces: map[string]map[string]string{}, Services: map[types.NamespacedName][]int32{},
		PortNames: map[types.NamespacedName]map[int32]string{}}
	var namespaces []*corev1.Namespace
	var services []*corev1.Service
	err := errors.Join(cached(ctx, c, &in.Classes), cached(ctx, c, &in.Gateways), cached(ctx, c, &in.Routes),
		cached(ctx, c, &in.Grants), cached(ctx, c, &namespaces), cached(ctx, c, &services))
	if s.gw.backendPolicies {
		err = errors.Join(err, cached(ctx, c, &in.BackendPolicies))
	}
	if err != nil {
		s.Log.Error("listing Gateway API objects", "error", err)
		return nil
	}
	for _, ns := range namespaces {
		in.Namespaces[ns.Name] = ns.Labels
	}
	for _, svc := range services {
		in.AddService(svc)
	}
	in.Secret = func(name types.NamespacedName) string {
		return s.secret(ctx, translate.SecretRef(name)).Problem(translate.SecretRef(name))
	}
	s.gw.mu.Lock()
	in.Previous = s.gw.out
	s.gw.mu.Unlock()
	return gatewayapi.Translate(in)
}

// cached sets *out to the objects of T's kind in the informer cache, as the cache holds them: shared, not
// copied, and so never to be modified (the translation only reads). A List copies every object into its
// result, even without deep copies: 3 MB of HTTPRoutes at 3,000 routes, each time one route changes.
func cached[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c cache.Cache, out *[]PT) error {
	inf, err := c.GetInformer(ctx, PT(new(T)))
	if err != nil {
		return err
	}
	si, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return fmt.Errorf("the informer of %T keeps no store", new(T))
	}
	items := si.GetStore().List()
	*out = make([]PT, 0, len(items))
	for _, o := range items {
		if obj, ok := o.(PT); ok {
			*out = append(*out, obj)
		}
	}
	return nil
}

// gatewayPolicies returns the policies the Gateways became, leaving out a name a LoadBalancerPolicy already
// has. Given the last translation, the translation hands on every policy that did not change as the same
// pointer (the engine's translator then skips it).
func (s *Source) gatewayPolicies(ctx context.Context, taken func(types.NamespacedName) bool) []*v1alpha1.LoadBalancerPolicy {
	out := s.translateGateways(ctx)
	if out == nil {
		return slices.Collect(maps.Values(s.gw.policies))
	}
	next := map[types.NamespacedName]*v1alpha1.LoadBalancerPolicy{}
	var list []*v1alpha1.LoadBalancerPolicy
	for _, p := range out.Policies {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		if taken(key) {
			s.Log.Warn("a LoadBalancerPolicy has the name of a Gateway's policy; the Gateway's is not served", "policy", key.String())
			continue
		}
		list = append(list, p)
	}
	s.gw.mu.Lock()
	published := s.gw.policies
	s.gw.mu.Unlock()
	list = s.numberGateways(ctx, list, published)
	for _, p := range list {
		next[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	s.gw.mu.Lock()
	s.gw.out, s.gw.policies = out, next
	s.gw.mu.Unlock()
	trusted := make(map[objkey.Key]bool, len(next))
	for k := range next {
		trusted[k] = true
	}
	// Their references across namespaces were checked against ReferenceGrants by the translation.
	s.Engine.SetGatewayPolicies(trusted)
	return list
}

// updateGateways translates the Gateway API objects again into rd: the policies that moved (the translation
// hands on the others as the same pointers), those that are gone, and what they reference that is read anew.
// prev gets each changed policy's last version.
func (s *Source) updateGateways(ctx context.Context, rd *round, prev map[objkey.Key]*v1alpha1.LoadBalancerPolicy) {
	s.gw.mu.Lock()
	old := s.gw.policies
	s.gw.mu.Unlock()
	// A LoadBalancerPolicy's name is not a Gateway's: the known policy under it is not the Gateway's own.
	s.gatewayPolicies(ctx, func(k types.NamespacedName) bool { p := s.known.policies[k]; return p != nil && p != old[k] })
	s.gw.mu.Lock()
	cur := s.gw.policies
	s.gw.mu.Unlock()
	for k, p := range cur {
		if old[k] != p {
			prev[k] = old[k]
			s.known.setPolicy(rd, k, p)
		}
	}
	for k, p := range old {
		if _, ok := cur[k]; !ok {
			prev[k] = p
			s.known.setPolicy(rd, k, nil)
		}
	}
}

// gatewayServiceUsers lists the Gateway policies that reference the Service name.
func (s *Source) gatewayServiceUsers(name types.NamespacedName) []*v1alpha1.LoadBalancerPolicy {
	return s.gatewayPoliciesWith(func(p *v1alpha1.LoadBalancerPolicy) bool {
		return slices.ContainsFunc(serviceRefs(p), func(ref translate.ServiceRef) bool { return ref.Namespace == name.Namespace && ref.Name == name.Name })
	})
}

// gatewaySecretUsers lists the Gateway policies that reference the Secret name (HTTPS listeners'
// certificates).
func (s *Source) gatewaySecretUsers(name types.NamespacedName) []*v1alpha1.LoadBalancerPolicy {
	return s.gatewayPoliciesWith(func(p *v1alpha1.LoadBalancerPolicy) bool {
		return slices.Contains(translate.SecretRefs(p), translate.SecretRef(name))
	})
}

func (s *Source) gatewayPoliciesWith(match func(*v1alpha1.LoadBalancerPolicy) bool) []*v1alpha1.LoadBalancerPolicy {
	if s.gw == nil {
		return nil
	}
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	var out []*v1alpha1.LoadBalancerPolicy
	for _, p := range s.gw.policies {
		if match(p) {
			out = append(out, p)
		}
	}
	return out
}

// appliedHealth is what the Envoys report of each Service port a BackendLoadBalancerPolicy applies to,
// named after the port: the health and load of the cluster the Gateways' policies send to it through (one,
// shared by them all; see translate.shareClusters), read from the first of them that has a report.
func appliedHealth(res *translate.Result, health proxystats.Health, applied []gatewayapi.AppliedPort) []v1alpha1.BackendStatus {
	var out []v1alpha1.BackendStatus
	for _, ap := range applied {
		for _, pb := range ap.Backends {
			pr := res.Policies.Of(pb.Policy)
			if pr == nil {
				continue
			}
			i := slices.IndexFunc(pr.Clusters, func(c string) bool { name, ok := pr.BackendOf(c); return ok && name == pb.Backend })
			if i < 0 {
				continue
			}
			if b, ok := health.Backend(pr.ProxyGroup, pr.Clusters[i], ap.Name); ok {
				out = append(out, b)
				break
			}
		}
		if len(out) == maxBackendStatuses {
			break
		}
	}
	return out
}

// maxBackendStatuses is the CRD's bound on status.backends.
const maxBackendStatuses = 64

// routeParents is a route's status.parents with lbplane's entries replaced by ours: other controllers'
// entries are theirs and stay; each of our conditions keeps its transition time from lbplane's entry for the
// same parentRef while its status did not change.
func routeParents(old, ours []gwv1.RouteParentStatus, now metav1.Time) []gwv1.RouteParentStatus {
	return ourEntries(old, ours, now, func(p *gwv1.RouteParentStatus) (gwv1.GatewayController, any, *[]metav1.Condition) {
		return p.ControllerName, p.ParentRef, &p.Conditions
	})
}

// policyAncestors is a policy's status.ancestors with lbplane's entries replaced by ours, as routeParents
// does for a route's parents.
func policyAncestors(old, ours []gwv1.PolicyAncestorStatus, now metav1.Time) []gwv1.PolicyAncestorStatus {
	out := ourEntries(old, ours, now, func(a *gwv1.PolicyAncestorStatus) (gwv1.GatewayController, any, *[]metav1.Condition) {
		return a.ControllerName, a.AncestorRef, &a.Conditions
	})
	if out == nil {
		out = []gwv1.PolicyAncestorStatus{} // required in the schema
	}
	return out
}

// ourEntries replaces lbplane's entries of a status list (route parents, policy ancestors) by ours, keeping
// other controllers' entries and, per reference, each condition's transition time while its status stays.
// parts gives an entry's controller, its reference and its conditions.
func ourEntries[T any](old, ours []T, now metav1.Time, parts func(*T) (gwv1.GatewayController, any, *[]metav1.Condition)) []T {
	out := slices.DeleteFunc(slices.Clone(old), func(e T) bool { c, _, _ := parts(&e); return c == gatewayapi.ControllerName })
	for _, e := range ours {
		_, ref, conds := parts(&e)
		var prev []metav1.Condition
		for _, o := range old {
			if c, oref, oconds := parts(&o); c == gatewayapi.ControllerName && reflect.DeepEqual(oref, ref) {
				prev = *oconds
			}
		}
		*conds = mergeConditions(prev, *conds, now)
		out = append(out, e)
	}
	return out
}

// mergeConditions returns next with each condition's transition time kept from old when its status did not
// change, and now otherwise.
func mergeConditions(old, next []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, len(next))
	for i, c := range next {
		c.LastTransitionTime = now
		if o := meta.FindStatusCondition(old, c.Type); o != nil && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
		out[i] = c
	}
	return out
}

func equalStatus(a, b any) bool { return reflect.DeepEqual(a, b) }

// gatewayServiceName is the name of a Gateway's Service: in the Envoys' namespace, so it carries the
// Gateway's namespace and name, cut to fit with a hash.
func gatewayServiceName(key types.NamespacedName) string {
	base := fmt.Sprintf("gw-%s-%s", key.Namespace, key.Name)
	if len(base) > 50 {
		base = base[:50]
	}
	h := fnv.New32a()
	h.Write([]byte(key.String()))
	return strings.TrimRight(base, "-.") + "-" + fmt.Sprintf("%08x", h.Sum32())[:6]
}

// keepGatewayServices makes each Gateway's Service what it should be (ports: listener port → Envoy port),
// removes those of Gateways that are gone, and returns each Gateway's addresses (the Service's cluster IPs).
func (s *Source) keepGatewayServices(ctx context.Context, out *gatewayapi.Output) map[types.NamespacedName][]gwv1.GatewayStatusAddress {
	cfg := s.GatewayAPI
	addrs := map[types.NamespacedName][]gwv1.GatewayStatusAddress{}
	if cfg.ServiceNamespace == "" {
		return addrs
	}
	// Services are read from the cache, as every status tick does this: a write the cache has not seen yet
	// fails as AlreadyExists or Conflict, and the next tick does it again.
	c := s.mgr.GetCache()
	selector := cfg.ServiceSelector
	if len(selector) == 0 && s.EnvoyService.Name != "" {
		var es corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: s.EnvoyService.Namespace, Name: s.EnvoyService.Name}, &es); err == nil {
			selector = es.Spec.Selector
		}
	}
	if len(selector) == 0 {
		return addrs
	}
	cl := s.mgr.GetClient()
	wanted := map[string]bool{}
	for key, g := range out.Gateways {
		name := gatewayServiceName(key)
		wanted[name] = true
		want := corev1.ServiceSpec{Selector: selector, Type: corev1.ServiceTypeClusterIP}
		for _, p := range g.Ports {
			want.Ports = append(want.Ports, corev1.ServicePort{Name: p.Name, Port: p.Port, TargetPort: intstr.FromInt32(p.EnvoyPort),
				Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To(p.AppProtocol)})
		}
		if len(want.Ports) == 0 {
			continue
		}
		var svc corev1.Service
		err := c.Get(ctx, client.ObjectKey{Namespace: cfg.ServiceNamespace, Name: name}, &svc)
		switch {
		case apierrors.IsNotFound(err):
			svc = corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.ServiceNamespace, Name: name,
				Labels: map[string]string{ServiceLabelManaged: "true"}, Annotations: map[string]string{ServiceAnnGateway: key.String()}}, Spec: want}
			if err := cl.Create(ctx, &svc); err != nil {
				if !apierrors.IsAlreadyExists(err) {
					s.Log.Warn("creating a Gateway's Service", "gateway", key.String(), "error", err)
				}
				continue
			}
		case err != nil:
			continue
		case !reflect.DeepEqual(svc.Spec.Selector, want.Selector) || !sameTargets(svc.Spec.Ports, want.Ports):
			svc.Spec.Selector, svc.Spec.Ports = want.Selector, want.Ports
			if err := cl.Update(ctx, &svc); err != nil {
				if !apierrors.IsConflict(err) {
					s.Log.Warn("updating a Gateway's Service", "gateway", key.String(), "error", err)
				}
				continue
			}
		}
		var list []gwv1.GatewayStatusAddress
		ipType := gwv1.IPAddressType
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != "" && ip != corev1.ClusterIPNone {
				list = append(list, gwv1.GatewayStatusAddress{Type: &ipType, Value: ip})
			}
		}
		addrs[key] = list
	}
	var owned corev1.ServiceList
	if err := c.List(ctx, &owned, client.InNamespace(cfg.ServiceNamespace), client.MatchingLabels{ServiceLabelManaged: "true"}); err == nil {
		for i := range owned.Items {
			if !wanted[owned.Items[i].Name] {
				if err := cl.Delete(ctx, &owned.Items[i]); err != nil && !apierrors.IsNotFound(err) {
					s.Log.Warn("removing the Service of a Gateway that is gone", "service", owned.Items[i].Name, "error", err)
				}
			}
		}
	}
	return addrs
}

// sameTargets tells whether a Gateway's Service has the ports lbplane wants, the fields it sets (the API
// server fills in the others, such as nodePort): a listener that turns from HTTP to HTTPS changes only the
// port's appProtocol.
func sameTargets(have, want []corev1.ServicePort) bool {
	return slices.EqualFunc(have, want, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Port == y.Port && x.TargetPort == y.TargetPort && ptr.Equal(x.AppProtocol, y.AppProtocol)
	})
}

// serviceForGateways translates the Gateways again after a Service event that can change what they serve:
// a backendRef resolves only to a Service port that is there. old is nil for an addition or a removal.
func (s *Source) serviceForGateways(old, cur any) {
	if s.gw != nil && s.gw.on && servicePortsMoved(old, cur) {
		s.gatewayChanged()
	}
}

// secretForGateways translates the Gateways again after an event on a Secret an HTTPS listener names: whether
// it is there and holds a usable certificate decides the listener's ResolvedRefs.
func (s *Source) secretForGateways(o any) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	sec, ok := o.(*corev1.Secret)
	if !ok || s.gw == nil || !s.gw.on {
		return
	}
	s.gw.mu.Lock()
	named := s.gw.out != nil && s.gw.out.Secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}]
	s.gw.mu.Unlock()
	if named {
		s.gatewayChanged()
	}
}

// servicePortsMoved tells whether a Service event adds or removes a Service, or changes its ports' numbers
// or names (a BackendLoadBalancerPolicy's sectionName names a port): the translation reads nothing else of a
// Service (an update of its labels, annotations or status moves nothing).
func servicePortsMoved(old, cur any) bool {
	if t, ok := cur.(toolscache.DeletedFinalStateUnknown); ok {
		cur = t.Obj
	}
	c, ok := cur.(*corev1.Service)
	if !ok {
		return false
	}
	o, ok := old.(*corev1.Service)
	if !ok {
		return true
	}
	return !slices.EqualFunc(o.Spec.Ports, c.Spec.Ports, func(a, b corev1.ServicePort) bool { return a.Port == b.Port && a.Name == b.Name })
}
