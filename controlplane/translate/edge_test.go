package translate_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
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
		if r := res.Policies.Of(translate.KeyOf(p)); !r.Accepted {
			t.Errorf("%s: not accepted: %s", p.Name, r.AcceptedMessage)
		}
	}
	r := res.Policies.Of(translate.KeyOf(other))
	if r.Accepted || r.AcceptedReason != translate.ReasonConflicted || !strings.Contains(r.AcceptedMessage, "spec.listener: sets other limits, timeouts, http2, requests, proxyProtocol or rateLimit on port 8080 than policy default/owner") {
		t.Errorf("other: accepted %v, %s: %s", r.Accepted, r.AcceptedReason, r.AcceptedMessage)
	}
	if l := res.IR.Groups["default"].Listeners[0]; l.Edge.RequestHeadersTimeout != 2*time.Second {
		t.Errorf("the port's listener has request_headers_timeout %s, want the owner's 2s", l.Edge.RequestHeadersTimeout)
	}
}
