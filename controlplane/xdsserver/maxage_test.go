package xdsserver_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// testMaxAge is short, so that the tests see several ages; the cache spreads it ±10 %.
const testMaxAge = 400 * time.Millisecond

// latestEnd is when a stream opened at open has certainly passed its age: its age counts from its first
// request, which the server reads a little after the stream opens (250 ms is ample on a loaded machine).
func latestEnd(open time.Time) time.Time {
	return open.Add(testMaxAge + testMaxAge/10 + 250*time.Millisecond)
}

// dialCounting returns a client connection to f that counts the TCP connections it opens.
func dialCounting(t *testing.T, f *fixture) (*grpc.ClientConn, *atomic.Int32) {
	t.Helper()
	var dials atomic.Int32
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, &dials
}

func withMaxAge(c *xdscache.Cache) { c.MaxAge = testMaxAge }

// clustersOnNewDelta opens a delta stream on conn and subscribes to every cluster; it returns the stream,
// its first response (the two clusters published) and when it was opened.
func clustersOnNewDelta(t *testing.T, ctx context.Context, conn *grpc.ClientConn) (*delta, *discovery.DeltaDiscoveryResponse, time.Time) {
	t.Helper()
	opened := time.Now()
	d := openDelta(t, ctx, conn)
	d.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}})
	r1 := d.recv(5 * time.Second)
	if r1 == nil || len(r1.Resources) != 2 {
		t.Fatalf("first response: %v", r1)
	}
	return d, r1, opened
}

// A delta stream past its age that has a response unanswered is neither ended nor sent anything new;
// once it answers, its connection is closed. The client reconnects on a new connection with the versions it
// acknowledged and is sent only what changed meanwhile.
func TestDeltaStreamPastItsAgeEndsOnlyOnceItAnsweredEverything(t *testing.T) {
	f := start(t, withMaxAge)
	f.cache.Publish("g", state(t, "a", "b"))
	conn, dials := dialCounting(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, r1, opened := clustersOnNewDelta(t, ctx, conn)
	acked := map[string]string{}
	for _, r := range r1.Resources {
		acked[r.Name] = r.Version
	}
	// r1 stays unanswered past the stream's age: the stream must stay open, and a change published
	// meanwhile must not be sent on it (it would be cut in the middle of that change).
	if ended(d, time.Until(latestEnd(opened))+time.Second) {
		t.Fatal("the stream was ended while a response was unanswered")
	}
	f.cache.Publish("g", state(t, "a", "b", "c"))
	if r := d.recv(time.Second); r != nil {
		t.Fatalf("a stream past its age was sent a new response: %v", r)
	}
	d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r1.Nonce})
	if !ended(d, 5*time.Second) {
		t.Fatal("the stream was not ended within 5s of answering its last response past its age")
	}

	d2 := openDelta(t, ctx, conn)
	d2.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"},
		InitialResourceVersions: acked})
	r2 := d2.recv(5 * time.Second)
	if r2 == nil {
		t.Fatal("no response after reconnecting")
	}
	var sent []string
	for _, r := range r2.Resources {
		sent = append(sent, r.Name)
	}
	if !slices.Equal(sent, []string{"c"}) || len(r2.RemovedResources) != 0 {
		t.Fatalf("after reconnecting: sent %v, removed %v; want only c, the change made meanwhile", sent, r2.RemovedResources)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("the client opened %d connections; want 2 (the one closed at its age, and a new one)", n)
	}
}

// A state-of-the-world stream that has answered everything ends at its age, again and again: every change
// published between the ages reaches it, each stream on a connection of its own.
func TestSotwStreamsEndAtTheirAgeAndEveryChangeArrives(t *testing.T) {
	f := start(t, withMaxAge)
	conn, dials := dialCounting(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.cache.Publish("g", state(t, "c0"))
	const streams = 3
	var got []string
	for i := range streams {
		s := openSotw(t, ctx, conn)
		s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
		r := s.recv(5 * time.Second)
		if r == nil {
			t.Fatalf("stream %d: no first response", i)
		}
		want := []string{"c" + string(rune('0'+i))}
		if !slices.Equal(names(t, r), want) {
			t.Fatalf("stream %d: first response %v; want %v (the change made while reconnecting)", i, names(t, r), want)
		}
		got = append(got, r.VersionInfo)
		s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
		for {
			select {
			case r, ok := <-s.inbox:
				if ok {
					t.Fatalf("stream %d: unexpected response %v", i, names(t, r))
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("stream %d: not ended at its age (%s)", i, testMaxAge)
			}
			break
		}
		// Published while the client is between connections: the next stream gets it.
		f.cache.Publish("g", state(t, "c"+string(rune('1'+i))))
	}
	if n := dials.Load(); n != streams {
		t.Fatalf("the client opened %d connections; want %d, one per stream", n, streams)
	}
	if len(slices.Compact(slices.Clone(got))) != streams {
		t.Fatalf("versions acknowledged: %v; want a new one per stream", got)
	}
}

// A stream whose connection the server cannot close (its listener does not record connections) is not
// left past its age without config: it is served again, and changes keep reaching it.
func TestStreamThatCannotBeEndedAtItsAgeKeepsGettingChanges(t *testing.T) {
	// The listener as it is, not the tracker's.
	f := startListening(t, func(_ *xdsserver.Tracker, lis net.Listener) net.Listener { return lis }, withMaxAge)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache, conn := f.cache, f.conn
	cache.Publish("g", state(t, "a"))
	opened := time.Now()
	d := openDelta(t, ctx, conn)
	d.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}})
	if r := d.next(5 * time.Second); r == nil || len(r.Resources) != 1 {
		t.Fatalf("first response: %v", r)
	}
	// Past its age, and past a second one: each change still arrives.
	for i, at := range []time.Time{latestEnd(opened), latestEnd(opened).Add(testMaxAge + testMaxAge/10)} {
		for time.Now().Before(at) {
			if r := d.recv(time.Until(at)); r != nil {
				t.Fatalf("unexpected response: %v", r)
			}
		}
		name := "c" + strconv.Itoa(i)
		cache.Publish("g", state(t, "a", name))
		r := d.next(5 * time.Second)
		if r == nil || len(r.Resources) != 1 || r.Resources[0].Name != name {
			t.Fatalf("change %d past the age: got %v; want %s", i, r, name)
		}
	}
}

// A state-of-the-world client that reconnects naming the clusters' version it runs is not sent them again
// while they are unchanged, and is shown running that version; one naming an older version, or endpoints
// (whose subscription may have changed since), is sent them again.
func TestSotwReconnectIsNotSentTheClustersItRuns(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a", "b"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openSotw(t, ctx, f.conn)
	s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
	r := s.recv(5 * time.Second)
	if r == nil {
		t.Fatal("no first response")
	}
	running := r.VersionInfo

	s2 := openSotw(t, ctx, f.conn)
	s2.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "n2", Cluster: "g"}, TypeUrl: resource.ClusterType, VersionInfo: running})
	if r := s2.recv(time.Second); r != nil {
		t.Fatalf("the clusters the client runs were sent again: %v", names(t, r))
	}
	ok := f.tracker.Wait(ctx, func(ps []xdsserver.ProxyStatus) bool {
		for _, p := range ps {
			if p.NodeID == "n2" {
				return p.State == xdsserver.Synced && p.Version == running
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("n2 is not shown SYNCED at %s: %+v", running, f.tracker.Proxies())
	}
	s2.Send(&discovery.DiscoveryRequest{TypeUrl: resource.EndpointType, VersionInfo: running, ResourceNames: []string{"a"}})
	if r := s2.recv(5 * time.Second); r == nil || !slices.Equal(names(t, r), []string{"a"}) {
		t.Fatalf("endpoints named again after reconnecting: %v", r)
	}
	f.cache.Publish("g", state(t, "a", "b", "c"))
	if r := s2.recv(5 * time.Second); r == nil || r.TypeUrl != resource.ClusterType || !slices.Equal(names(t, r), []string{"a", "b", "c"}) {
		t.Fatalf("after a change: %v; want every cluster", r)
	}

	s3 := openSotw(t, ctx, f.conn)
	s3.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "n3", Cluster: "g"}, TypeUrl: resource.ClusterType, VersionInfo: running})
	if r := s3.recv(5 * time.Second); r == nil || !slices.Equal(names(t, r), []string{"a", "b", "c"}) {
		t.Fatalf("a client running an older version: %v; want every cluster", r)
	}
}

// Past its age, a delta stream still answers a subscription for what it already holds: Envoy asks for the
// endpoints of a cluster it was just sent, and holds acknowledgements until that cluster warms. Parking the
// request made the stream and Envoy wait on each other until the endpoints' initial fetch timeout, after
// which the cluster came up empty. Nothing published since is sent, and the stream ends once everything is
// answered.
func TestDeltaStreamPastItsAgeStillAnswersWhatItHolds(t *testing.T) {
	f := start(t, withMaxAge)
	f.cache.Publish("g", state(t, "a", "b"))
	conn, _ := dialCounting(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, r1, opened := clustersOnNewDelta(t, ctx, conn)
	time.Sleep(time.Until(latestEnd(opened)))
	f.cache.Publish("g", state(t, "a", "b", "c"))
	d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"a"}})
	r2 := d.recv(5 * time.Second)
	if r2 == nil || r2.TypeUrl != resource.EndpointType || len(r2.Resources) != 1 || r2.Resources[0].Name != "a" {
		t.Fatalf("the endpoints of cluster a, which the stream holds, were not sent past its age: %v", r2)
	}
	d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: r2.Nonce})
	if r := d.recv(500 * time.Millisecond); r != nil {
		t.Fatalf("a stream past its age was sent something new: %v", r)
	}
	d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r1.Nonce})
	if !ended(d, 5*time.Second) {
		t.Fatal("the stream was not ended within 5s of answering everything past its age")
	}
}
