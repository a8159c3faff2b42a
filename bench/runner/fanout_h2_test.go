package main

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

var allTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}

// snapshot is one cluster on EDS (its endpoints under a service name of their own), one listener whose
// HTTP connection manager takes its routes over RDS, and those endpoints and routes.
func snapshot(t *testing.T, version string, timeout time.Duration) *cachev3.Snapshot {
	t.Helper()
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "l", RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{
		Rds: &hcmv3.Rds{ConfigSource: ads, RouteConfigName: "routes-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{
		resource.ClusterType: {&clusterv3.Cluster{Name: "c1", ConnectTimeout: durationpb.New(timeout),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads, ServiceName: "c1-endpoints"}}},
		resource.EndpointType: {&endpointv3.ClusterLoadAssignment{ClusterName: "c1-endpoints"}},
		resource.ListenerType: {&listenerv3.Listener{Name: "l1", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{
			{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}}}},
		resource.RouteType: {&routev3.RouteConfiguration{Name: "routes-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// adsServer is go-control-plane's ADS server on a snapshot cache, on a loopback port, recording every
// request it gets.
type adsServer struct {
	cache cachev3.SnapshotCache
	grpc  *grpc.Server
	addr  string

	mu       sync.Mutex
	sotw     []*discoverygrpc.DiscoveryRequest
	delta    []*discoverygrpc.DeltaDiscoveryRequest
	listener net.Listener
}

func startADS(t *testing.T, cache cachev3.SnapshotCache, addr string) *adsServer {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &adsServer{cache: cache, addr: lis.Addr().String(), listener: lis}
	cb := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discoverygrpc.DiscoveryRequest) error {
			s.mu.Lock()
			s.sotw = append(s.sotw, r)
			s.mu.Unlock()
			return nil
		},
		StreamDeltaRequestFunc: func(_ int64, r *discoverygrpc.DeltaDiscoveryRequest) error {
			s.mu.Lock()
			s.delta = append(s.delta, r)
			s.mu.Unlock()
			return nil
		},
	}
	s.grpc = grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s.grpc, serverv3.NewServer(context.Background(), cache, cb))
	go s.grpc.Serve(lis)
	t.Cleanup(s.grpc.Stop)
	return s
}

// seen collects what a client reported: the versions of each type's responses, in order.
type seen struct {
	mu       sync.Mutex
	versions [4][]string
}

func (s *seen) got(typ int, version string, _ bool) {
	s.mu.Lock()
	s.versions[typ] = append(s.versions[typ], version)
	s.mu.Unlock()
}

// every waits until every type had a response of version.
func (s *seen) every(t *testing.T, version string) {
	t.Helper()
	if !pollFor(10*time.Second, 10*time.Millisecond, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, vs := range s.versions {
			if !slices.Contains(vs, version) {
				return false
			}
		}
		return true
	}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Fatalf("not every type had version %s: %v", version, s.versions)
	}
}

// A state-of-the-world client asks as an Envoy does: clusters and listeners by wildcard, then the
// endpoints its clusters name (their EDS service name) and the routes its listeners' connection managers
// name; it acknowledges each response, follows a change, reports a server that ends its connection as
// ended, and on its next connection names what it holds.
func TestH2ClientStateOfTheWorld(t *testing.T) {
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	if err := cache.SetSnapshot(context.Background(), "sim-0", snapshot(t, "v1", time.Second)); err != nil {
		t.Fatal(err)
	}
	srv := startADS(t, cache, "")
	var s seen
	c := newH2Client(&corev3.Node{Id: "sim-0", Cluster: "default"}, allTypes, true, s.got)
	done := make(chan error, 1)
	go func() { done <- c.run(context.Background(), srv.addr) }()
	s.every(t, "v1")
	if !slices.Equal(c.names[1], []string{"c1-endpoints"}) || !slices.Equal(c.names[3], []string{"routes-1"}) {
		t.Fatalf("subscribed to endpoints %v and routes %v; want [c1-endpoints] and [routes-1]", c.names[1], c.names[3])
	}
	if err := cache.SetSnapshot(context.Background(), "sim-0", snapshot(t, "v2", 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	s.every(t, "v2")
	// Every response was acknowledged: each type's last request names v2 and a nonce.
	acks := pollFor(5*time.Second, 10*time.Millisecond, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		acked := map[string]bool{}
		for _, r := range srv.sotw {
			acked[r.GetTypeUrl()] = r.GetVersionInfo() == "v2" && r.GetResponseNonce() != ""
		}
		return len(acked) == 4 && !slices.Contains(mapValues(acked), false)
	})
	if !acks {
		t.Error("not every type's last request acknowledges v2")
	}
	srv.mu.Lock()
	if first := srv.sotw[0]; first.GetNode().GetId() != "sim-0" || first.GetTypeUrl() != resource.ClusterType || len(first.GetResourceNames()) != 0 {
		t.Errorf("first request %v: want the node's wildcard cluster request", first)
	}
	for _, r := range srv.sotw {
		switch r.GetTypeUrl() {
		case resource.EndpointType:
			if !slices.Equal(r.GetResourceNames(), []string{"c1-endpoints"}) {
				t.Errorf("endpoint request names %v", r.GetResourceNames())
			}
		case resource.RouteType:
			if !slices.Equal(r.GetResourceNames(), []string{"routes-1"}) {
				t.Errorf("route request names %v", r.GetResourceNames())
			}
		}
	}
	srv.mu.Unlock()

	// The server goes away: the client says the server ended it.
	srv.grpc.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, errServerEnded) {
			t.Fatalf("after the server stopped: %v; want errServerEnded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not notice the server stopped")
	}
	// Its next connection names what it holds.
	srv2 := startADS(t, cache, srv.addr)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- c.run(ctx, srv2.addr) }()
	pollFor(5*time.Second, 10*time.Millisecond, func() bool {
		srv2.mu.Lock()
		defer srv2.mu.Unlock()
		return len(srv2.sotw) >= 4
	})
	srv2.mu.Lock()
	got := map[string]*discoverygrpc.DiscoveryRequest{}
	for _, r := range srv2.sotw {
		if _, ok := got[r.GetTypeUrl()]; !ok {
			got[r.GetTypeUrl()] = r
		}
	}
	srv2.mu.Unlock()
	for _, typ := range allTypes {
		if r := got[typ]; r == nil || r.GetVersionInfo() != "v2" {
			t.Errorf("reconnected: the first %s request %v; want version v2", typ, r)
		}
	}
	if r := got[resource.EndpointType]; r == nil || !slices.Equal(r.GetResourceNames(), []string{"c1-endpoints"}) {
		t.Errorf("reconnected: endpoint request %v", r)
	}
	cancel()
	<-done
}

func mapValues[K comparable, V any](m map[K]V) []V {
	var out []V
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// A delta client subscribes to every type by wildcard, reports each response's system version, and on its
// next connection sends the versions of what it holds (initial_resource_versions).
func TestH2ClientDeltaResumes(t *testing.T) {
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	if err := cache.SetSnapshot(context.Background(), "sim-1", snapshot(t, "v1", time.Second)); err != nil {
		t.Fatal(err)
	}
	srv := startADS(t, cache, "")
	var s seen
	c := newH2Client(&corev3.Node{Id: "sim-1", Cluster: "default"}, allTypes, false, s.got)
	done := make(chan error, 1)
	go func() { done <- c.run(context.Background(), srv.addr) }()
	if !pollFor(10*time.Second, 10*time.Millisecond, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, vs := range s.versions {
			if len(vs) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("not every type had a response: %v", s.versions)
	}
	srv.grpc.Stop()
	if err := <-done; !errors.Is(err, errServerEnded) {
		t.Fatalf("after the server stopped: %v; want errServerEnded", err)
	}
	srv2 := startADS(t, cache, srv.addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- c.run(ctx, srv2.addr) }()
	pollFor(5*time.Second, 10*time.Millisecond, func() bool {
		srv2.mu.Lock()
		defer srv2.mu.Unlock()
		return len(srv2.delta) >= 4
	})
	srv2.mu.Lock()
	defer srv2.mu.Unlock()
	held := map[string]map[string]string{}
	for _, r := range srv2.delta[:4] {
		held[r.GetTypeUrl()] = r.GetInitialResourceVersions()
	}
	for typ, name := range map[string]string{resource.ClusterType: "c1", resource.EndpointType: "c1-endpoints", resource.ListenerType: "l1", resource.RouteType: "routes-1"} {
		if v := held[typ][name]; v == "" {
			t.Errorf("reconnected: %s request holds %v; want %s with its version", typ, held[typ], name)
		}
	}
}
