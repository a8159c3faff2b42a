package kubesource

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// The status of lbplane's GatewayClasses, Gateways, HTTPRoutes and BackendLoadBalancerPolicies is written by
// the status writer, in the same tick as the policies' and by the same rule (see statuswork.go): an object's
// status is computed only when its inputs changed since the writer last computed it. Those are its entry in
// the translation (compared with the last translation's when a new one comes), its object (an informer
// event: a spec change, or a status written by anyone), and for a Gateway the Programmed state of each of
// its policies (computed as a policy's own: only when its result, its group's proxies or their NACKs
// changed, or while it is pending) and its Service's addresses. A tick with nothing changed computes no
// status; it only makes sure each Gateway's Service is there, from the cache.

// The kinds whose status the writer writes besides LoadBalancerPolicy's.
const (
	kindClass         = "GatewayClass"
	kindGateway       = "Gateway"
	kindRoute         = "HTTPRoute"
	kindBackendPolicy = "BackendLoadBalancerPolicy"
)

// gatewayObject names one Gateway API object whose status the writer writes.
type gatewayObject struct {
	kind string
	key  types.NamespacedName
}

// gatewayStatus is what the status writer knows of the Gateway API objects' status.
type gatewayStatus struct {
	// out is the translation the last tick looked at; nil before the first, which computes everything.
	out *gatewayapi.Output
	// addresses are the Gateways' addresses the last tick found.
	addresses map[types.NamespacedName][]gwv1.GatewayStatusAddress
	events    gatewayEvents
	// todo holds the objects to compute on this tick; again those whose write was refused, for the next.
	todo, again map[gatewayObject]bool
	// loadWritten is when each BackendLoadBalancerPolicy's status last got fresh load figures (see limitLoad).
	loadWritten map[types.NamespacedName]time.Time
	// rollouts are the staged rollouts of the Gateways' policies, by policy, for their routes' status.
	rollouts map[objkey.Key]*gatewayRollout
}

// gatewayRollout is the rollout of one Gateway's policy as its HTTPRoutes' status tells it.
type gatewayRollout struct {
	status v1alpha1.RolloutStatus
	served gatewayapi.Served
	routes []types.NamespacedName
}

// gatewayEvents collects the Gateway API objects an informer event came for.
type gatewayEvents struct{ pendingKeys[gatewayObject] }

func (e *gatewayEvents) add(o any) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	var kind string
	switch o.(type) {
	case *gwv1.GatewayClass:
		kind = kindClass
	case *gwv1.Gateway:
		kind = kindGateway
	case *gwv1.HTTPRoute:
		kind = kindRoute
	case *v1alpha1.BackendLoadBalancerPolicy:
		kind = kindBackendPolicy
	default:
		return
	}
	e.put(gatewayObject{kind, client.ObjectKeyFromObject(o.(client.Object))})
}

// watchGateways subscribes the writer to the events of the Gateway API kinds whose status it writes.
func (w *statusWriter) watchGateways(ctx context.Context) error {
	kinds := []client.Object{&gwv1.GatewayClass{}, &gwv1.Gateway{}, &gwv1.HTTPRoute{}}
	if w.s.gw.backendPolicies {
		kinds = append(kinds, &v1alpha1.BackendLoadBalancerPolicy{})
	}
	for _, obj := range kinds {
		inf, err := w.s.mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    w.gw.events.add,
			UpdateFunc: func(_, cur any) { w.gw.events.add(cur) },
			DeleteFunc: w.gw.events.add,
		}); err != nil {
			return err
		}
	}
	return nil
}

// mark puts an object on this tick's list.
func (g *gatewayStatus) mark(kind string, key types.NamespacedName) {
	if g.todo == nil {
		g.todo = map[gatewayObject]bool{}
	}
	g.todo[gatewayObject{kind, key}] = true
}

// gatewayPolicy computes whether the Envoys run a Gateway's policy, as the policy's own Programmed
// condition would say, and puts its Gateway on the tick's list when that changed. gp is the policy handed
// to the engine, pr its result.
func (w *statusWriter) gatewayPolicy(gp *v1alpha1.LoadBalancerPolicy, st *policyState, pr *translate.PolicyResult, proxies []xdsserver.ProxyStatus, now metav1.Time) {
	computed(kindPolicy, pr.Key)
	w.gatewayRollout(gp, pr.Key)
	st.again, st.settled = false, false
	next := policystatus.Compute(pr, st.runs.view(proxies, pr), nil, now)
	ok, why, pending := false, "not programmed", false
	if c := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionProgrammed); c != nil {
		ok, why, pending = c.Status == metav1.ConditionTrue, c.Message, c.Reason == policystatus.ReasonPending
	}
	// Pending resolves by itself (the proxies acknowledge): look again on the next tick.
	st.again = pending
	st.settled = !pending && st.runs.covers(proxies, pr.ProxyGroup)
	if st.programmed != nil && st.programmed.ok == ok && st.programmed.why == why {
		return
	}
	st.programmed = &programmedState{ok: ok, why: why}
	if gw, ok := objkey.Parse(gp.Annotations[gatewayapi.AnnotationGateway]); ok {
		w.gw.mark(kindGateway, gw)
	}
}

// gatewayRollout notes the staged rollout of the Gateway's policy gp, and puts the HTTPRoutes it serves on
// the tick's list when it moved.
func (w *statusWriter) gatewayRollout(gp *v1alpha1.LoadBalancerPolicy, k objkey.Key) {
	if w.s.RolloutStatus == nil {
		return
	}
	ro := w.s.RolloutStatus(k)
	prev := w.gw.rollouts[k]
	if ro == nil && prev == nil {
		return
	}
	var next *gatewayRollout
	if ro != nil {
		served, _ := gatewayapi.ServedBy(gp)
		next = &gatewayRollout{status: *ro, served: served}
		rules, _ := gatewayapi.RulesOf(gp)
		for _, r := range rules {
			if key, ok := objkey.Parse(r.Route); ok && !slices.Contains(next.routes, key) {
				next.routes = append(next.routes, key)
			}
		}
		if prev != nil && reflect.DeepEqual(prev, next) {
			return
		}
	}
	if w.gw.rollouts == nil {
		w.gw.rollouts = map[objkey.Key]*gatewayRollout{}
	}
	for _, g := range []*gatewayRollout{prev, next} {
		if g != nil {
			for _, r := range g.routes {
				w.gw.mark(kindRoute, r)
			}
		}
	}
	if next == nil {
		delete(w.gw.rollouts, k)
		return
	}
	w.gw.rollouts[k] = next
}

// withRollouts adds to each of lbplane's parents of HTTPRoute key the condition RolledOut when a policy of
// that parent's Gateway that serves the route's rules has a staged rollout (see rolloutCondition). parents
// are the translation's, which are not modified.
func (g *gatewayStatus) withRollouts(key types.NamespacedName, generation int64, parents []gwv1.RouteParentStatus) []gwv1.RouteParentStatus {
	if len(g.rollouts) == 0 {
		return parents
	}
	var out []gwv1.RouteParentStatus
	for i, ps := range parents {
		gw := types.NamespacedName{Namespace: key.Namespace, Name: string(ps.ParentRef.Name)}
		if ps.ParentRef.Namespace != nil {
			gw.Namespace = string(*ps.ParentRef.Namespace)
		}
		var of []*gatewayRollout
		for _, ro := range g.rollouts {
			if ro.served.Gateway == gw && slices.Contains(ro.routes, key) {
				of = append(of, ro)
			}
		}
		if len(of) == 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(parents)
		}
		out[i].Conditions = append(slices.Clone(ps.Conditions), rolloutCondition(of, generation))
	}
	if out == nil {
		return parents
	}
	return out
}

// rolloutCondition is an HTTPRoute parent's RolledOut condition: True when the last change of every host
// name of the Gateway that serves its rules has reached every Envoy through its stages; else False, with the
// reason of the rollout furthest from that (RolledBack, Aborted, Paused, then Progressing), and each one's
// message.
func rolloutCondition(of []*gatewayRollout, generation int64) metav1.Condition {
	rank := map[string]int{v1alpha1.RolloutSucceeded: 0, v1alpha1.RolloutProgressing: 1, v1alpha1.RolloutPaused: 2, v1alpha1.RolloutAborted: 3,
		v1alpha1.RolloutRolledBack: 4}
	slices.SortFunc(of, func(a, b *gatewayRollout) int {
		return cmp.Or(cmp.Compare(a.served.Port, b.served.Port), cmp.Compare(a.served.Hostname, b.served.Hostname))
	})
	reason := v1alpha1.RolloutSucceeded
	var msgs []string
	for _, ro := range of {
		if rank[ro.status.Phase] > rank[reason] {
			reason = ro.status.Phase
		}
		host := ro.served.Hostname
		if host == "" {
			host = "every host name"
		}
		m := fmt.Sprintf("%s on port %d: %s at stage %d of %d", host, ro.served.Port, ro.status.Phase, ro.status.Stage, ro.status.Stages)
		if ro.status.Message != "" {
			m += ": " + ro.status.Message
		}
		msgs = append(msgs, m)
	}
	st := metav1.ConditionFalse
	if reason == v1alpha1.RolloutSucceeded {
		st = metav1.ConditionTrue
	}
	msg := strings.Join(msgs, "; ")
	if len(msg) > maxConditionMessage {
		msg = msg[:maxConditionMessage-3] + "..."
	}
	return metav1.Condition{Type: gatewayapi.RouteConditionRolledOut, Status: st, Reason: reason, Message: msg, ObservedGeneration: generation}
}

// maxConditionMessage is the longest message a condition may have (metav1.Condition's schema).
const maxConditionMessage = 32768

// programmedState is whether the Envoys run a Gateway's policy, and why not.
type programmedState struct {
	ok  bool
	why string
}

// gatewayTick writes the status of the Gateway API objects whose inputs changed: the objects on the tick's
// list (their Gateway's policies changed Programmed state, see gatewayPolicy), those an event came for,
// those whose entry in the translation changed, those whose write was refused, and the
// BackendLoadBalancerPolicies when the health of a cluster moved (healthMoved). It keeps each Gateway's
// Service on every tick.
func (w *statusWriter) gatewayTick(ctx context.Context, res *translate.Result, health proxystats.Health, healthMoved bool, now metav1.Time) {
	s := w.s
	s.gw.mu.Lock()
	out := s.gw.out
	s.gw.mu.Unlock()
	g := &w.gw
	todo := g.todo
	g.todo = nil
	if out == nil {
		return
	}
	if todo == nil {
		todo = map[gatewayObject]bool{}
	}
	for o := range g.events.take() {
		todo[o] = true
	}
	for o := range g.again {
		todo[o] = true
	}
	g.again = nil
	prev := g.out
	var gone []types.NamespacedName // routes with a parent of lbplane's before, none now
	if out != prev {
		changedKeys(todo, kindClass, prev, out, func(o *gatewayapi.Output) map[string]gwv1.GatewayClassStatus { return o.Classes }, className)
		changedKeys(todo, kindGateway, prev, out, func(o *gatewayapi.Output) map[types.NamespacedName]*gatewayapi.Gateway { return o.Gateways }, sameKey)
		changedKeys(todo, kindRoute, prev, out, func(o *gatewayapi.Output) map[types.NamespacedName][]gwv1.RouteParentStatus { return o.Routes }, sameKey)
		changedKeys(todo, kindBackendPolicy, prev, out, func(o *gatewayapi.Output) map[types.NamespacedName]*gatewayapi.BackendPolicy {
			return o.BackendPolicies
		}, sameKey)
		if prev != nil {
			for key := range prev.Routes {
				if _, ok := out.Routes[key]; !ok {
					gone = append(gone, key)
				}
			}
		}
		g.out = out
	}
	if healthMoved {
		for key, st := range out.BackendPolicies {
			if len(st.Applied) > 0 {
				todo[gatewayObject{kindBackendPolicy, key}] = true
			}
		}
	}
	addresses := s.keepGatewayServices(ctx, out)
	for key := range out.Gateways {
		if prev == nil || !reflect.DeepEqual(addresses[key], g.addresses[key]) {
			todo[gatewayObject{kindGateway, key}] = true
		}
	}
	g.addresses = addresses

	cl := s.mgr.GetClient()
	c := s.mgr.GetCache()
	write := func(kind string, obj client.Object) {
		if err := cl.Status().Update(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			// A conflict (someone changed the object) is tried again on the next tick.
			if g.again == nil {
				g.again = map[gatewayObject]bool{}
			}
			g.again[gatewayObject{kind, client.ObjectKeyFromObject(obj)}] = true
			if !apierrors.IsConflict(err) {
				s.Log.Warn("writing Gateway API status", "kind", kind, "object", client.ObjectKeyFromObject(obj).String(), "error", err)
			}
		}
	}
	for o := range todo {
		switch o.kind {
		case kindClass:
			st, ok := out.Classes[o.key.Name]
			var gc gwv1.GatewayClass
			if !ok || c.Get(ctx, o.key, &gc) != nil {
				continue
			}
			computed(kindClass, o.key)
			next := gc.Status
			next.Conditions = mergeConditions(gc.Status.Conditions, st.Conditions, now)
			next.SupportedFeatures = st.SupportedFeatures
			if !equalStatus(gc.Status, next) {
				gc.Status = next
				write(kindClass, &gc)
			}
		case kindGateway:
			gst := out.Gateways[o.key]
			var gw gwv1.Gateway
			if gst == nil || c.Get(ctx, o.key, &gw) != nil {
				continue
			}
			computed(kindGateway, o.key)
			next := gst.Programmed(w.gatewayPolicyProgrammed, addresses[o.key])
			next.Conditions = mergeConditions(gw.Status.Conditions, next.Conditions, now)
			for i := range next.Listeners {
				var old []metav1.Condition
				for _, ol := range gw.Status.Listeners {
					if ol.Name == next.Listeners[i].Name {
						old = ol.Conditions
					}
				}
				next.Listeners[i].Conditions = mergeConditions(old, next.Listeners[i].Conditions, now)
			}
			if !equalStatus(gw.Status, next) {
				gw.Status = next
				write(kindGateway, &gw)
			}
		case kindRoute:
			parents, ours := out.Routes[o.key]
			// Read without a copy: only a route whose status changes is copied, for the write.
			var r gwv1.HTTPRoute
			if c.Get(ctx, o.key, &r, client.UnsafeDisableDeepCopy) != nil {
				continue
			}
			if !ours {
				w.dropStaleParents(&r, now, write)
				continue
			}
			computed(kindRoute, o.key)
			next := r.Status
			next.Parents = routeParents(r.Status.Parents, g.withRollouts(o.key, r.Generation, parents), now)
			if !equalStatus(r.Status, next) {
				u := r.DeepCopy()
				u.Status = *next.DeepCopy()
				write(kindRoute, u)
			}
		case kindBackendPolicy:
			st := out.BackendPolicies[o.key]
			var p v1alpha1.BackendLoadBalancerPolicy
			if st == nil || c.Get(ctx, o.key, &p) != nil {
				continue
			}
			computed(kindBackendPolicy, o.key)
			next := *p.Status.DeepCopy()
			next.Ancestors = policyAncestors(p.Status.Ancestors, st.Ancestors, now)
			next.Backends = appliedHealth(res, health, st.Applied)
			fresh := !limitLoad(next.Backends, p.Status.Backends, g.loadWritten[o.key], now.Time, s.LoadStatusInterval)
			if !equalStatus(p.Status, next) {
				p.Status = next
				write(kindBackendPolicy, &p)
				if fresh && !g.again[o] {
					if g.loadWritten == nil {
						g.loadWritten = map[types.NamespacedName]time.Time{}
					}
					g.loadWritten[o.key] = now.Time
				}
			}
		}
	}
	// Routes that left lbplane's Gateways: lbplane's entries go from their status. Before the first tick,
	// every route is looked at.
	if prev == nil {
		var all gwv1.HTTPRouteList
		if err := c.List(ctx, &all, client.UnsafeDisableDeepCopy); err == nil {
			for i := range all.Items {
				if _, ours := out.Routes[client.ObjectKeyFromObject(&all.Items[i])]; !ours {
					w.dropStaleParents(&all.Items[i], now, write)
				}
			}
		}
	}
	for _, key := range gone {
		var r gwv1.HTTPRoute
		if _, ours := out.Routes[key]; !ours && !todo[gatewayObject{kindRoute, key}] && c.Get(ctx, key, &r, client.UnsafeDisableDeepCopy) == nil {
			w.dropStaleParents(&r, now, write)
		}
	}
	for k := range g.loadWritten {
		if out.BackendPolicies[k] == nil {
			delete(g.loadWritten, k)
		}
	}
}

// gatewayPolicyProgrammed tells whether the Envoys run the Gateway's policy k, as gatewayPolicy last found.
func (w *statusWriter) gatewayPolicyProgrammed(k types.NamespacedName) (bool, string) {
	st := w.policies[k]
	if st == nil || st.programmed == nil {
		return false, "not translated yet"
	}
	return st.programmed.ok, st.programmed.why
}

// dropStaleParents removes lbplane's entries from the status of an HTTPRoute that no longer has a parent of
// lbplane's (its parentRefs changed, or its Gateways are gone or of another class): what was written of a
// parent it left is not true any more. Other controllers' entries stay. r is the cache's object: it is
// copied before it is changed.
func (w *statusWriter) dropStaleParents(r *gwv1.HTTPRoute, now metav1.Time, write func(string, client.Object)) {
	if !slices.ContainsFunc(r.Status.Parents, func(p gwv1.RouteParentStatus) bool { return p.ControllerName == gatewayapi.ControllerName }) {
		return
	}
	computed(kindRoute, client.ObjectKeyFromObject(r))
	r = r.DeepCopy()
	r.Status.Parents = routeParents(r.Status.Parents, nil, now)
	if r.Status.Parents == nil {
		r.Status.Parents = []gwv1.RouteParentStatus{} // required in the schema
	}
	write(kindRoute, r)
}

// changedKeys puts into todo the objects of kind whose entry (of the map entries gives, by a key that name
// turns into the object's) differs between prev and out, or is new; nil prev: every one of out.
func changedKeys[K comparable, V any](todo map[gatewayObject]bool, kind string, prev, out *gatewayapi.Output,
	entries func(*gatewayapi.Output) map[K]V, name func(K) types.NamespacedName) {
	cur := entries(out)
	var old map[K]V
	if prev != nil {
		old = entries(prev)
	}
	for key, v := range cur {
		if o, ok := old[key]; !ok || !(identical(o, v) || reflect.DeepEqual(o, v)) {
			todo[gatewayObject{kind, name(key)}] = true
		}
	}
}

// identical says whether a and b are the same pointer or slice (the same backing array and length): an
// entry the translation handed on from the previous one (a route's parent statuses, see
// gatewayapi.Translate), which is not compared field by field.
func identical(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	switch va.Kind() {
	case reflect.Pointer:
		return va.Pointer() == vb.Pointer()
	case reflect.Slice:
		return va.Len() == vb.Len() && (va.Len() == 0 || va.Pointer() == vb.Pointer())
	}
	return false
}

// sameKey is the key of an object named with a namespace; className the key of a GatewayClass, named
// without one.
func sameKey(k types.NamespacedName) types.NamespacedName { return k }
func className(n string) types.NamespacedName             { return types.NamespacedName{Name: n} }
