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

// A proxy that leaves a response unanswered longer than AckTimeout is STALE and no longer counts for
// settle waits: the group is synced as soon as the proxies that do answer have.
func TestUnansweredProxyDoesNotHoldBackSettling(t *testing.T) {
	f := start(t)
	f.tracker.AckTimeout = 200 * time.Millisecond
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	lazy := openSotw(t, ctx, f.conn)
	lazy.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "lazy", Cluster: "g"}, TypeUrl: resource.ClusterType})
	if lazy.recv(5*time.Second) == nil {
		t.Fatal("no response to the lazy proxy")
	}
	rightful := openSotw(t, ctx, f.conn)
	rightful.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "real", Cluster: "g"}, TypeUrl: resource.ClusterType})
	r := rightful.recv(5 * time.Second)
	if r == nil {
		t.Fatal("no response to the rightful proxy")
	}
	rightful.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})

	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if !f.tracker.Wait(wctx, func(ps []xdsserver.ProxyStatus) bool {
		for _, p := range ps {
			if p.NodeID == "lazy" {
				return p.Unresponsive && p.State == xdsserver.Stale
			}
		}
		return false
	}) {
		t.Fatalf("the lazy proxy is not reported unresponsive: %+v", f.tracker.Proxies())
	}

	next := state(t, "a", "b")
	f.cache.Publish("g", next)
	r2 := rightful.recv(5 * time.Second)
	if r2 == nil {
		t.Fatal("the change did not reach the rightful proxy")
	}
	rightful.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r2.Nonce, VersionInfo: r2.VersionInfo})
	start := time.Now()
	if lag := f.tracker.Lagging(ctx, []string{"g"}, 5*time.Second); !slices.Equal(lag, []string{"lazy"}) {
		t.Fatalf("lagging %v, want only the lazy proxy: %+v", lag, f.tracker.Proxies())
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("settling took %v: the lazy proxy held it back", d)
	}
}
