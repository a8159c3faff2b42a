package translate_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
)

func pol(name string, created time.Time) *v1alpha1.LoadBalancerPolicy {
	return &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 80, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
		},
	}
}

// The older policy wins a conflict even when both were created within the same second.
func TestOlderWinsWithinOneSecond(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older, newer := pol("zz-older", base.Add(100*time.Millisecond)), pol("aa-newer", base.Add(900*time.Millisecond))
	for _, order := range [][]*v1alpha1.LoadBalancerPolicy{{older, newer}, {newer, older}} {
		res := translate.Translate(order, nil)
		o, n := res.Policies[translate.KeyOf(older)], res.Policies[translate.KeyOf(newer)]
		if !o.Accepted || n.Accepted || !strings.Contains(n.AcceptedMessage, "already served by policy default/zz-older") {
			t.Errorf("older accepted=%v, newer accepted=%v (%s)", o.Accepted, n.Accepted, n.AcceptedMessage)
		}
	}
}

func TestTranslateDoesNotModifyItsInput(t *testing.T) {
	p := pol("a", time.Now())
	before := p.Spec.Listener.Address
	translate.Translate([]*v1alpha1.LoadBalancerPolicy{p}, nil)
	if p.Namespace != "" || p.Spec.Listener.Address != before || p.Spec.ProxyGroup != "" {
		t.Error("translate changed its input")
	}
}
