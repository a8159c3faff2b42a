package engine

import (
	"io"
	"log/slog"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// A split serves the canaries the sources' policies and the other nodes the baseline's in place of the
// rolled-out ones: the other policies are the same resources, with the same versions, on both sides.
func TestSplitServesEachSideItsGeneration(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	still, old := policy("still", 8080), policy("moving", 8081)
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{still, old})
	before := cache.TargetFor("default", "canary")

	next := policy("moving", 8081)
	next.Spec.Backends[0].Endpoints[0].Port = 90
	e.SetSplit("default", &Split{Baseline: map[translate.Key]*v1alpha1.LoadBalancerPolicy{translate.KeyOf(old): old}, Canaries: map[string]bool{"canary": true}})
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{still, next})

	canary, other := cache.TargetFor("default", "canary"), cache.TargetFor("default", "other")
	if canary.Version == other.Version {
		t.Fatal("the canary and the other node are served the same config during a split")
	}
	if other.Version != before.Version {
		t.Error("the other node's config changed with the candidate")
	}
	if cache.Target("default") != canary {
		t.Error("the group's target is not the candidate")
	}
	endpoints := func(s *xdscache.State, name string) string {
		v, ok := s.ResourceVersion(resource.EndpointType, name)
		if !ok {
			t.Fatalf("no endpoints %s", name)
		}
		return v
	}
	if endpoints(canary, "default/still/a") != endpoints(other, "default/still/a") {
		t.Error("the policy that did not change differs between the two sides")
	}
	if endpoints(canary, "default/moving/a") == endpoints(other, "default/moving/a") {
		t.Error("the rolled-out policy is the same on both sides")
	}

	// A new policy in the baseline is absent (nil): the other nodes do not serve it.
	fresh := policy("fresh", 8082)
	e.SetSplit("default", &Split{Baseline: map[translate.Key]*v1alpha1.LoadBalancerPolicy{translate.KeyOf(old): old, translate.KeyOf(fresh): nil},
		Canaries: map[string]bool{"canary": true}})
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{still, next, fresh})
	if _, ok := cache.TargetFor("default", "other").ResourceVersion(resource.ClusterType, "default/fresh/a"); ok {
		t.Error("a new policy reached a node that is not a canary")
	}
	if _, ok := cache.TargetFor("default", "canary").ResourceVersion(resource.ClusterType, "default/fresh/a"); !ok {
		t.Error("a new policy did not reach the canary")
	}

	// The split ends: every node runs the candidate.
	e.SetSplit("default", nil)
	if cache.TargetFor("default", "other") != cache.TargetFor("default", "canary") {
		t.Error("after the split every node should run the candidate")
	}
}
