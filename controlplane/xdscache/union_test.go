package xdscache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// A publish that supersedes a staged one combines the next state with the staged union: whichever way it
// is built, the union holds every name of either state, the next state's entry where both have one, and its
// link meets the next state's lineage, so that a stream answered from it is then answered from the names
// changed (see unionAlongLineage). Whether the next state adds a name to the served one is found along the
// same lineages (addsAny).
func TestSupersededUnionHoldsBothAndMeetsTheLineage(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cur, err := NewState(nil)
	if err != nil {
		t.Fatal(err)
	}
	served := cur // what the group serves: a staged union while publishes supersede each other
	for step := range 300 {
		var c Change
		seen := map[string]bool{}
		for range 1 + r.IntN(5) {
			name := fmt.Sprintf("c%d", r.IntN(40))
			if seen[name] {
				continue
			}
			seen[name] = true
			if r.IntN(3) == 0 {
				c.Remove = map[string][]string{resource.ClusterType: append(c.Remove[resource.ClusterType], name)}
				continue
			}
			res, err := NewResource(resource.ClusterType, &clusterv3.Cluster{Name: name, AltStatName: fmt.Sprint(step)})
			if err != nil {
				t.Fatal(err)
			}
			if c.Put == nil {
				c.Put = map[string][]*Resource{}
			}
			c.Put[resource.ClusterType] = append(c.Put[resource.ClusterType], res)
		}
		next, err := cur.Derive(c)
		if err != nil {
			t.Fatal(err)
		}
		u := combine(map[string][]*State{resource.ClusterType: {next, served}})
		got, a, b := u.sets[resource.ClusterType], next.sets[resource.ClusterType], served.set(resource.ClusterType)
		want := map[string]*entry{}
		b.each(func(e *entry) bool { want[e.name] = e; return true })
		a.each(func(e *entry) bool { want[e.name] = e; return true })
		var sum uint64
		for _, e := range want {
			sum += e.sum
		}
		if got.len() != len(want) || got.sum != sum {
			t.Fatalf("step %d: the union holds %d entries (digest %x), want %d (%x)", step, got.len(), got.sum, len(want), sum)
		}
		got.each(func(e *entry) bool {
			if want[e.name] != e {
				t.Fatalf("step %d: the union's %q is not the next state's, or else the served one's", step, e.name)
			}
			return true
		})
		adds := false
		a.each(func(e *entry) bool {
			_, had := b.get(e.name)
			adds = !had
			return !adds
		})
		if got := addsAny(served, next, []string{resource.ClusterType}); got != adds {
			t.Fatalf("step %d: addsAny says %v, want %v", step, got, adds)
		}
		if _, ok := changedBetween(got.link, a.link); !ok {
			t.Fatalf("step %d: the union's lineage does not meet the next state's", step)
		}
		cur = next
		// Now and then the staged union is served on (the steps settled); otherwise the next publish
		// supersedes it.
		if r.IntN(4) == 0 {
			served = next
		} else {
			served = u
		}
	}
}
