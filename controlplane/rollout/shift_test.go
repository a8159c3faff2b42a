package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func w(v int32) *int32 { return &v }

func TestShift(t *testing.T) {
	backend := func(name string) v1alpha1.Backend {
		return v1alpha1.Backend{Name: name, Endpoints: []v1alpha1.Endpoint{{Address: "198.51.100.1", Port: 80}}}
	}
	base := &v1alpha1.LoadBalancerPolicy{Spec: v1alpha1.LoadBalancerPolicySpec{
		Routes:   []v1alpha1.Route{{Name: "r", Backends: []v1alpha1.BackendRef{{Name: "a", Weight: w(3)}, {Name: "b"}}}, {Name: "other", Backends: []v1alpha1.BackendRef{{Name: "a"}}}},
		Backends: []v1alpha1.Backend{backend("a"), backend("b")},
	}}
	// The candidate sends route r to the new backend alone and drops b.
	cand := &v1alpha1.LoadBalancerPolicy{Spec: v1alpha1.LoadBalancerPolicySpec{
		Routes:   []v1alpha1.Route{{Name: "r", Backends: []v1alpha1.BackendRef{{Name: "new"}}}, {Name: "other", Backends: []v1alpha1.BackendRef{{Name: "a"}}}, {Name: "added", Backends: []v1alpha1.BackendRef{{Name: "new"}}}},
		Backends: []v1alpha1.Backend{backend("a"), backend("new")},
	}}
	got := Shift(cand, base, "new", 20)
	want := []v1alpha1.BackendRef{{Name: "new", Weight: w(200)}, {Name: "a", Weight: w(600)}, {Name: "b", Weight: w(200)}}
	if diff := cmp.Diff(want, got.Spec.Routes[0].Backends); diff != "" {
		t.Errorf("route r at 20 %% (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cand.Spec.Routes[1:], got.Spec.Routes[1:]); diff != "" {
		t.Errorf("routes without the backend, or new ones, changed (-want +got):\n%s", diff)
	}
	if len(got.Spec.Backends) != 3 || got.Spec.Backends[2].Name != "b" {
		t.Errorf("the dropped backend b is not put back: %v", got.Spec.Backends)
	}
	if len(cand.Spec.Backends) != 2 || len(cand.Spec.Routes[0].Backends) != 1 {
		t.Error("Shift changed the candidate")
	}
	if diff := cmp.Diff([]string{"a", "b"}, alongside(got, "new")); diff != "" {
		t.Errorf("alongside (-want +got):\n%s", diff)
	}
	if got := Shift(cand, nil, "new", 20); !cmp.Equal(got.Spec, cand.Spec) {
		t.Error("a new policy (no baseline) is shifted")
	}
}
