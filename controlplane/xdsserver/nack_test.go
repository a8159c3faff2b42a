package xdsserver_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// clusterNack returns the Cluster type's status of the only proxy once it is NACKed and attributed.
func clusterNack(t *testing.T, f *fixture) xdsserver.TypeStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got xdsserver.TypeStatus
	ok := f.tracker.Wait(ctx, func(ps []xdsserver.ProxyStatus) bool {
		for _, p := range ps {
			for _, ts := range p.Types {
				if ts.TypeURL == resource.ClusterType && ts.Nacked {
					got = ts
					return true
				}
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no NACK recorded: %+v", f.tracker.Proxies())
	}
	return got
}

// clusterDelta opens a delta stream on f, subscribes it to clusters and returns it with the first response
// (nil if none came within 5 seconds).
func clusterDelta(t *testing.T, ctx context.Context, f *fixture) (*delta, *discovery.DeltaDiscoveryResponse) {
	t.Helper()
	s := openDelta(t, ctx, f.conn)
	s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
	return s, s.recv(5 * time.Second)
}

// clusterSotw is clusterDelta over state of the world.
func clusterSotw(t *testing.T, ctx context.Context, f *fixture) (*sotw, *discovery.DiscoveryResponse) {
	t.Helper()
	s := openSotw(t, ctx, f.conn)
	s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType})
	return s, s.recv(5 * time.Second)
}

// nackDelta rejects the cluster response r with msg, as Envoy's error detail.
func nackDelta(s *delta, r *discovery.DeltaDiscoveryResponse, msg string) {
	s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: msg}})
}

// owners stands for the IR's sources: cluster "x" came from policy x of the namespace named by the type.
func owners(_, typeURL string, names []string, _ string) []apiwire.PolicyRef {
	var out []apiwire.PolicyRef
	for _, n := range names {
		out = append(out, ref(typeURL[strings.LastIndex(typeURL, ".")+1:], n))
	}
	return out
}

func ref(namespace, name string) apiwire.PolicyRef {
	return apiwire.PolicyRef{Namespace: namespace, Name: name}
}

// A delta response carries only what changed; its NACK is put on those resources, and on the one Envoy's
// message names when it carried several.
func TestDeltaNackIsPutOnTheResourceTheMessageNames(t *testing.T) {
	f := start(t)
	f.tracker.Owners = owners
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, r1 := clusterDelta(t, ctx, f)
	if r1 == nil || len(r1.Resources) != 1 {
		t.Fatalf("first response: %v", r1)
	}
	s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r1.Nonce})
	f.cache.Publish("g", state(t, "a", "b", "c"))
	r2 := s.recv(5 * time.Second)
	if r2 == nil || len(r2.Resources) != 2 {
		t.Fatalf("second response should carry b and c only: %v", r2)
	}
	nackDelta(s, r2, "Error adding/updating cluster(s) c: bad; b-c: worse")
	ts := clusterNack(t, f)
	if !slices.Equal(ts.NackedResources, []string{"c"}) || !slices.Equal(ts.NackedPolicies, []apiwire.PolicyRef{ref("Cluster", "c")}) {
		t.Errorf("NACK put on %v, policies %v; want [c] (b-c is not c, and a was not sent)", ts.NackedResources, ts.NackedPolicies)
	}
}

// A message naming none of a delta response's resources leaves every one of them a candidate.
func TestDeltaNackNamingNothingKeepsEveryCandidate(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a", "b"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, r1 := clusterDelta(t, ctx, f)
	nackDelta(s, r1, "something went wrong")
	if ts := clusterNack(t, f); !slices.Equal(ts.NackedResources, []string{"a", "b"}) || ts.NackedPolicies != nil {
		t.Errorf("NACK put on %v, policies %v; want [a b] and no owner lookup without Owners", ts.NackedResources, ts.NackedPolicies)
	}
}

// A state-of-the-world response carries every resource of its type; its NACK is put on the ones that
// differ from the last acknowledged response. An ACK clears it.
func TestSotwNackIsPutOnWhatChangedSinceTheLastAck(t *testing.T) {
	f := start(t)
	f.tracker.Owners = owners
	f.cache.Publish("g", state(t, "a", "b"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, r1 := clusterSotw(t, ctx, f)
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r1.Nonce, VersionInfo: r1.VersionInfo})
	f.cache.Publish("g", state(t, "a", "b", "c", "d"))
	r2 := s.recv(5 * time.Second)
	if r2 == nil || len(r2.Resources) != 4 {
		t.Fatalf("second response: %v", r2)
	}
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r2.Nonce, VersionInfo: r1.VersionInfo,
		ErrorDetail: &status.Status{Code: 3, Message: "a cluster is bad"}})
	ts := clusterNack(t, f)
	if !slices.Equal(ts.NackedResources, []string{"c", "d"}) || !slices.Equal(ts.NackedPolicies, []apiwire.PolicyRef{ref("Cluster", "c"), ref("Cluster", "d")}) {
		t.Errorf("NACK put on %v, policies %v; want [c d]: a and b were acknowledged as they are", ts.NackedResources, ts.NackedPolicies)
	}
	f.cache.Publish("g", state(t, "a", "b", "c"))
	r3 := s.recv(5 * time.Second)
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r3.Nonce, VersionInfo: r3.VersionInfo})
	if lag := f.tracker.Lagging(ctx, []string{"g"}, 5*time.Second); len(lag) != 0 {
		t.Fatalf("ACK not recorded: %+v", f.tracker.Proxies())
	}
	for _, ts := range f.tracker.Proxies()[0].Types {
		if ts.Nacked || ts.NackedResources != nil || ts.NackedPolicies != nil {
			t.Errorf("an ACK left %+v", ts)
		}
	}
}

func TestMentionsMatchesWholeNamesOnly(t *testing.T) {
	msg := "Listener: Error adding/updating listener(s) http-8080: cannot bind"
	for name, want := range map[string]bool{"http-8080": true, "http-80": false, "http-808": false, "ttp-8080": false, "default/a/b": false} {
		if got := xdsserver.Mentions(msg, name); got != want {
			t.Errorf("%s: got %v", name, got)
		}
	}
	if !xdsserver.Mentions("cluster default/a/b: bad", "default/a/b") || xdsserver.Mentions("cluster default/a/b: bad", "default/a") {
		t.Error("a cluster name is matched whole")
	}
}

// A delta NACK stays until the rejected resource is sent again or removed: acknowledging a later response
// that carries other resources does not mean Envoy took it.
func TestDeltaNackLastsUntilTheRejectedResourceIsReplaced(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, r := clusterDelta(t, ctx, f)
	s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.Nonce})
	f.cache.Publish("g", state(t, "a", "b", "c"))
	r = s.recv(5 * time.Second)
	nackDelta(s, r, "cluster c: bad")
	clusterNack(t, f)
	ack := func(want int) string {
		t.Helper()
		r := s.recv(5 * time.Second)
		if r == nil || len(r.Resources)+len(r.RemovedResources) != want {
			t.Fatalf("response: %v", r)
		}
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.Nonce})
		return r.SystemVersionInfo
	}
	f.cache.Publish("g", state(t, "a", "b", "c", "d"))
	version := ack(1) // d only
	if !f.tracker.Wait(ctx, func(ps []xdsserver.ProxyStatus) bool { return ps[0].Version == version }) {
		t.Fatal("ACK not recorded")
	}
	p := f.tracker.Proxies()[0]
	if p.State != xdsserver.Nacked || !slices.ContainsFunc(p.Types, func(ts xdsserver.TypeStatus) bool { return slices.Equal(ts.NackedResources, []string{"c"}) }) {
		t.Errorf("an ACK of d cleared the NACK of c: %+v", p)
	}
	// A second rejection adds to the first.
	f.cache.Publish("g", state(t, "a", "b", "c", "d", "e"))
	r = s.recv(5 * time.Second)
	nackDelta(s, r, "cluster e: bad")
	if !f.tracker.Wait(ctx, func(ps []xdsserver.ProxyStatus) bool {
		return slices.ContainsFunc(ps[0].Types, func(ts xdsserver.TypeStatus) bool { return slices.Equal(ts.NackedResources, []string{"c", "e"}) })
	}) {
		t.Fatalf("a second NACK forgot the first: %+v", f.tracker.Proxies())
	}
	f.cache.Publish("g", state(t, "a", "b", "d"))
	version = ack(2) // c and e removed
	if lag := f.tracker.Lagging(ctx, []string{"g"}, 5*time.Second); len(lag) != 0 {
		t.Fatalf("removing c did not clear its NACK: %+v", f.tracker.Proxies())
	}
	if p := f.tracker.Proxies()[0]; p.State != xdsserver.Synced {
		t.Errorf("state %s after c was removed", p.State)
	}
}

// A resource owned by more policies than a status should list leaves the NACK unattributed (it then counts
// against every policy of the group) rather than listing them all.
func TestNackOfAResourceWithTooManyOwnersIsUnattributed(t *testing.T) {
	f := start(t)
	f.tracker.Owners = func(string, string, []string, string) []apiwire.PolicyRef {
		out := make([]apiwire.PolicyRef, xdsserver.MaxNackedPolicies+1)
		for i := range out {
			out[i] = ref("ns", "p"+strconv.Itoa(i))
		}
		return out
	}
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, r := clusterDelta(t, ctx, f)
	nackDelta(s, r, "a: bad")
	if ts := clusterNack(t, f); ts.NackedResources != nil || ts.NackedPolicies != nil {
		t.Errorf("NACK put on %v, %d policies; want it unattributed", ts.NackedResources, len(ts.NackedPolicies))
	}
}
