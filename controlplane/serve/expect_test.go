package serve

import (
	"io"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// examplePolicies reads the policies of examples/NAME for each name.
func examplePolicies(t *testing.T, names ...string) []*v1alpha1.LoadBalancerPolicy {
	t.Helper()
	var out []*v1alpha1.LoadBalancerPolicy
	for _, name := range names {
		docs, err := manifest.ReadPath("../../examples/"+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, manifest.Policies(docs)...)
	}
	return out
}

// exampleEngine is an engine serving the examples names from the store, their loopback backends allowed (as
// the demo allows them).
func exampleEngine(t *testing.T, names ...string) *engine.Engine {
	t.Helper()
	eng := engine.New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	eng.Reach = reach.Loopback
	eng.Set(engine.SourceStore, examplePolicies(t, names...))
	return eng
}

// TestExpectationReadsThePublishedCluster: the expected shares of examples/backup-endpoints.yaml's backend,
// from the cluster and assignment the engine published: nothing to the backup while the primaries are
// healthy, everything once both are down; a second call with the same health is the kept answer.
func TestExpectationReadsThePublishedCluster(t *testing.T) {
	eng := exampleEngine(t, "backup-endpoints.yaml")
	x := newExpectation(eng, nil)
	group, cluster := v1alpha1.DefaultProxyGroup, "default/backup/app"
	got := x.expect(group, cluster, nil)
	if len(got) != 3 || got["127.0.0.1:18081"].Share != 0.5 || got["127.0.0.1:18083"].Share != 0 || !got["127.0.0.1:18083"].Backup || got["127.0.0.1:18083"].Priority != 1 {
		t.Fatalf("all healthy: %+v", got)
	}
	down := map[string]string{"127.0.0.1:18081": "active health check failed", "127.0.0.1:18082": "active health check failed"}
	if got := x.expect(group, cluster, down); got["127.0.0.1:18083"].Share != 1 || got["127.0.0.1:18081"].Share != 0 {
		t.Errorf("primaries down: %+v", got)
	}
	if len(x.cache) != 1 {
		t.Errorf("%d predictions kept, want 1 (the cluster's last)", len(x.cache))
	}
	if again := x.expect(group, cluster, down); reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(x.cache[expectKey{group, cluster}].out).UnsafePointer() {
		t.Error("the same health was computed again")
	}
	if x.expect(group, "default/nosuch/app", nil) != nil || x.expect("nosuch", cluster, nil) != nil {
		t.Error("an unknown cluster or group got a prediction")
	}
}

// TestExpectationKeepsOnePerCluster: one prediction per cluster, however many clusters there are (a cache
// that forgot everything at a fixed size recomputed every cluster on every read at 10,000 clusters), kept
// until the cluster's resources change; the clusters no longer built are forgotten.
func TestExpectationKeepsOnePerCluster(t *testing.T) {
	eng := exampleEngine(t, "backup-endpoints.yaml", "round-robin.yaml")
	x := newExpectation(eng, nil)
	group, backup, demo := v1alpha1.DefaultProxyGroup, "default/backup/app", "default/demo/app"
	same := func(a, b map[string]proxystats.Expected) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	first, demoFirst := x.expect(group, backup, nil), x.expect(group, demo, nil)
	if demoFirst["127.0.0.1:18081"].Share == 0 || len(x.cache) != 2 {
		t.Fatalf("two clusters: %d kept, demo %+v", len(x.cache), demoFirst)
	}
	for range 3 {
		if got := x.expect(group, backup, nil); !same(got, first) {
			t.Fatal("a kept prediction was computed again")
		}
	}
	// The demo policy alone, its third endpoint gone: the backup cluster is forgotten, the demo's predicted
	// anew, over two endpoints.
	demoPolicy := examplePolicies(t, "round-robin.yaml")[0]
	demoPolicy.Spec.Backends[0].Endpoints = demoPolicy.Spec.Backends[0].Endpoints[:2]
	eng.Set(engine.SourceStore, []*v1alpha1.LoadBalancerPolicy{demoPolicy})
	if got := x.expect(group, demo, nil); same(got, demoFirst) || len(got) != 2 || got["127.0.0.1:18081"].Share != 0.5 {
		t.Errorf("after the demo's change: %+v", got)
	}
	if _, kept := x.cache[expectKey{group, backup}]; kept || len(x.cache) != 1 {
		t.Errorf("kept after the backup cluster went: %v", slices.Collect(maps.Keys(x.cache)))
	}
	if x.expect(group, backup, nil) != nil {
		t.Error("a cluster no longer published got a prediction")
	}
}

// TestExpectationFollowsTheEnvoysZones: examples/zone-aware.yaml's expected shares are for the zones of the
// group's Envoys: with one Envoy in zone-a, zone-a's three endpoints a third each and no caveat; with one
// more in zone-b (read again after censusEvery), the two Envoys' average, said in a caveat; with none, an
// Envoy without a zone's half per zone, and a caveat saying so.
func TestExpectationFollowsTheEnvoysZones(t *testing.T) {
	eng := exampleEngine(t, "zone-aware.yaml")
	var mu sync.Mutex
	var fleet []xdsserver.ProxyStatus
	x := newExpectation(eng, func() []xdsserver.ProxyStatus {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(fleet)
	})
	setFleet := func(ps ...xdsserver.ProxyStatus) {
		mu.Lock()
		fleet = ps
		mu.Unlock()
		x.mu.Lock()
		x.zones.at = time.Time{} // as if censusEvery had passed
		x.mu.Unlock()
	}
	group, cluster := v1alpha1.DefaultProxyGroup, "default/zone-aware/app"
	zoneA := func(got map[string]proxystats.Expected) float64 {
		s := 0.0
		for _, e := range got {
			if e.Zone == "zone-a" {
				s += e.Share
			}
		}
		return s
	}
	setFleet(xdsserver.ProxyStatus{NodeID: "a1", Group: group, Zone: "zone-a"}, xdsserver.ProxyStatus{NodeID: "other", Group: "edge", Zone: "zone-b"})
	got := x.expect(group, cluster, nil)
	if a := zoneA(got); math.Abs(a-1) > 1e-9 || math.Abs(got["127.0.0.1:18081"].Share-1.0/3) > 1e-9 || len(got["127.0.0.1:18081"].Caveats) != 0 {
		t.Errorf("one Envoy in zone-a: zone-a %.3f, %+v", a, got)
	}
	setFleet(xdsserver.ProxyStatus{NodeID: "a1", Group: group, Zone: "zone-a"}, xdsserver.ProxyStatus{NodeID: "b1", Group: group, Zone: "zone-b"})
	got = x.expect(group, cluster, nil)
	if a := zoneA(got); math.Abs(a-0.5) > 1e-9 || len(got["127.0.0.1:18081"].Caveats) != 1 || !strings.Contains(got["127.0.0.1:18081"].Caveats[0], "average of Envoys in zone-a (1) and zone-b (1)") {
		t.Errorf("Envoys in zone-a and zone-b: zone-a %.3f, %+v", a, got)
	}
	setFleet()
	got = x.expect(group, cluster, nil)
	if a := zoneA(got); math.Abs(a-0.5) > 1e-9 || len(got["127.0.0.1:18081"].Caveats) != 1 || !strings.Contains(got["127.0.0.1:18081"].Caveats[0], "an Envoy without a zone") {
		t.Errorf("no Envoy: zone-a %.3f, %+v", a, got)
	}
}

// TestExpectationCarriesTheBuiltRamp: with slow start, each endpoint's expectation carries the ramp of the
// cluster the engine built (examples/slow-start.yaml: 60 s from 10 %), which status reads warmingPercent
// from; without slow start, none.
func TestExpectationCarriesTheBuiltRamp(t *testing.T) {
	eng := exampleEngine(t, "slow-start.yaml")
	x := newExpectation(eng, nil)
	got := x.expect(v1alpha1.DefaultProxyGroup, "default/slow-start/app", nil)
	w := got["127.0.0.1:18082"].Warming
	if w == nil {
		t.Fatalf("no ramp: %+v", got)
	}
	for age, want := range map[time.Duration]float64{0: 0.1, 3 * time.Second: 0.1, 30 * time.Second: 0.5, 45 * time.Second: 0.75, time.Minute: 1} {
		if f := w(age); math.Abs(f-want) > 1e-9 {
			t.Errorf("%s after it joined: %.3f of its weight, want %.3f", age, f, want)
		}
	}
	eng.Set(engine.SourceStore, examplePolicies(t, "backup-endpoints.yaml"))
	if got := x.expect(v1alpha1.DefaultProxyGroup, "default/backup/app", nil); got["127.0.0.1:18081"].Warming != nil {
		t.Errorf("a backend without slow start has a ramp")
	}
}
