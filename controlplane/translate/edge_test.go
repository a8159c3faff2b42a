package translate_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// Policies on one port share one Envoy listener: a newer policy that sets other hardening is a conflict,
// one that sets none (or the same) joins the listener with the owner's.
func TestSharedPortEdgeSettings(t *testing.T) {
	mk := func(name, host string, age int, mutate func(*v1alpha1.Listener)) *v1alpha1.LoadBalancerPolicy {
		p := &v1alpha1.LoadBalancerPolicy{
			TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
				CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(age), 0))},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{host}},
				Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
			},
		}
		if mutate != nil {
			mutate(&p.Spec.Listener)
		}
		return p
	}
	short := func(l *v1alpha1.Listener) {
		l.Timeouts = &v1alpha1.ListenerTimeouts{RequestHeaders: &metav1.Duration{Duration: 2 * time.Second}}
	}
	owner := mk("owner", "a.example.com", 0, short)
	plain := mk("plain", "b.example.com", 1, nil)
	same := mk("same", "c.example.com", 2, short)
	other := mk("other", "d.example.com", 3, func(l *v1alpha1.Listener) { l.HTTP2 = &v1alpha1.ListenerHTTP2{Enabled: new(true)} })
	res := translate.Translate([]*v1alpha1.LoadBalancerPolicy{other, same, plain, owner}, translate.Refs{})
	for _, p := range []*v1alpha1.LoadBalancerPolicy{owner, plain, same} {
		if r := res.Policies.Of(objkey.Of(p)); !r.Accepted {
			t.Errorf("%s: not accepted: %s", p.Name, r.AcceptedMessage)
		}
	}
	r := res.Policies.Of(objkey.Of(other))
	if r.Accepted || r.AcceptedReason != translate.ReasonConflicted || !strings.Contains(r.AcceptedMessage, "spec.listener: sets other limits, timeouts, http2, requests, proxyProtocol, rateLimit or accessLog on port 8080 than policy default/owner") {
		t.Errorf("other: accepted %v, %s: %s", r.Accepted, r.AcceptedReason, r.AcceptedMessage)
	}
	if l := res.IR.Groups["default"].Listeners[0]; l.Edge.RequestHeadersTimeout != 2*time.Second {
		t.Errorf("the port's listener has request_headers_timeout %s, want the owner's 2s", l.Edge.RequestHeadersTimeout)
	}
}

// A listener logs as the policy that owns its port says, or as the server's default when that policy says
// nothing; the access log goes with the owner's settings, and a newer policy on the port that asks for
// another is refused as a conflict.
func TestAccessLogOfTheOwnerOrTheDefault(t *testing.T) {
	mk := func(name string, port int32, age int, a *v1alpha1.AccessLog) *v1alpha1.LoadBalancerPolicy {
		return &v1alpha1.LoadBalancerPolicy{
			TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
				CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(age), 0))},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: port, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{name + ".example.com"}, AccessLog: a},
				Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
			},
		}
	}
	def := ir.AccessLog{Format: ir.AccessLogJSON}
	policies := []*v1alpha1.LoadBalancerPolicy{
		mk("plain", 8080, 0, nil),
		mk("quiet", 8081, 0, &v1alpha1.AccessLog{Disabled: true}),
		mk("joins-quiet", 8081, 1, nil),
		mk("sampled", 8082, 0, &v1alpha1.AccessLog{Format: v1alpha1.AccessLogText, SamplePercent: new(0.0001)}),
		mk("asks-json", 8081, 2, &v1alpha1.AccessLog{}),
	}
	for _, tr := range []*translate.Translator{nil, translate.NewTranslator()} {
		var res *translate.Result
		if tr == nil {
			res = translate.Translate(policies, translate.Refs{AccessLog: def})
		} else {
			// Incrementally: the same once the ports are assembled from fragments.
			tr.Translate(policies[:1], translate.Refs{AccessLog: def})
			res = tr.Translate(policies, translate.Refs{AccessLog: def})
		}
		got := map[uint32]ir.AccessLog{}
		for _, l := range res.IR.Groups["default"].Listeners {
			got[l.Port] = l.AccessLog
		}
		want := map[uint32]ir.AccessLog{8080: def, 8081: {Format: ir.AccessLogOff}, 8082: {Format: ir.AccessLogText, SamplePerMillion: 1}}
		for port, w := range want {
			if got[port] != w {
				t.Errorf("port %d logs %+v, want %+v", port, got[port], w)
			}
		}
		if r := res.Policies.Of(objkey.Of(policies[2])); !r.Accepted {
			t.Errorf("a policy that says nothing of the access log is refused on a port whose log is off: %s", r.AcceptedMessage)
		}
		if r := res.Policies.Of(objkey.Of(policies[4])); r.Accepted || !strings.Contains(r.AcceptedMessage, "accessLog on port 8081 than policy default/quiet") {
			t.Errorf("a policy asking for a log on a port whose owner turned it off: accepted %v: %s", r.Accepted, r.AcceptedMessage)
		}
	}
}
