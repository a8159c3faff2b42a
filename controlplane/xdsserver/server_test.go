package xdsserver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

type fixture struct {
	cache   *xdscache.Cache
	tracker *xdsserver.Tracker
	conn    *grpc.ClientConn
	addr    string
}

func start(t *testing.T, configure ...func(*xdscache.Cache)) *fixture {
	t.Helper()
	return startListening(t, (*xdsserver.Tracker).Listener, configure...)
}

// startListening is start with the xDS listener made by listen (the tracker's, or another).
func startListening(t *testing.T, listen func(*xdsserver.Tracker, net.Listener) net.Listener, configure ...func(*xdscache.Cache)) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cache := xdscache.New()
	for _, f := range configure {
		f(cache)
	}
	tracker := xdsserver.NewTracker(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	g := xdsserver.NewGRPC(ctx, cache, tracker)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { xdsserver.Serve(ctx, g, listen(tracker, lis)); close(done) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); cancel(); <-done })
	return &fixture{cache: cache, tracker: tracker, conn: conn, addr: lis.Addr().String()}
}

func state(t *testing.T, clusters ...string) *xdscache.State {
	t.Helper()
	res := map[string][]proto.Message{}
	for _, c := range clusters {
		res[resource.ClusterType] = append(res[resource.ClusterType], &clusterv3.Cluster{Name: c})
		res[resource.EndpointType] = append(res[resource.EndpointType], &endpointv3.ClusterLoadAssignment{ClusterName: c})
	}
	s, err := xdscache.NewState(res)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var node = &corev3.Node{Id: "n1", Cluster: "g"}

// inbox is filled by one goroutine receiving from an ADS stream, so a test can wait for a response with a
// deadline without a receive left running that would swallow the next one.
type inbox[R any] chan R

func receiveInto[R any](recv func() (R, error)) inbox[R] {
	ch := make(inbox[R], 16)
	go func() {
		defer close(ch)
		for {
			r, err := recv()
			if err != nil {
				return
			}
			ch <- r
		}
	}()
	return ch
}

// recv returns the next response, or the zero value if none came within the deadline or the stream ended.
func (in inbox[R]) recv(within time.Duration) R {
	select {
	case r := <-in:
		return r
	case <-time.After(within):
		var zero R
		return zero
	}
}

type sotw struct {
	discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	inbox[*discovery.DiscoveryResponse]
}

func openSotw(t *testing.T, ctx context.Context, conn *grpc.ClientConn) *sotw {
	t.Helper()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &sotw{s, receiveInto(s.Recv)}
}

type delta struct {
	discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	inbox[*discovery.DeltaDiscoveryResponse]
}

func openDelta(t *testing.T, ctx context.Context, conn *grpc.ClientConn) *delta {
	t.Helper()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &delta{s, receiveInto(s.Recv)}
}

func names(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.Resources {
		switch a.TypeUrl {
		case resource.ClusterType:
			c := &clusterv3.Cluster{}
			a.UnmarshalTo(c)
			out = append(out, c.Name)
		case resource.EndpointType:
			c := &endpointv3.ClusterLoadAssignment{}
			a.UnmarshalTo(c)
			out = append(out, c.ClusterName)
		}
	}
	slices.Sort(out)
	return out
}

func TestSotwNackIsNotAnsweredWithTheSameConfig(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, r1 := clusterSotw(t, ctx, f)
	if r1 == nil || !slices.Equal(names(t, r1), []string{"a"}) {
		t.Fatalf("first response: %v", r1)
	}
	// NACK it: the server must not send the same version again.
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r1.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: "cluster a: bad"}})
	if r := s.recv(time.Second); r != nil {
		t.Fatalf("the rejected config was sent again: version %s", r.VersionInfo)
	}
	ok := f.tracker.Wait(ctx, func(ps []xdsserver.ProxyStatus) bool {
		return len(ps) == 1 && ps[0].State == xdsserver.Nacked && ps[0].Message == "Cluster: cluster a: bad"
	})
	if !ok {
		t.Fatalf("NACK not recorded: %+v", f.tracker.Proxies())
	}
	// A new config goes out at once.
	f.cache.Publish("g", state(t, "a", "b"))
	r2 := s.recv(5 * time.Second)
	if r2 == nil || !slices.Equal(names(t, r2), []string{"a", "b"}) || r2.VersionInfo == r1.VersionInfo {
		t.Fatalf("after a change: %v", r2)
	}
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r2.Nonce, VersionInfo: r2.VersionInfo})
	if lag := f.tracker.Lagging(ctx, []string{"g"}, 5*time.Second); len(lag) != 0 {
		t.Fatalf("ACK not recorded: %+v", f.tracker.Proxies())
	}
}

func TestSotwUnknownEndpointsAreAnsweredEmpty(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	s := openSotw(t, context.Background(), f.conn)
	s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.EndpointType, ResourceNames: []string{"a", "gone"}})
	r := s.recv(5 * time.Second)
	if r == nil {
		t.Fatal("no EDS response")
	}
	if got := names(t, r); !slices.Equal(got, []string{"a", "gone"}) {
		t.Fatalf("EDS answered %v, want a and an empty gone", got)
	}
	for _, a := range r.Resources {
		cla := &endpointv3.ClusterLoadAssignment{}
		a.UnmarshalTo(cla)
		if cla.ClusterName == "gone" && len(cla.Endpoints) != 0 {
			t.Errorf("unknown name answered with endpoints: %v", cla)
		}
	}
}

func TestDeltaReconnectRemovesWhatWasDeletedMeanwhile(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a", "b"))
	client := discovery.NewAggregatedDiscoveryServiceClient(f.conn)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := client.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	for _, res := range r.Resources {
		known[res.Name] = res.Version
	}
	if len(known) != 2 {
		t.Fatalf("first delta response: %v", r)
	}
	cancel()

	f.cache.Publish("g", state(t, "a"))
	s2 := openDelta(t, context.Background(), f.conn)
	s2.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, InitialResourceVersions: known})
	r2 := s2.recv(5 * time.Second)
	if r2 == nil {
		t.Fatal("no response after reconnecting")
	}
	if len(r2.Resources) != 0 || !slices.Equal(r2.RemovedResources, []string{"b"}) {
		t.Fatalf("reconnect: resources %d, removed %v; want nothing resent and b removed", len(r2.Resources), r2.RemovedResources)
	}
	// A NACK of a delta response is not answered either.
	s2.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r2.Nonce, ErrorDetail: &status.Status{Message: "no"}})
	if r := s2.recv(time.Second); r != nil {
		t.Fatalf("a NACK was answered: %v", r)
	}
}
