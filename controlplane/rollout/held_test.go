package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// A change the sources already hold whose rollout cannot start (a traffic shift while a staged rollout of
// the policy is under way) is held: the canaries keep the candidate under way, the others its baseline, no
// Envoy gets the held change; status says why; once the rollout under way ends, it starts.
func TestAChangeThatCannotBeStagedIsHeldFromEveryEnvoy(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3")
	f.push("a", 80, nil)
	f.push("a", 81, nil) // staged: two canaries run generation 2
	k := objkey.Key{Namespace: "default", Name: "a"}
	st := f.status("a")
	if len(st.Canaries) != 2 {
		t.Fatalf("generation 2's rollout: %+v", st)
	}
	endpoints := func(node string) string {
		v, ok := f.cache.TargetFor("default", node).ResourceVersion(resource.EndpointType, "default/a/app")
		if !ok {
			t.Fatalf("%s has no endpoints of a", node)
		}
		return v
	}
	before := map[string]string{}
	for _, n := range []string{"n1", "n2", "n3"} {
		before[n] = endpoints(n)
	}

	// Generation 3, a traffic shift, is applied: the sources hold it whatever happens.
	three := spec("a", 3, 82)
	three.Spec.Rollout = &v1alpha1.Rollout{TrafficShift: &v1alpha1.TrafficShift{Backend: "app", Steps: []int32{50}}}
	ch := Change{Key: k, Group: "default", Old: record(f.policies["a"]), New: record(three), Generation: 3, Rollout: three.Spec.Rollout}
	if err := f.c.Stage([]Change{ch}); err == nil || !strings.Contains(err.Error(), "staged rollout of default/a is under way") {
		t.Fatalf("a traffic shift during a staged rollout started: %v", err)
	}
	f.policies["a"] = three
	f.eng.Set(engine.SourceStore, []*v1alpha1.LoadBalancerPolicy{three})
	for _, n := range []string{"n1", "n2", "n3"} {
		if got := endpoints(n); got != before[n] {
			t.Errorf("%s (canary %v) runs %s, ran %s before the held change", n, slices.Contains(st.Canaries, n), got, before[n])
		}
	}
	held := f.status("a")
	if held.CandidateGeneration != 2 || !strings.Contains(held.Message, "generation 3 is held") || !strings.Contains(held.Message, "under way") {
		t.Errorf("status while generation 3 is held: %+v", held)
	}
	// Still held while the rollout under way goes on.
	f.c.step(time.Now().Add(2 * time.Second))
	if got := f.status("a"); got.CandidateGeneration != 2 {
		t.Fatalf("generation 3 started while generation 2's rollout is under way: %+v", got)
	}

	// The rollout under way is aborted: the held change starts, as a traffic shift from the baseline.
	if err := f.c.Action(k, "abort"); err != nil {
		t.Fatal(err)
	}
	f.c.step(time.Now().Add(4 * time.Second))
	got := f.status("a")
	if got.CandidateGeneration != 3 || got.Phase != v1alpha1.RolloutProgressing || got.TrafficBackend != "app" || got.BaselineGeneration != 1 ||
		strings.Contains(got.Message, "held") {
		t.Errorf("after the rollout under way ended: %+v", got)
	}
}
