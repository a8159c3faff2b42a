package engine

import (
	"io"
	"log/slog"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
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
	e.SetSplit("default", &Split{Policies: map[objkey.Key]PolicySplit{objkey.Of(old): {Baseline: old, Canaries: map[string]bool{"canary": true}}}})
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
	e.SetSplit("default", &Split{Policies: map[objkey.Key]PolicySplit{objkey.Of(old): {Baseline: old, Canaries: map[string]bool{"canary": true}},
		objkey.Of(fresh): {Canaries: map[string]bool{"canary": true}}}})
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

// Two policies rolled out at once, each with its own canaries (prefixes of one order): a node that is a
// canary of one and not of the other runs a view with the first at its candidate and the second at its
// baseline, and the policies that did not change are the same resources on every view.
func TestSplitServesEachNodeItsView(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	still, oldA, oldB := policy("still", 8080), policy("a", 8081), policy("b", 8082)
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{still, oldA, oldB})
	newA, newB := policy("a", 8081), policy("b", 8082)
	newA.Spec.Backends[0].Endpoints[0].Port = 91
	newB.Spec.Backends[0].Endpoints[0].Port = 92
	// a: stage 2, canaries n1 and n2; b: stage 1, canary n1.
	e.SetSplit("default", &Split{Policies: map[objkey.Key]PolicySplit{
		objkey.Of(oldA): {Baseline: oldA, Canaries: map[string]bool{"n1": true, "n2": true}},
		objkey.Of(oldB): {Baseline: oldB, Canaries: map[string]bool{"n1": true}},
	}})
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{still, newA, newB})
	endpoints := func(node, name string) string {
		v, ok := cache.TargetFor("default", node).ResourceVersion(resource.EndpointType, name)
		if !ok {
			t.Fatalf("%s has no endpoints %s", node, name)
		}
		return v
	}
	if cache.TargetFor("default", "n1") != cache.Target("default") {
		t.Error("a canary of every policy does not run the candidate")
	}
	for _, tc := range []struct {
		node       string
		aNew, bNew bool
	}{{"n1", true, true}, {"n2", true, false}, {"n3", false, false}} {
		if got := endpoints(tc.node, "default/a/a") == endpoints("n1", "default/a/a"); got != tc.aNew {
			t.Errorf("%s runs policy a's candidate: %v, want %v", tc.node, got, tc.aNew)
		}
		if got := endpoints(tc.node, "default/b/a") == endpoints("n1", "default/b/a"); got != tc.bNew {
			t.Errorf("%s runs policy b's candidate: %v, want %v", tc.node, got, tc.bNew)
		}
		if endpoints(tc.node, "default/still/a") != endpoints("n1", "default/still/a") {
			t.Errorf("%s: the policy that did not change differs", tc.node)
		}
	}
	if endpoints("n3", "default/a/a") == endpoints("n1", "default/a/a") || endpoints("n3", "default/b/a") == endpoints("n1", "default/b/a") {
		t.Error("a node that is no canary runs a candidate")
	}
	if r := e.BaselineResult("default"); r == nil || r.Policies.Of(objkey.Of(oldA)) == nil {
		t.Error("no baseline translation of the split group")
	}
	// Policy b's rollout ends (it succeeded): n2 and n3 run its candidate too.
	e.SetSplit("default", &Split{Policies: map[objkey.Key]PolicySplit{
		objkey.Of(oldA): {Baseline: oldA, Canaries: map[string]bool{"n1": true, "n2": true}},
	}})
	if endpoints("n3", "default/b/a") != endpoints("n1", "default/b/a") || endpoints("n2", "default/b/a") != endpoints("n1", "default/b/a") {
		t.Error("after policy b's rollout ended, not every node runs its candidate")
	}
	if endpoints("n3", "default/a/a") == endpoints("n1", "default/a/a") {
		t.Error("the end of policy b's rollout moved policy a's")
	}
}

// Serving names the config each node is served and the generation of a policy it carries: the candidate's
// on a canary only once the sources hold it, the baseline's elsewhere, and the group's own after the split.
func TestServingTellsWhichGenerationEachNodeRuns(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	old := policy("moving", 8081)
	old.Generation = 1
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{old})
	k := objkey.Of(old)
	check := func(when, node string, want int64) {
		t.Helper()
		v, gen := e.Serving("default", node, k)
		if gen != want || v != cache.TargetFor("default", node).Version {
			t.Errorf("%s: %s is served version %s of generation %d; want the cache's %s of generation %d", when, node, v, gen,
				cache.TargetFor("default", node).Version, want)
		}
	}
	check("unsplit", "canary", 1)
	// Split before the sources hold the candidate (a push stages, then stores): the canary runs generation 1.
	e.SetSplit("default", &Split{Policies: map[objkey.Key]PolicySplit{k: {Baseline: old, Canaries: map[string]bool{"canary": true}}}})
	check("split, candidate not yet held", "canary", 1)
	next := policy("moving", 8081)
	next.Generation = 2
	next.Spec.Backends[0].Endpoints[0].Port = 90
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{next})
	check("split", "canary", 2)
	check("split", "other", 1)
	if _, gen := e.Serving("default", "canary", objkey.Key{Namespace: "default", Name: "absent"}); gen != 0 {
		t.Errorf("a policy the config does not carry has generation %d", gen)
	}
	e.SetSplit("default", nil)
	check("after the split", "other", 2)
}

// Built is what the Envoys run: the candidate during a stage, the baseline once no Envoy is a canary (a
// rollout rolled back), and the candidate again when the split ends.
func TestBuiltIsWhatTheEnvoysRun(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	old := policy("moving", 8081)
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{old})
	next := policy("moving", 8081)
	next.Spec.Backends[0].Endpoints[0].Port = 90
	port := func() uint32 {
		t.Helper()
		b, ok := e.Built("default", "default/moving/a")
		if !ok || b.Assignment == nil || len(b.Assignment.Endpoints) == 0 || len(b.Assignment.Endpoints[0].LbEndpoints) == 0 {
			t.Fatalf("built: %+v, %v", b, ok)
		}
		return b.Assignment.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
	}
	e.SetSplit("default", &Split{Policies: map[objkey.Key]PolicySplit{objkey.Of(old): {Baseline: old, Canaries: map[string]bool{"canary": true}}}})
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{next})
	if p := port(); p != 90 {
		t.Errorf("during a stage: port %d, want the candidate's 90", p)
	}
	e.SetSplit("default", &Split{Policies: map[objkey.Key]PolicySplit{objkey.Of(old): {Baseline: old}}})
	if p, want := port(), old.Spec.Backends[0].Endpoints[0].Port; p != uint32(want) {
		t.Errorf("rolled back: port %d, want the baseline's %d", p, want)
	}
	if e.BuiltState("default") != cache.TargetFor("default", "any") {
		t.Error("rolled back: the built state is not what an Envoy is served")
	}
	e.SetSplit("default", nil)
	if p := port(); p != 90 {
		t.Errorf("after the split: port %d, want the candidate's 90", p)
	}
}
