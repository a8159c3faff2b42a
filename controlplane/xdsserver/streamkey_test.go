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

// A stream's types are kept by their place in the cache's types, and any other type URL a client asks for
// beside them: both show in its status, in type URL order, and an ACK of a served type clears its pending
// response.
func TestTypesOutsideTheCacheAreListedBesideServedOnes(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	ctx := context.Background()
	const other = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
	d := openDelta(t, ctx, f.conn)
	node := &corev3.Node{Id: "delta-1", Cluster: "g"}
	d.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
	resp := d.recv(5 * time.Second)
	if resp == nil {
		t.Fatal("no delta response")
	}
	d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: resp.Nonce})
	// The server answers a type the cache does not serve with an empty response, which is acknowledged.
	d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: other})
	resp = d.recv(5 * time.Second)
	if resp == nil || resp.TypeUrl != other {
		t.Fatalf("want a response of %s, got %v", other, resp)
	}
	d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: other, ResponseNonce: resp.Nonce})
	want := []string{resource.ClusterType, other}
	types := func(ps []xdsserver.ProxyStatus) ([]string, bool) {
		if len(ps) != 1 {
			return nil, false
		}
		var urls []string
		pending := false
		for _, ts := range ps[0].Types {
			urls = append(urls, ts.TypeURL)
			pending = pending || ts.Pending
		}
		return urls, pending
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !f.tracker.Wait(wctx, func(ps []xdsserver.ProxyStatus) bool {
		urls, pending := types(ps)
		return slices.Equal(urls, want) && !pending && ps[0].State == xdsserver.Synced
	}) {
		t.Fatalf("the proxy should list %v, none pending, SYNCED: got %+v", want, f.tracker.Proxies())
	}
}
