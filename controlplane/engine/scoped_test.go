package engine

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Ports that cross ir.ScopedRoutesAbove in both directions, take the scopes from one another (the lowest
// scopable port has them) or lose them to a wildcard host, are built piece by piece into what a full build
// gives.
func TestIncrementalScopedRoutesMatchFullBuild(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := rand.New(rand.NewPCG(3, 4))
	host := func() string {
		if r.IntN(40) == 0 {
			return "*.wild.example.com"
		}
		return fmt.Sprintf("h%d.example.com", r.IntN(400))
	}
	var set []*v1alpha1.LoadBalancerPolicy
	// Start just over the threshold on two ports, so that removals and additions move the scopes around.
	for i := range 210 {
		p := hosted(fmt.Sprintf("p%d", i), int32(8080+i%2), fmt.Sprintf("h%d.example.com", i), 80)
		p.CreationTimestamp = metav1Time(i % 60)
		set = append(set, p)
	}
	assertMatchesFullBuild(t, -1, cache, e.Set(SourceStore, set))
	scopedSeen := map[uint32]bool{}
	for step := range 120 {
		// Several edits per step, as a push of several documents makes.
		for range 1 + r.IntN(6) {
			i := r.IntN(240)
			name := fmt.Sprintf("p%d", i)
			idx := slices.IndexFunc(set, func(p *v1alpha1.LoadBalancerPolicy) bool { return p.Name == name })
			switch {
			case idx >= 0 && r.IntN(2) == 0:
				set = slices.Delete(set, idx, idx+1)
			case idx >= 0:
				p := hosted(name, int32(8080+r.IntN(2)), host(), int32(80+r.IntN(3)))
				p.CreationTimestamp = metav1Time(i % 60)
				if r.IntN(4) == 0 {
					p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}},
						SessionPersistence: &v1alpha1.SessionPersistence{Type: v1alpha1.SessionHeader}}}
				}
				set[idx] = p
			default:
				p := hosted(name, int32(8080+r.IntN(2)), host(), 80)
				p.CreationTimestamp = metav1Time(i % 60)
				set = append(set, p)
			}
		}
		res := e.Set(SourceStore, set)
		assertMatchesFullBuild(t, step, cache, res)
		for _, g := range res.IR.Groups {
			scopedSeen[g.ScopedPort()] = true
		}
	}
	// The walk must have visited each case: scopes on either port and on none.
	for _, port := range []uint32{0, 8080, 8081} {
		if !scopedSeen[port] {
			t.Errorf("no step had the scopes on port %d (0: none); the walk does not cover it", port)
		}
	}
}
