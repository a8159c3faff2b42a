package trafficmodel

import (
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// TestDNSBackendIsNotGuessed: a backend of host names is traced and previewed over its names, and says so;
// a hash is never given an owner, since the ring holds addresses only Envoy knows.
func TestDNSBackendIsNotGuessed(t *testing.T) {
	p, tr := traceHashed(t, []ir.Endpoint{{Address: "app.internal", Port: 8080, Weight: 1}}, &ir.DNS{LookupFamily: "V4"})
	b := tr.Backends[0]
	if b.Owner != "" || b.Endpoint != "" || !b.ResolvedByEnvoy || !strings.Contains(b.Note, "resolves at run time") {
		t.Errorf("hash on a DNS backend: owner %q, endpoint %q, note %q", b.Owner, b.Endpoint, b.Note)
	}
	pv := Compare(p, p)
	if len(pv.Changes) != 1 || pv.Changes[0].Address != "app.internal:8080" || !strings.Contains(pv.Changes[0].State, "resolved by Envoy") {
		t.Errorf("preview of a DNS backend: %+v", pv.Changes)
	}
}

// TestDNSBackendResolvedByLbplaneIsPredicted: a backend whose names lbplane resolved is an EDS cluster of
// addresses, each with the name as its host name: the model balances over the addresses, as Envoy does,
// and a hash has an owner.
func TestDNSBackendResolvedByLbplaneIsPredicted(t *testing.T) {
	_, tr := traceHashed(t, []ir.Endpoint{{Address: "198.51.100.7", Port: 8080, Weight: 1, Hostname: "app.internal"},
		{Address: "198.51.100.8", Port: 8080, Weight: 1, Hostname: "app.internal"}}, nil)
	b := tr.Backends[0]
	if b.ResolvedByEnvoy || b.Owner == "" || !strings.HasPrefix(b.Owner, "198.51.100.") || strings.Contains(b.Note, "resolves at run time") {
		t.Errorf("hash on a backend lbplane resolved: owner %q, resolved by Envoy %v, note %q", b.Owner, b.ResolvedByEnvoy, b.Note)
	}
}

// traceHashed models a policy whose one backend, of endpoints eps (resolved by Envoy with dns), is hashed
// on x-user, and traces a request of alice through it.
func traceHashed(t *testing.T, eps []ir.Endpoint, dns *ir.DNS) (*Policy, *Trace) {
	t.Helper()
	c := &ir.Cluster{Name: "ns/p/app", Algorithm: ir.RingHash, Source: ir.Source{Namespace: "ns", Name: "p", Backend: "app"},
		RingHash: &ir.RingHashSize{Min: 1024, Max: 1024}, DNS: dns, Endpoints: eps}
	route := &ir.Route{Name: "r", PathType: ir.PathPrefix, Path: "/", Clusters: []ir.WeightedCluster{{Name: c.Name, Weight: 1}},
		HashKeys: []ir.HashKey{{Header: "x-user"}}}
	cfg := &ir.Config{Groups: map[string]*ir.Group{"default": {Name: "default", Clusters: []*ir.Cluster{c},
		Listeners: []*ir.Listener{{Name: "l", Port: 80, Protocol: ir.HTTP, VirtualHosts: []*ir.VirtualHost{{Name: "ns/p", Source: ir.Source{Namespace: "ns", Name: "p"}, Routes: []*ir.Route{route}}}}}}}}
	p, err := ForPolicy(cfg, "ns", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := p.TraceRequest(Request{Path: "/", Headers: map[string][]string{"x-user": {"alice"}}})
	if len(tr.Backends) != 1 {
		t.Fatalf("backends %+v", tr.Backends)
	}
	return p, tr
}
