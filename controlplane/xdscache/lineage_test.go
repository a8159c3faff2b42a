package xdscache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/proto"
)

// deltaClient plays a delta stream as go-control-plane's server and an Envoy drive it: it holds what it was
// sent, hands the cache its subscription, and ACKs every response.
type deltaClient struct {
	typ   string
	sub   stream.Subscription
	held  map[string]string
	ch    chan cachev3.DeltaResponse
	nonce int
	sent  int // resources received
}

func newDeltaClient(typ string, names []string) *deltaClient {
	return &deltaClient{typ: typ, sub: stream.NewDeltaSubscription(names, nil, nil, true), held: map[string]string{},
		ch: make(chan cachev3.DeltaResponse, 1)}
}

// request sends one request (subscribing and unsubscribing names) and takes every answer until the cache
// parks the watch; it returns the watch's cancel.
func (d *deltaClient) request(t *testing.T, c *Cache, sub, unsub []string) func() {
	t.Helper()
	if d.nonce > 0 {
		d.sub.UpdateResourceSubscriptions(sub, unsub)
	}
	for _, n := range unsub {
		delete(d.held, n) // a client drops what it unsubscribes from; no removal is sent for it
	}
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: d.typ, Node: &corev3.Node{Id: "n"}, ResourceNamesSubscribe: sub,
		ResourceNamesUnsubscribe: unsub}
	if d.nonce > 0 {
		req.ResponseNonce = fmt.Sprint(d.nonce)
	}
	cancel, err := c.CreateDeltaWatch(req, d.sub, d.ch)
	if err != nil {
		t.Fatal(err)
	}
	return cancel
}

// take applies a response if one came, and says whether one did.
func (d *deltaClient) take(t *testing.T) bool {
	t.Helper()
	select {
	case r := <-d.ch:
		resp, err := r.GetDeltaDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range resp.GetResources() {
			d.held[res.GetName()] = res.GetVersion()
			d.sent++
		}
		for _, n := range resp.GetRemovedResources() {
			delete(d.held, n)
		}
		d.sub.SetReturnedResources(r.GetNextVersionMap())
		d.nonce++
		return true
	default:
		return false
	}
}

// TestDeltaAnswersFollowMarks makes random changes (puts, removals, staged publishes, unrelated states,
// subscriptions coming and going) and checks that a wildcard and a named delta stream, answered from what
// changed since their marks, always hold exactly what a full comparison would give them.
func TestDeltaAnswersFollowMarks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 16))
	c := New()
	name := func() string { return fmt.Sprintf("c%03d", rng.IntN(150)) }
	version := 0
	cluster := func(n string) *Resource {
		version++
		r, err := NewResource(resource.ClusterType, &clusterv3.Cluster{Name: n, AltStatName: fmt.Sprint(version)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	assignment := func(n string) *Resource {
		version++
		r, err := NewResource(resource.EndpointType, &endpointv3.ClusterLoadAssignment{ClusterName: n,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{Priority: uint32(version % 3)}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cds := newDeltaClient(resource.ClusterType, nil)
	eds := newDeltaClient(resource.EndpointType, []string{"c001", "c002"})
	cancels := map[*deltaClient]func(){}
	serve := func(d *deltaClient, sub, unsub []string) {
		if cancel := cancels[d]; cancel != nil {
			cancel()
		}
		cancels[d] = d.request(t, c, sub, unsub)
		for d.take(t) {
			cancels[d] = d.request(t, c, nil, nil)
		}
	}
	serve(cds, nil, nil)
	serve(eds, nil, nil)
	subscribed := map[string]bool{"c001": true, "c002": true}
	state, _ := NewState(nil)
	fullBefore := fullCompares.Load()
	const steps = 400
	for step := range steps {
		var next *State
		if rng.IntN(50) == 0 {
			// An unrelated state: the lineage breaks, and the streams get one full comparison.
			var msgs []proto.Message
			for range 20 {
				msgs = append(msgs, &clusterv3.Cluster{Name: name(), AltStatName: fmt.Sprint(step)})
			}
			var err error
			if next, err = NewState(map[string][]proto.Message{resource.ClusterType: dedupe(msgs)}); err != nil {
				t.Fatal(err)
			}
		} else {
			ch := Change{Put: map[string][]*Resource{}, Remove: map[string][]string{}}
			seen := map[string]bool{}
			for range 1 + rng.IntN(4) {
				n := name()
				if seen[n] {
					continue
				}
				seen[n] = true
				switch rng.IntN(3) {
				case 0:
					ch.Remove[resource.ClusterType] = append(ch.Remove[resource.ClusterType], n)
					ch.Remove[resource.EndpointType] = append(ch.Remove[resource.EndpointType], n)
				case 1:
					ch.Put[resource.ClusterType] = append(ch.Put[resource.ClusterType], cluster(n))
				default:
					ch.Put[resource.EndpointType] = append(ch.Put[resource.EndpointType], assignment(n))
				}
			}
			var err error
			if next, err = state.Derive(ch); err != nil {
				t.Fatal(err)
			}
		}
		state = next
		c.Publish(DefaultGroup, state)
		for _, d := range []*deltaClient{cds, eds} {
			for d.take(t) {
				serve(d, nil, nil)
			}
		}
		if rng.IntN(4) == 0 {
			n := name()
			if subscribed[n] {
				delete(subscribed, n)
				serve(eds, nil, []string{n})
			} else {
				subscribed[n] = true
				serve(eds, []string{n}, nil)
			}
		}
		wantCDS := map[string]string{}
		for _, n := range state.Names(resource.ClusterType) {
			r, _ := state.Lookup(resource.ClusterType, n)
			wantCDS[n] = r.Version()
		}
		wantEDS := map[string]string{}
		for n := range subscribed {
			wantEDS[n] = "empty"
			if r, ok := state.Lookup(resource.EndpointType, n); ok {
				wantEDS[n] = r.Version()
			}
		}
		if !maps.Equal(cds.held, wantCDS) {
			t.Fatalf("step %d: the wildcard stream holds %v, want %v", step, cds.held, wantCDS)
		}
		if !maps.Equal(eds.held, wantEDS) {
			t.Fatalf("step %d: the named stream holds %v, want %v", step, eds.held, wantEDS)
		}
	}
	// Each unrelated state costs each stream a full comparison or two (one per plan step); a change
	// within a lineage costs none.
	if full := fullCompares.Load() - fullBefore; full > steps/5 {
		t.Errorf("%d of the answers compared every resource, want them to follow the marks", full)
	}
	t.Logf("resources sent: %d to the wildcard stream, %d to the named one", cds.sent, eds.sent)
}

func dedupe(msgs []proto.Message) []proto.Message {
	seen := map[string]bool{}
	var out []proto.Message
	for _, m := range msgs {
		if n := cachev3.GetResourceName(m); !seen[n] {
			seen[n] = true
			out = append(out, m)
		}
	}
	return out
}

// A lineage longer than maxDepth is cut, and a stream holding one of the last links still meets the new
// one: cutting it used to cost every stream a comparison of every resource.
func TestLineageCutKeepsRecentLinks(t *testing.T) {
	l := rootLink()
	var prev, prev2 *link
	for i := range 3 * maxDepth {
		prev2, prev = prev, l
		l = childLink(prev, []string{fmt.Sprint(i)})
		if l.depth > maxDepth {
			t.Fatalf("link %d: depth %d, want at most %d", i, l.depth, maxDepth)
		}
		if names, ok := changedBetween(prev, l); !ok || !slices.Equal(names, []string{fmt.Sprint(i)}) {
			t.Fatalf("link %d from its parent: %v %v, want [%d]", i, names, ok, i)
		}
		if prev2 == nil {
			continue
		}
		want := []string{fmt.Sprint(i - 1), fmt.Sprint(i)}
		slices.Sort(want)
		if names, ok := changedBetween(prev2, l); !ok || !slices.Equal(names, want) {
			t.Fatalf("link %d from its grandparent: %v %v, want %v", i, names, ok, want)
		}
	}
	if _, ok := changedBetween(rootLink(), l); ok {
		t.Error("an unrelated link meets the lineage")
	}
}
