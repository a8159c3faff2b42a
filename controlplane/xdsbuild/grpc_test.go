package xdsbuild_test

import (
	"net"
	"slices"
	"strconv"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
)

// grpcPolicies are the load balancing policies grpc-go v1.85 registers (xdslbregistry/converter).
var grpcPolicies = []string{
	"type.googleapis.com/envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3.ClientSideWeightedRoundRobin",
	"type.googleapis.com/envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash",
	"type.googleapis.com/envoy.extensions.load_balancing_policies.pick_first.v3.PickFirst",
	"type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin",
	"type.googleapis.com/envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality",
	"type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest",
}

// TestGRPCProfileOfEveryGoldenInput builds the gRPC profile of every golden input and checks it against the
// rules grpc-go reads xDS with (the e2e test TestProxylessGRPC runs a real grpc-go client): the Envoy
// output of the same inputs is held by TestGolden, which this build must not change.
func TestGRPCProfileOfEveryGoldenInput(t *testing.T) {
	for _, gc := range cases(t) {
		t.Run(gc.name, func(t *testing.T) {
			cfg := readIR(t, gc.path)
			for name, g := range cfg.Groups {
				before, err := xdsbuild.Build(g)
				if err != nil {
					t.Fatal(err)
				}
				st, err := xdsbuild.GRPC(g)
				if err != nil {
					t.Fatalf("group %s: %v", name, err)
				}
				after, _ := xdsbuild.Build(g)
				for typ := range before {
					if !slices.EqualFunc(before[typ], after[typ], proto.Equal) {
						t.Fatalf("building the gRPC profile changed the Envoy %s", typ)
					}
				}
				checkGRPCProfile(t, g, st.Resources(resource.ClusterType), st.Resources(resource.EndpointType), st.Resources(resource.ListenerType))
				if n := len(st.Resources(resource.RouteType)) + len(st.Resources(resource.SecretType)) + len(st.Resources(resource.ScopedRouteType)); n != 0 {
					t.Errorf("%d route tables, secrets or scopes in the gRPC profile: its routes are inline", n)
				}
			}
		})
	}
}

func checkGRPCProfile(t *testing.T, g *ir.Group, clusters, endpoints, listeners []proto.Message) {
	t.Helper()
	byName := map[string]*ir.Cluster{}
	for _, c := range g.Clusters {
		byName[c.Name] = c
	}
	served := 0
	for _, c := range g.Clusters {
		if xdsbuild.GRPCRefused(c) == "" {
			served++
		}
	}
	if len(clusters) != served || len(endpoints) != served {
		t.Fatalf("%d clusters and %d assignments, want %d (the clusters gRPC can take)", len(clusters), len(endpoints), served)
	}
	for _, m := range clusters {
		c := m.(*clusterv3.Cluster)
		if c.TransportSocket != nil {
			t.Errorf("cluster %s: a transport socket (gRPC refuses SDS)", c.Name)
		}
		if c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil {
			t.Errorf("cluster %s: EDS not over ADS", c.Name)
		}
		var first string
		for _, p := range c.GetLoadBalancingPolicy().GetPolicies() {
			if u := p.GetTypedExtensionConfig().GetTypedConfig().GetTypeUrl(); slices.Contains(grpcPolicies, u) {
				first = u
				break
			}
		}
		want := map[ir.Algorithm]string{ir.Maglev: grpcPolicies[1], ir.RingHash: grpcPolicies[1], ir.Random: grpcPolicies[3],
			ir.LeastRequest: grpcPolicies[5], ir.BackendUtilization: grpcPolicies[0]}[byName[c.Name].Algorithm]
		if want == "" {
			want = grpcPolicies[3]
		}
		if len(byName[c.Name].ZoneWeights) > 0 && byName[c.Name].Algorithm != ir.RingHash && byName[c.Name].Algorithm != ir.Maglev {
			want = grpcPolicies[4]
		}
		if rh := (&ringhashv3.RingHash{}); first == grpcPolicies[1] {
			for _, p := range c.GetLoadBalancingPolicy().GetPolicies() {
				if p.GetTypedExtensionConfig().GetTypedConfig().UnmarshalTo(rh) == nil && rh.HashFunction != ringhashv3.RingHash_XX_HASH {
					t.Errorf("cluster %s: ring hash with %s (gRPC takes XX_HASH only)", c.Name, rh.HashFunction)
				}
			}
		}
		if first != want {
			t.Errorf("cluster %s (%s): a gRPC client takes %q, want %q", c.Name, byName[c.Name].Algorithm, first, want)
		}
	}
	for _, m := range endpoints {
		cla := m.(*endpointv3.ClusterLoadAssignment)
		zoneWeights := len(byName[cla.ClusterName].ZoneWeights) > 0
		for _, loc := range cla.Endpoints {
			if loc.Locality == nil {
				t.Errorf("endpoints %s: a locality without one (gRPC refuses it)", cla.ClusterName)
			}
			if loc.GetLoadBalancingWeight().GetValue() == 0 && !zoneWeights {
				t.Errorf("endpoints %s: locality %v has no weight (gRPC ignores it)", cla.ClusterName, loc.Locality)
			}
		}
	}
	for _, m := range listeners {
		l := m.(*listenerv3.Listener)
		host, port, err := net.SplitHostPort(l.Name)
		if _, perr := strconv.Atoi(port); err != nil || perr != nil || host == "" {
			t.Errorf("listener %q is not host:port", l.Name)
		}
		hcm := &hcmv3.HttpConnectionManager{}
		if err := l.GetApiListener().GetApiListener().UnmarshalTo(hcm); err != nil {
			t.Fatalf("listener %s: no API listener: %v", l.Name, err)
		}
		if fs := hcm.HttpFilters; len(fs) == 0 || fs[len(fs)-1].Name != "envoy.filters.http.router" {
			t.Errorf("listener %s: the router is not the last HTTP filter", l.Name)
		}
		vhs := hcm.GetRouteConfig().GetVirtualHosts()
		if len(vhs) != 1 || !slices.Contains(vhs[0].Domains, l.Name) {
			t.Fatalf("listener %s: want one inline virtual host for %s, got %v", l.Name, l.Name, vhs)
		}
		for _, r := range vhs[0].Routes {
			a := r.GetRoute()
			if a == nil || a.Timeout != nil || len(r.TypedPerFilterConfig) > 0 {
				t.Errorf("route %s: %v (want a route action with max_stream_duration for timeouts, no per-filter config)", r.Name, r)
			}
			if rp := a.GetRetryPolicy(); rp != nil && (rp.RetryOn != "unavailable" || rp.GetNumRetries().GetValue() < 1) {
				t.Errorf("route %s: retry policy %v (want gRPC status codes, at least one retry)", r.Name, rp)
			}
			for _, hp := range a.GetHashPolicy() {
				if hp.GetHeader() == nil {
					t.Errorf("route %s: hash policy %v, which gRPC ignores", r.Name, hp)
				}
			}
		}
	}
}
