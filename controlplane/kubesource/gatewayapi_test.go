package kubesource_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/kubesource"
)

// lbplane's entries of a route's status.parents are replaced, other controllers' kept, and a condition
// keeps its lastTransitionTime while its status stays (else every status tick would rewrite the route).
func TestRouteParentsKeepTransitionTimes(t *testing.T) {
	then, now := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)), metav1.NewTime(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	cond := func(typ string, st metav1.ConditionStatus, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: "R", Message: "m", LastTransitionTime: at}
	}
	gw, other := gwv1.ParentReference{Name: "gw"}, gwv1.ParentReference{Name: "gw2"}
	theirs := gwv1.RouteParentStatus{ControllerName: "example.com/other", ParentRef: gw, Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, then)}}
	old := []gwv1.RouteParentStatus{
		theirs,
		{ControllerName: gatewayapi.ControllerName, ParentRef: gw, Conditions: []metav1.Condition{
			cond("Accepted", metav1.ConditionTrue, then), cond("ResolvedRefs", metav1.ConditionTrue, then)}},
		{ControllerName: gatewayapi.ControllerName, ParentRef: other, Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, then)}},
	}
	ours := []gwv1.RouteParentStatus{
		{ControllerName: gatewayapi.ControllerName, ParentRef: gw, Conditions: []metav1.Condition{
			cond("Accepted", metav1.ConditionTrue, metav1.Time{}), cond("ResolvedRefs", metav1.ConditionFalse, metav1.Time{})}},
		{ControllerName: gatewayapi.ControllerName, ParentRef: gwv1.ParentReference{Name: "new"}, Conditions: []metav1.Condition{
			cond("Accepted", metav1.ConditionTrue, metav1.Time{})}},
	}
	got := kubesource.RouteParents(old, ours, now)
	if len(got) != 3 || got[0].ControllerName != "example.com/other" || !got[0].Conditions[0].LastTransitionTime.Equal(&then) {
		t.Fatalf("parents %+v, want the other controller's entry first and unchanged, then lbplane's two", got)
	}
	for _, c := range []struct {
		parent, typ string
		at          metav1.Time
	}{
		{"gw", "Accepted", then},    // unchanged status: the old time
		{"gw", "ResolvedRefs", now}, // True to False: now
		{"new", "Accepted", now},    // a new parent: now
	} {
		var found bool
		for _, p := range got[1:] {
			for _, pc := range p.Conditions {
				if string(p.ParentRef.Name) == c.parent && pc.Type == c.typ {
					found = true
					if !pc.LastTransitionTime.Equal(&c.at) {
						t.Errorf("%s %s: lastTransitionTime %v, want %v", c.parent, c.typ, pc.LastTransitionTime, c.at)
					}
				}
			}
		}
		if !found {
			t.Errorf("%s %s: no such condition in %+v", c.parent, c.typ, got)
		}
	}
	if again := kubesource.RouteParents(got, ours, metav1.NewTime(now.Add(time.Hour))); !reflect.DeepEqual(again, got) {
		t.Errorf("a second tick with nothing changed moved the status:\n%+v\nwant\n%+v", again, got)
	}
}

// A BackendLoadBalancerPolicy's status.ancestors: lbplane's entries replaced, another controller's kept, an
// unchanged condition's time kept; and an empty list, which the schema requires, when nothing is left.
func TestPolicyAncestors(t *testing.T) {
	then, now := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)), metav1.NewTime(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	accepted := func(at metav1.Time) []metav1.Condition {
		return []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: at}}
	}
	theirs := gwv1.PolicyAncestorStatus{ControllerName: "example.com/other", AncestorRef: gwv1.ParentReference{Name: "gw"}, Conditions: accepted(then)}
	old := []gwv1.PolicyAncestorStatus{theirs, {ControllerName: gatewayapi.ControllerName, AncestorRef: gwv1.ParentReference{Name: "gw"}, Conditions: accepted(then)},
		{ControllerName: gatewayapi.ControllerName, AncestorRef: gwv1.ParentReference{Name: "gone"}, Conditions: accepted(then)}}
	ours := []gwv1.PolicyAncestorStatus{{ControllerName: gatewayapi.ControllerName, AncestorRef: gwv1.ParentReference{Name: "gw"}, Conditions: accepted(metav1.Time{})}}
	got := kubesource.PolicyAncestors(old, ours, now)
	if len(got) != 2 || !reflect.DeepEqual(got[0], theirs) || got[1].AncestorRef.Name != "gw" || !got[1].Conditions[0].LastTransitionTime.Equal(&then) {
		t.Fatalf("ancestors %+v, want the other controller's entry, then lbplane's for gw with its old time", got)
	}
	if got := kubesource.PolicyAncestors(nil, nil, now); got == nil || len(got) != 0 {
		t.Errorf("no ancestors: %#v, want an empty list", got)
	}
}

// The Gateways are translated again when a Service comes, goes or changes its ports, not when anything else
// of it changes (each translation lists every Gateway API object, Namespace and Service).
func TestServicePortsMoved(t *testing.T) {
	svc := func(ports ...int32) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p})
		}
		return s
	}
	named := svc(80)
	named.Spec.Ports[0].Name = "http"
	relabelled := svc(80)
	relabelled.Labels = map[string]string{"x": "y"}
	relabelled.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	for _, tc := range []struct {
		name     string
		old, cur any
		want     bool
	}{
		{"added or removed", nil, svc(80), true},
		{"removed, final state unknown", nil, toolscache.DeletedFinalStateUnknown{Key: "apps/web", Obj: svc(80)}, true},
		{"a port added", svc(80), svc(80, 8080), true},
		{"a port changed", svc(80), svc(81), true},
		{"a port named (a policy's sectionName names it)", svc(80), named, true},
		{"labels and status changed", svc(80), relabelled, false},
		{"not a Service", nil, &discoveryv1.EndpointSlice{}, false},
	} {
		if got := kubesource.ServicePortsMoved(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A Gateway's Service is updated when a port's target or appProtocol moves (a listener turned from HTTP to
// HTTPS keeps its name, port and Envoy port), and not for what the API server fills in.
func TestSameTargets(t *testing.T) {
	port := func(app string, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Name: "web-443", Port: 443, TargetPort: intstr.FromInt32(20001), Protocol: corev1.ProtocolTCP, AppProtocol: &app, NodePort: nodePort}
	}
	want := []corev1.ServicePort{port("https", 0)}
	if !kubesource.SameTargets([]corev1.ServicePort{port("https", 31000)}, want) {
		t.Error("a node port the API server gave makes the Service differ")
	}
	if kubesource.SameTargets([]corev1.ServicePort{port("http", 0)}, want) {
		t.Error("appProtocol http is taken for https")
	}
}
