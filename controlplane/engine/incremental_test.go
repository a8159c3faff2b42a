package engine

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"
	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"google.golang.org/protobuf/types/known/anypb"
)

// hosted is a policy on a shared port with its own hostname.
func hosted(name string, port int32, host string, epPort int32) *v1alpha1.LoadBalancerPolicy {
	p := policy(name, port)
	p.Spec.Listener.Hostnames = []string{host}
	p.Spec.Backends[0].Endpoints[0].Port = epPort
	return p
}

// What the engine publishes, built piece by piece from the previous build, is what a full build of the same
// IR gives, message for message and byte for byte once decoded.
func TestIncrementalBuildMatchesFullBuild(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
			set[idx] = hosted(name, int32(8080+r.IntN(3)), fmt.Sprintf("h%d.example.com", r.IntN(30)), int32(80+r.IntN(3)))
			set[idx].CreationTimestamp = metav1Time(i)
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
			p := hosted(name, int32(8080+r.IntN(3)), fmt.Sprintf("h%d.example.com", r.IntN(30)), int32(80+r.IntN(3)))
			p.CreationTimestamp = metav1Time(i)
			set = append(set, p)
		}
		assertMatchesFullBuild(t, step, cache, e.Set(SourceStore, set))
	}
}

// assertMatchesFullBuild checks that what the cache serves for every group of res is what a full build gives.
func assertMatchesFullBuild(t *testing.T, step int, cache *xdscache.Cache, res *translate.Result) {
	t.Helper()
	for name, g := range res.IR.Groups {
		want, err := xdsbuild.Build(g)
		if err != nil {
			t.Fatal(err)
		}
		_, got := cache.State(name)
		for _, typ := range xdscache.Types {
			have := got.Resources(typ)
			if len(have) != len(want[typ]) {
				t.Fatalf("step %d: %d of %s, a full build has %d", step, len(have), typ, len(want[typ]))
			}
			for k, m := range want[typ] {
				if !proto.Equal(m, have[k]) {
					t.Fatalf("step %d %s %s differs:\n%s", step, typ, xdsName(m), cmp.Diff(m, have[k], protocmp.Transform()))
				}
			}
			for _, m := range want[typ] {
				r, ok := got.Lookup(typ, xdsName(m))
				if !ok {
					t.Fatalf("step %d: %s %s missing", step, typ, xdsName(m))
				}
				decoded, err := anypb.UnmarshalNew(r.Any(), proto.UnmarshalOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(decoded, m) {
					t.Fatalf("step %d: %s %s: the bytes sent decode to something else", step, typ, xdsName(m))
				}
			}
		}
		full, _ := xdscache.NewState(want)
		if full.Bytes != got.Bytes {
			t.Errorf("step %d: %d bytes, a full build has %d", step, got.Bytes, full.Bytes)
		}
	}
}

func metav1Time(i int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
}
