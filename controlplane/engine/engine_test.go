package engine

import (
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

func policy(name string, port int32) *v1alpha1.LoadBalancerPolicy {
	return &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(time.Now())},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: port, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}}},
		},
	}
}

func TestCommitPublishesThePlanOrTranslatesAgainWhenStale(t *testing.T) {
	e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	a, b := policy("a", 8080), policy("b", 8081)

	planned := e.Plan(SourceStore, []*v1alpha1.LoadBalancerPolicy{a})
	if got := e.Commit(planned); got != planned.Result {
		t.Fatal("nothing changed since the plan, yet Commit translated again")
	}
	if res, _ := e.Result(); res.Policies.Of(objkey.Of(a)) == nil {
		t.Fatal("the committed policy is not in the engine's result")
	}

	// Another source changes between the plan and its commit: the plan no longer holds everything.
	planned = e.Plan(SourceStore, []*v1alpha1.LoadBalancerPolicy{a, policy("c", 8082)})
	e.Set(SourceConfigDir, []*v1alpha1.LoadBalancerPolicy{b})
	got := e.Commit(planned)
	if got == planned.Result {
		t.Fatal("a stale plan was published as it was")
	}
	for _, p := range []string{"a", "b", "c"} {
		if got.Policies.Of(objkey.Key{Namespace: "default", Name: p}) == nil {
			t.Errorf("policy %s missing after committing a stale plan", p)
		}
	}
}

// hosted is a policy on a shared port with its own hostname.
func hosted(name string, port int32, host string, epPort int32) *v1alpha1.LoadBalancerPolicy {
	p := policy(name, port)
	p.Spec.Listener.Hostnames = []string{host}
	p.Spec.Backends[0].Endpoints[0].Port = epPort
	return p
}

func metav1Time(i int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
}
