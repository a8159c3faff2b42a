package xdsserver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// go-control-plane numbers SotW and delta streams separately, both from 1: a SotW stream and a delta stream
// with the same number must stay two proxies, and closing one must not take the other out of status.
func TestSotwAndDeltaStreamsWithTheSameNumberAreKeptApart(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	ctx := context.Background()
	sctx, closeSotw := context.WithCancel(ctx)
	defer closeSotw()
	s := openSotw(t, sctx, f.conn)
	s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "sotw-1", Cluster: "g"}, TypeUrl: resource.ClusterType})
	if s.recv(5*time.Second) == nil {
		t.Fatal("no SotW response")
	}
	d := openDelta(t, ctx, f.conn)
	d.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta-1", Cluster: "g"}, TypeUrl: resource.ClusterType})
	if d.recv(5*time.Second) == nil {
		t.Fatal("no delta response")
	}
	nodes := func(ps []xdsserver.ProxyStatus) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.NodeID+"/"+p.API)
		}
		return out
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !f.tracker.Wait(wctx, func(ps []xdsserver.ProxyStatus) bool {
		return slices.Equal(nodes(ps), []string{"delta-1/delta", "sotw-1/sotw"})
	}) {
		t.Fatalf("both streams (each numbered 1) should be listed: %v", nodes(f.tracker.Proxies()))
	}
	closeSotw()
	if !f.tracker.Wait(wctx, func(ps []xdsserver.ProxyStatus) bool {
		return slices.Equal(nodes(ps), []string{"delta-1/delta"})
	}) {
		t.Fatalf("closing the SotW stream must leave the delta one: %v", nodes(f.tracker.Proxies()))
	}
	if got := f.tracker.CountByGroup()["g"]; got != 1 {
		t.Fatalf("group g counts %d proxies, want 1", got)
	}
}
