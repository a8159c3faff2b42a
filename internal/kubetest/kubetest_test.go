package kubetest_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/kubetest"
)

func TestAPIServerServesTheCRDWithValidation(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	p := &v1alpha1.LoadBalancerPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: "default"},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
		},
	}
	if err := c.Client.Create(ctx, p); err != nil {
		t.Fatalf("a valid policy was refused: %v", err)
	}
	bad := p.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "bad", Namespace: "default"}
	bad.Spec.Backends[0].LoadBalancing.Algorithm = "RoundRobn"
	err := c.Client.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "spec.backends[0].loadBalancing.algorithm") || !strings.Contains(err.Error(), "RoundRobn") {
		t.Fatalf("the API server accepted or badly refused a misspelled algorithm: %v", err)
	}
	t.Logf("refused: %v", err)
}

func TestAPIServerAppliesCrossFieldRules(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	base := func(name string) *v1alpha1.LoadBalancerPolicy {
		return &v1alpha1.LoadBalancerPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
				Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(p *v1alpha1.LoadBalancerPolicy)
		want   string
	}{
		{"slow-start-hash", func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev, SlowStart: &v1alpha1.SlowStart{Window: metav1.Duration{Duration: 1e9}}}
		}, "slowStart is only allowed with algorithm RoundRobin or LeastRequest"},
		{"cookie-no-name", func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmRingHash, HashKeys: []v1alpha1.HashKey{{Cookie: &v1alpha1.CookieHashKey{}}}}
		}, "spec.backends[0].loadBalancing.hashKeys[0].cookie.name"},
		{"two-hash-inputs", func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmRingHash,
				HashKeys: []v1alpha1.HashKey{{SourceIP: &v1alpha1.SourceIPHashKey{}, Header: &v1alpha1.HeaderHashKey{Name: "x"}}}}
		}, "set exactly one of header, cookie, sourceIP, queryParameter, path and host"},
		{"https-without-tls", func(p *v1alpha1.LoadBalancerPolicy) { p.Spec.Listener.Protocol = v1alpha1.ProtocolHTTPS },
			"tls is required with protocol HTTPS"},
		{"endpoints-and-service", func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].Service = &v1alpha1.ServiceRef{Name: "web", Port: 80}
		},
			"set either endpoints or service"},
		{"port", func(p *v1alpha1.LoadBalancerPolicy) { p.Spec.Listener.Port = 70000 }, "spec.listener.port"},
		{"zone-aware-maglev", func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{Algorithm: v1alpha1.AlgorithmMaglev, ZoneAware: &v1alpha1.ZoneAware{}}
		}, "zoneAware is only allowed with algorithm RoundRobin, LeastRequest or Random"},
		{"zone-aware-failover", func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{ZoneAware: &v1alpha1.ZoneAware{}, ZoneFailover: []string{"a"}}
		}, "zoneAware is not allowed with zoneFailover"},
		{"zone-weights-aware", func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Backends[0].LoadBalancing = v1alpha1.LoadBalancing{ZoneAware: &v1alpha1.ZoneAware{}, ZoneWeights: []v1alpha1.ZoneWeight{{Zone: "a", Weight: 1}}}
		}, "zoneWeights is not allowed with zoneAware, zoneFailover or algorithm BackendUtilization"},
	} {
		p := base(tc.name)
		tc.mutate(p)
		err := c.Client.Create(ctx, p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal naming %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}
