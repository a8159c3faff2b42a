package xdsserver_test

import (
	"context"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"runtime"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// fullState has one resource of every type, each carrying tag so that states differ in every type.
func fullState(t *testing.T, tag string) *xdscache.State {
	t.Helper()
	s, err := xdscache.NewState(map[string][]proto.Message{
		resource.SecretType: {&tlsv3.Secret{Name: "s", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
			Secret: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: tag}}}}}},
		resource.ClusterType:  {&clusterv3.Cluster{Name: "c", AltStatName: tag}},
		resource.EndpointType: {&endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{Priority: uint32(len(tag))}}}},
		// The listener references the secret: a group is served only the secrets it uses.
		resource.ListenerType: {&listenerv3.Listener{Name: "l", StatPrefix: tag, FilterChains: []*listenerv3.FilterChain{{TransportSocket: transportSocket(t,
			&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsRef("s")}}})}}}},
		resource.ScopedRouteType: {&routev3.ScopedRouteConfiguration{Name: "sc", RouteConfigurationName: tag}},
		resource.RouteType:       {&routev3.RouteConfiguration{Name: "r", InternalOnlyHeaders: []string{tag}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var namesByType = map[string][]string{resource.SecretType: {"s"}, resource.EndpointType: {"c"}, resource.RouteType: {"r"}}

func TestResponsesGoOutInDependencyOrder(t *testing.T) {
	for _, delta := range []bool{false, true} {
		f := start(t)
		f.cache.Publish("g", fullState(t, "one"))
		ctx, cancel := context.WithCancel(context.Background())
		var order []string
		if delta {
			s, err := discovery.NewAggregatedDiscoveryServiceClient(f.conn).DeltaAggregatedResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, typ := range xdscache.Types {
				s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: typ, ResourceNamesSubscribe: namesByType[typ]})
				r, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: r.Nonce})
			}
			f.waitAllAcked(t, len(xdscache.Types))
			f.cache.Publish("g", fullState(t, "two"))
			for range xdscache.Types {
				r, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				order = append(order, r.TypeUrl)
				s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
			}
		} else {
			s := openSotw(t, ctx, f.conn)
			for _, typ := range xdscache.Types {
				s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: namesByType[typ]})
				r := s.recv(5 * time.Second)
				s.Send(&discovery.DiscoveryRequest{TypeUrl: typ, ResourceNames: namesByType[typ], ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})
			}
			f.waitAllAcked(t, len(xdscache.Types))
			f.cache.Publish("g", fullState(t, "two"))
			for range xdscache.Types {
				r := s.recv(5 * time.Second)
				if r == nil {
					t.Fatalf("only %d responses after a change to every type: %v", len(order), order)
				}
				order = append(order, r.TypeUrl)
			}
		}
		cancel()
		if !slices.Equal(order, xdscache.Types) {
			t.Errorf("delta=%v: responses went out as %v, want %v", delta, order, xdscache.Types)
		}
	}
}

// waitAllAcked waits until the one proxy acknowledged n types.
func (f *fixture) waitAllAcked(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok := f.tracker.Wait(ctx, func(ps []xdsserver.ProxyStatus) bool {
		if len(ps) != 1 {
			return false
		}
		acked := 0
		for _, ts := range ps[0].Types {
			if ts.AckedVersion != "" {
				acked++
			}
		}
		return acked == n
	})
	if !ok {
		t.Fatalf("not every type was acknowledged: %+v", f.tracker.Proxies())
	}
}

func TestStaleNonceIsIgnoredAndOldVersionsCatchUp(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithCancel(context.Background())
	s := openSotw(t, ctx, f.conn)
	s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
	r1 := s.recv(5 * time.Second)
	// A request that answers a nonce the server never sent is ignored: nothing comes back.
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: "not-a-nonce", VersionInfo: "v0"})
	if r := s.recv(500 * time.Millisecond); r != nil {
		t.Fatalf("a stale nonce was answered: %v", r)
	}
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r1.Nonce, VersionInfo: r1.VersionInfo})
	cancel()

	// Config changed while the Envoy was away; it reconnects with its old version and gets the new config.
	f.cache.Publish("g", state(t, "a", "b"))
	s2 := openSotw(t, context.Background(), f.conn)
	s2.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, VersionInfo: r1.VersionInfo})
	r2 := s2.recv(5 * time.Second)
	if r2 == nil || !slices.Equal(names(t, r2), []string{"a", "b"}) {
		t.Fatalf("reconnect with an old version got %v", r2)
	}
	// Reconnecting with the current version is sent nothing (the version names every cluster; an Envoy
	// that starts afresh names none) until the config changes, and then the full state.
	s3 := openSotw(t, context.Background(), f.conn)
	s3.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, VersionInfo: r2.VersionInfo})
	if r3 := s3.recv(time.Second); r3 != nil {
		t.Fatalf("reconnect with the current version was sent it again: %v", names(t, r3))
	}
	f.cache.Publish("g", state(t, "a", "b", "c"))
	if r3 := s3.recv(5 * time.Second); r3 == nil || !slices.Equal(names(t, r3), []string{"a", "b", "c"}) {
		t.Fatalf("after a change, the stream that reconnected with the current version got %v", r3)
	}
}

func TestUnsubscribeResubscribeAndAReaddedCluster(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a", "b"))
	s := openDelta(t, context.Background(), f.conn)
	recv := func() *discovery.DeltaDiscoveryResponse {
		t.Helper()
		r := s.recv(5 * time.Second)
		if r == nil {
			t.Fatal("no response")
		}
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
		return r
	}
	endpoints := func(r *discovery.DeltaDiscoveryResponse) (out []string) {
		for _, res := range r.Resources {
			out = append(out, res.Name)
		}
		slices.Sort(out)
		return out
	}
	s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"a", "b"}})
	if got := endpoints(recv()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first: %v", got)
	}
	// Cluster b goes away: Envoy unsubscribes from its endpoints; then b comes back and Envoy subscribes again.
	f.cache.Publish("g", state(t, "a"))
	s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesUnsubscribe: []string{"b"}})
	f.cache.Publish("g", state(t, "a", "b"))
	s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"b"}})
	if got := endpoints(recv()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("the re-added cluster's endpoints: %v, want b", got)
	}
}

func TestConnectDisconnectCyclesLeakNothing(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a", "b", "c"))
	cycle := func() {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := discovery.NewAggregatedDiscoveryServiceClient(f.conn).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	settle := func() (int, uint64) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.tracker.Wait(ctx, func(ps []xdsserver.ProxyStatus) bool { return len(ps) == 0 })
		var m runtime.MemStats
		for i := 0; i < 20; i++ {
			time.Sleep(50 * time.Millisecond)
			runtime.GC()
		}
		runtime.ReadMemStats(&m)
		return runtime.NumGoroutine(), m.HeapAlloc
	}
	for i := 0; i < 50; i++ { // warm up pools and lazily started goroutines
		cycle()
	}
	g0, h0 := settle()
	for i := 0; i < 1000; i++ {
		cycle()
	}
	g1, h1 := settle()
	if g1 > g0+5 {
		t.Errorf("goroutines: %d before 1000 connect/disconnect cycles, %d after", g0, g1)
	}
	if h1 > h0+4<<20 {
		t.Errorf("heap: %d KiB before 1000 cycles, %d KiB after", h0>>10, h1>>10)
	}
	t.Logf("1000 cycles: goroutines %d -> %d, heap %d KiB -> %d KiB", g0, g1, h0>>10, h1>>10)
}
