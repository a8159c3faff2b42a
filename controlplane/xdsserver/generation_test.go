package xdsserver_test

import (
	"context"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
)

// The generation moves with everything Proxies reports (a stream, its requests and responses, the group's
// target) and stays put while nothing happens, so that a report built from Proxies need not be built again.
func TestGenerationMovesWhenProxiesMayChange(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	g0 := f.tracker.Generation()
	s := openDelta(t, ctx, f.conn)
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	r := s.recv(10 * time.Second)
	if r == nil {
		t.Fatal("no response to the first request")
	}
	g1 := f.tracker.Generation()
	if g1 == g0 {
		t.Fatalf("generation %d did not move when a stream opened and was answered", g1)
	}
	before := f.tracker.Proxies()
	if len(before) != 1 || before[0].NodeID != node.Id {
		t.Fatalf("proxies: %+v", before)
	}
	// Hosts says what Proxies says of where the proxy runs.
	if hosts := f.tracker.Hosts(); len(hosts) != 1 || hosts[0].Address != before[0].Address || hosts[0].StatsPort != before[0].StatsPort || hosts[0].Address == "" {
		t.Fatalf("hosts %+v, proxies %+v", hosts, before)
	}

	// Nothing happens: the generation and the report stay.
	time.Sleep(100 * time.Millisecond)
	if g := f.tracker.Generation(); g != g1 {
		t.Fatalf("generation moved from %d to %d with nothing happening", g1, g)
	}
	if d := cmp.Diff(before, f.tracker.Proxies()); d != "" {
		t.Fatalf("proxies changed with the generation unchanged (-before +after):\n%s", d)
	}

	// The acknowledgement moves it (the proxy is now Synced on the version it acknowledged).
	if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.Nonce}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.tracker.Generation() == g1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	g2 := f.tracker.Generation()
	if g2 == g1 {
		t.Fatal("generation did not move on the acknowledgement")
	}
	acked := f.tracker.Proxies()
	if acked[0].Version == "" || acked[0].Version != acked[0].Current {
		t.Fatalf("after the ACK: version %q, current %q", acked[0].Version, acked[0].Current)
	}

	// A new target for the group moves it before any stream hears of it: Current changes with it.
	f.cache.Publish("g", state(t, "a", "b"))
	if g := f.tracker.Generation(); g == g2 {
		t.Fatal("generation did not move when the group was given a new target")
	}
	if now := f.tracker.Proxies(); now[0].Current == acked[0].Current {
		t.Fatalf("current version %q did not change with the new target", now[0].Current)
	}

	// Publishing the same target again is no new target.
	tg := f.cache.TargetsGeneration()
	f.cache.Publish("g", state(t, "a", "b"))
	if g := f.cache.TargetsGeneration(); g != tg {
		t.Fatalf("targets generation moved from %d to %d on the same target", tg, g)
	}
}
