package translate_test

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// The engine translates a change incrementally and assembles each group from its previous assembly. What it
// publishes after every step must be what the test-only oracle gives: the whole set translated from scratch
// (translateAll), each group assembled from nothing. Message for message, and byte for byte once decoded.
func TestIncrementalBuildMatchesFullBuild(t *testing.T) {
	cache := xdscache.New()
	e := engine.New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := rand.New(rand.NewPCG(1, 2))
	var set []*v1alpha1.LoadBalancerPolicy
	for step := range 150 {
		i := r.IntN(40)
		name := fmt.Sprintf("p%d", i)
		idx := slices.IndexFunc(set, func(p *v1alpha1.LoadBalancerPolicy) bool { return p.Name == name })
		switch {
		case idx >= 0 && r.IntN(3) == 0:
			set = slices.Delete(set, idx, idx+1)
		case idx >= 0:
			set[idx] = hostedPolicy(name, int32(8080+r.IntN(3)), fmt.Sprintf("h%d.example.com", r.IntN(30)), int32(80+r.IntN(3)))
			set[idx].CreationTimestamp = createdAt(i)
			switch r.IntN(4) {
			case 0:
				// Sessions change the listener (its filter chain), not only the route table.
				set[idx].Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}},
					SessionPersistence: &v1alpha1.SessionPersistence{Type: v1alpha1.SessionHeader}}}
			case 1:
				// So does a rate limit: the connection manager lists its filter.
				set[idx].Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}},
					RateLimit: &v1alpha1.RateLimit{Requests: 10, Interval: &metav1.Duration{Duration: time.Second}}}}
			}
		default:
			p := hostedPolicy(name, int32(8080+r.IntN(3)), fmt.Sprintf("h%d.example.com", r.IntN(30)), int32(80+r.IntN(3)))
			p.CreationTimestamp = createdAt(i)
			set = append(set, p)
		}
		e.Set(engine.SourceStore, set)
		assertMatchesOracle(t, step, cache, set)
	}
}

// Ports that cross ir.ScopedRoutesAbove in both directions, take the scopes from one another (the lowest
// scopable port has them) or lose them to a wildcard host, are assembled piece by piece into what the
// oracle gives.
func TestIncrementalScopedRoutesMatchFullBuild(t *testing.T) {
	cache := xdscache.New()
	e := engine.New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
		p := hostedPolicy(fmt.Sprintf("p%d", i), int32(8080+i%2), fmt.Sprintf("h%d.example.com", i), 80)
		p.CreationTimestamp = createdAt(i % 60)
		set = append(set, p)
	}
	e.Set(engine.SourceStore, set)
	assertMatchesOracle(t, -1, cache, set)
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
				p := hostedPolicy(name, int32(8080+r.IntN(2)), host(), int32(80+r.IntN(3)))
				p.CreationTimestamp = createdAt(i % 60)
				if r.IntN(4) == 0 {
					p.Spec.Routes = []v1alpha1.Route{{Backends: []v1alpha1.BackendRef{{Name: "a"}},
						SessionPersistence: &v1alpha1.SessionPersistence{Type: v1alpha1.SessionHeader}}}
				}
				set[idx] = p
			default:
				p := hostedPolicy(name, int32(8080+r.IntN(2)), host(), 80)
				p.CreationTimestamp = createdAt(i % 60)
				set = append(set, p)
			}
		}
		res := e.Set(engine.SourceStore, set)
		assertMatchesOracle(t, step, cache, set)
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

// assertMatchesOracle checks that what the cache serves for every group is what the oracle gives for set:
// translateAll, then each group assembled from nothing.
func assertMatchesOracle(t *testing.T, step int, cache *xdscache.Cache, set []*v1alpha1.LoadBalancerPolicy) {
	t.Helper()
	oracle := translate.TranslateAll(set, translate.Refs{})
	for _, name := range slices.Sorted(maps.Keys(oracle.IR.Groups)) {
		want, err := xdsbuild.Build(oracle.IR.Groups[name])
		if err != nil {
			t.Fatalf("step %d: group %s: %v", step, name, err)
		}
		_, got := cache.State(name)
		if got == nil {
			t.Fatalf("step %d: group %s is not published", step, name)
		}
		for _, typ := range xdscache.Types {
			have := got.Resources(typ)
			if len(have) != len(want[typ]) {
				t.Fatalf("step %d: %d of %s, the oracle has %d", step, len(have), typ, len(want[typ]))
			}
			for k, m := range want[typ] {
				if !proto.Equal(m, have[k]) {
					t.Fatalf("step %d %s %s differs:\n%s", step, typ, cachev3.GetResourceName(m), cmp.Diff(m, have[k], protocmp.Transform()))
				}
				res, ok := got.Lookup(typ, cachev3.GetResourceName(m))
				if !ok {
					t.Fatalf("step %d: %s %s missing", step, typ, cachev3.GetResourceName(m))
				}
				decoded, err := anypb.UnmarshalNew(res.Any(), proto.UnmarshalOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(decoded, m) {
					t.Fatalf("step %d: %s %s: the bytes sent decode to something else", step, typ, cachev3.GetResourceName(m))
				}
			}
		}
		full, _ := xdscache.NewState(want)
		if full.Bytes != got.Bytes {
			t.Errorf("step %d: %d bytes, the oracle has %d", step, got.Bytes, full.Bytes)
		}
	}
}

// hostedPolicy is a policy on a shared port with its own hostname.
func hostedPolicy(name string, port int32, host string, epPort int32) *v1alpha1.LoadBalancerPolicy {
	return &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: port, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{host}},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: epPort}}}},
		},
	}
}

func createdAt(i int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
}
