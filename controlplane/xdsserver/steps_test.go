package xdsserver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// routed is a state whose one listener stands for "the routes point at route" (its stat prefix), with the
// given clusters: enough for make-before-break to take three steps when the route moves to a new cluster.
func routed(t *testing.T, route string, clusters ...string) *xdscache.State {
	t.Helper()
	res := map[string][]proto.Message{resource.ListenerType: {&listenerv3.Listener{Name: "l", StatPrefix: route}}}
	for _, c := range clusters {
		res[resource.ClusterType] = append(res[resource.ClusterType], &clusterv3.Cluster{Name: c})
	}
	s, err := xdscache.NewState(res)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// envoyish is a SotW ADS client of clusters and listeners that answers when told to.
type envoyish struct {
	t    *testing.T
	s    *sotw
	node *corev3.Node
}

func connect(t *testing.T, ctx context.Context, f *fixture, id string) *envoyish {
	e := &envoyish{t: t, s: openSotw(t, ctx, f.conn), node: &corev3.Node{Id: id, Cluster: "g"}}
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		if err := e.s.Send(&discovery.DiscoveryRequest{Node: e.node, TypeUrl: typ}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// next returns the next response, failing the test when none comes within the deadline.
func (e *envoyish) next(within time.Duration) *discovery.DiscoveryResponse {
	e.t.Helper()
	r := e.s.recv(within)
	if r == nil {
		e.t.Fatalf("%s: no response within %v", e.node.Id, within)
	}
	return r
}

func (e *envoyish) ack(r *discovery.DiscoveryResponse) {
	e.t.Helper()
	if err := e.s.Send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo}); err != nil {
		e.t.Fatal(err)
	}
}

// describe is a response as "Cluster a b" or "Listener -> b".
func describe(t *testing.T, r *discovery.DiscoveryResponse) string {
	t.Helper()
	if r.TypeUrl == resource.ListenerType {
		l := &listenerv3.Listener{}
		if err := r.Resources[0].UnmarshalTo(l); err != nil {
			t.Fatal(err)
		}
		return "Listener -> " + l.StatPrefix
	}
	out := "Cluster"
	for _, n := range names(t, r) {
		out += " " + n
	}
	return out
}

// takeAll answers every response until the stream has been quiet for a moment, and returns them in order.
func (e *envoyish) takeAll() []string {
	var got []string
	for {
		r := e.s.recv(300 * time.Millisecond)
		if r == nil {
			return got
		}
		got = append(got, describe(e.t, r))
		e.ack(r)
	}
}

// Each Envoy takes the make-before-break steps of a change as it answers them: one that does not answer
// keeps only itself on the first step, and a push's wait names it.
func TestSlowEnvoyDelaysOnlyItself(t *testing.T) {
	f := start(t, func(c *xdscache.Cache) { c.StepTimeout = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.cache.Publish("g", routed(t, "a", "a"))
	fast, slow := connect(t, ctx, f, "fast"), connect(t, ctx, f, "slow")
	for _, e := range []*envoyish{fast, slow} {
		if got := e.takeAll(); !slices.Equal(got, []string{"Cluster a", "Listener -> a"}) {
			t.Fatalf("%s: first config %q", e.node.Id, got)
		}
	}

	f.cache.Publish("g", routed(t, "b", "b"))
	// The slow one gets the first step and sits on it.
	held := slow.next(5 * time.Second)
	if got := describe(t, held); got != "Cluster a b" {
		t.Fatalf("slow: first step %q, want the new cluster beside the old", got)
	}
	start := time.Now()
	got := fast.takeAll()
	if want := []string{"Cluster a b", "Listener -> b", "Cluster b"}; !slices.Equal(got, want) {
		t.Fatalf("fast: steps %q, want %q", got, want)
	}
	t.Logf("the answering Envoy took its three steps in %v while the other sat on its first", time.Since(start))
	if r := slow.s.recv(200 * time.Millisecond); r != nil {
		t.Fatalf("slow was given %q before it answered the first step", describe(t, r))
	}

	begin := time.Now()
	lagging := f.tracker.Lagging(ctx, []string{"g"}, 300*time.Millisecond)
	waited := time.Since(begin)
	if !slices.Equal(lagging, []string{"slow"}) {
		t.Errorf("lagging %q, want [slow]", lagging)
	}
	if waited < 250*time.Millisecond || waited > 5*time.Second {
		t.Errorf("the wait took %v, want about its bound of 300ms", waited)
	}

	// Once it answers, it takes the remaining steps, and nobody lags.
	slow.ack(held)
	if got := slow.takeAll(); !slices.Equal(got, []string{"Listener -> b", "Cluster b"}) {
		t.Errorf("slow, after answering: %q", got)
	}
	if lagging := f.tracker.Lagging(ctx, []string{"g"}, 5*time.Second); len(lagging) != 0 {
		t.Errorf("lagging %q after every Envoy answered", lagging)
	}
}

// An Envoy that does not answer a step is given the next one after StepTimeout: a stuck Envoy does not
// keep its own config back forever.
func TestUnansweredStepTimesOut(t *testing.T) {
	f := start(t, func(c *xdscache.Cache) { c.StepTimeout = 300 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.cache.Publish("g", routed(t, "a", "a"))
	e := connect(t, ctx, f, "stuck")
	e.takeAll()
	f.cache.Publish("g", routed(t, "b", "b"))
	first := e.next(5 * time.Second) // never answered
	if got := describe(t, first); got != "Cluster a b" {
		t.Fatalf("first step %q", got)
	}
	start := time.Now()
	if got := describe(t, e.next(5*time.Second)); got != "Listener -> b" {
		t.Fatalf("second step %q", got)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("the second step came %v after the first, before the step timeout", d)
	}
}
