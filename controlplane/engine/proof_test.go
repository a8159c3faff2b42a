package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// manyPolicies returns n policies sharing port 8080, one hostname each, as the push benchmark stores them.
func manyPolicies(n int) []*v1alpha1.LoadBalancerPolicy {
	out := make([]*v1alpha1.LoadBalancerPolicy, n)
	for i := range out {
		out[i] = hosted(fmt.Sprintf("p-%05d", i), 8080, fmt.Sprintf("p-%05d.example.com", i), 80)
		out[i].CreationTimestamp = metav1Time(i % 60)
	}
	return out
}

// One change among 10,000 policies translates that policy alone, and a delta xDS client (the real server,
// over gRPC on loopback) receives only the resource that changed.
func TestOneChangeAmongTenThousandIsTranslatedAndSentAlone(t *testing.T) {
	const n = 10_000
	cache := xdscache.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := New(cache, log)
	policies := manyPolicies(n)
	e.Set(SourceStore, policies)
	if got := e.translator.Runs(); got != n {
		t.Fatalf("loading %d policies ran the translator %d times", n, got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := xdsserver.NewGRPC(ctx, cache, xdsserver.NewTracker(cache, log))
	go func() { _ = xdsserver.Serve(ctx, srv, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(512<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	responses := make(chan *discovery.DeltaDiscoveryResponse, 16)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				close(responses)
				return
			}
			responses <- r
		}
	}()
	recv := func(wait time.Duration) *discovery.DeltaDiscoveryResponse {
		select {
		case r := <-responses:
			if r != nil {
				// ACK, as Envoy does.
				if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}); err != nil {
					t.Fatal(err)
				}
			}
			return r
		case <-time.After(wait):
			return nil
		}
	}
	var clusters, tables []string
	for _, p := range policies {
		clusters = append(clusters, p.Namespace+"/"+p.Name+"/a")
		// The port has more than ir.ScopedRoutesAbove hosts: one route table per host, as Envoy asks for
		// them after the scopes.
		tables = append(tables, "http-8080/"+p.Namespace+"/"+p.Name)
	}
	node := &corev3.Node{Id: "proof", Cluster: xdscache.DefaultGroup}
	subscribe := map[string][]string{resource.ClusterType: nil, resource.EndpointType: clusters, resource.ListenerType: nil, resource.ScopedRouteType: nil, resource.RouteType: tables}
	for _, typ := range []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.ScopedRouteType, resource.RouteType} {
		if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: typ, ResourceNamesSubscribe: subscribe[typ]}); err != nil {
			t.Fatal(err)
		}
		r := recv(time.Minute)
		if r == nil || r.TypeUrl != typ {
			t.Fatalf("initial %s: got %v", typ, r)
		}
		want := map[string]int{resource.ClusterType: n, resource.EndpointType: n, resource.ListenerType: 1, resource.ScopedRouteType: n, resource.RouteType: n}[typ]
		if len(r.Resources) != want {
			t.Fatalf("initial %s: %d resources, want %d", typ, len(r.Resources), want)
		}
	}

	// Change one policy's endpoint.
	next := append([]*v1alpha1.LoadBalancerPolicy(nil), policies...)
	changed := next[4321].DeepCopy()
	changed.Spec.Backends[0].Endpoints[0].Port = 81
	next[4321] = changed
	before := e.translator.Runs()
	e.Set(SourceStore, next)
	if got := e.translator.Runs() - before; got != 1 {
		t.Fatalf("one change ran the translator %d times, want 1", got)
	}
	r := recv(30 * time.Second)
	if r == nil {
		t.Fatal("no response after the change")
	}
	if r.TypeUrl != resource.EndpointType || len(r.Resources) != 1 || r.Resources[0].Name != "default/p-04321/a" || len(r.RemovedResources) != 0 {
		names := []string{}
		for _, res := range r.Resources {
			names = append(names, res.Name)
		}
		t.Fatalf("after one endpoint change got %s with %v (removed %v), want only that cluster's endpoints", r.TypeUrl, names, r.RemovedResources)
	}
	if extra := recv(500 * time.Millisecond); extra != nil {
		t.Fatalf("a second response after one endpoint change: %s with %d resources", extra.TypeUrl, len(extra.Resources))
	}
}
