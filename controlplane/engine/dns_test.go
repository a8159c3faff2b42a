package engine

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/dnsresolve"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/internal/dnstest"
)

// resolvingEngine is an engine whose resolver asks srv.
func resolvingEngine(t *testing.T, srv *dnstest.Server) (*Engine, *xdscache.Cache) {
	t.Helper()
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := &dnsresolve.Resolver{Servers: []string{srv.Addr}, HostsFile: "/nonexistent", ResolvConf: "/nonexistent", Hostname: "box.invalid"}
	e.Resolve = func(ctx context.Context, q translate.DNSQuery) ([]netip.Addr, time.Duration, error) {
		a, err := r.Resolve(ctx, q.Name, q.Family)
		return a.Addrs, a.TTL, err
	}
	return e, cache
}

func published(t *testing.T, cache *xdscache.Cache, name string) (*clusterv3.Cluster, *endpointv3.ClusterLoadAssignment, string) {
	t.Helper()
	_, st := cache.State("default")
	r, ok := st.Lookup(resource.ClusterType, name)
	if !ok {
		t.Fatalf("no cluster %s", name)
	}
	c := &clusterv3.Cluster{}
	if err := r.Any().UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	var cla *endpointv3.ClusterLoadAssignment
	if er, ok := st.Lookup(resource.EndpointType, name); ok {
		cla = &endpointv3.ClusterLoadAssignment{}
		if err := er.Any().UnmarshalTo(cla); err != nil {
			t.Fatal(err)
		}
	}
	cv, _ := st.ResourceVersion(resource.ClusterType, name)
	return c, cla, cv
}

func addrsOf(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	return out
}

// TestDNSBackendIsServedAsCheckedEndpoints: a backend named by DNS is an EDS cluster whose endpoints are
// the addresses lbplane resolved; a changed answer changes the endpoints alone (the cluster keeps its
// version); a failed resolution keeps the last good addresses; an answer that rebinds to loopback or the
// metadata address is left out and said so in status; and with the operator's opt-in, dns.resolver: Envoy
// is Envoy's DNS cluster with no EDS resource.
func TestDNSBackendIsServedAsCheckedEndpoints(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("app.internal", 0, "198.51.100.7")
	e, cache := resolvingEngine(t, srv)
	const name = "default/p/a"
	p := policy("p", 8080)
	p.Spec.Backends[0].Endpoints[0].Address = "app.internal"
	p.Spec.Backends[0].DNS = &v1alpha1.BackendDNS{RefreshInterval: &metav1.Duration{Duration: 100 * time.Millisecond}}
	res := e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{p})
	c, cla, cv := published(t, cache, name)
	if c.GetClusterType() != nil || c.GetType() != clusterv3.Cluster_EDS || strings.Join(addrsOf(cla), ",") != "198.51.100.7" {
		t.Fatalf("first answer: cluster type %v/%v, endpoints %v", c.GetClusterType(), c.GetType(), addrsOf(cla))
	}
	if h := cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetHostname(); h != "app.internal" {
		t.Errorf("the endpoint's host name is %q, want the name it was resolved from", h)
	}
	if r := res.Policies.Of(objkey.Of(p)); !r.ResolvedRefs || r.ResolvedByEnvoy || r.Endpoints != 1 {
		t.Errorf("status after the first answer: %+v", r)
	}

	refresh := func(what string, want int) {
		t.Helper()
		// The name is due 100ms after its last resolution: at most a few refreshes, each bounded.
		deadline := time.Now().Add(10 * time.Second)
		for n := 0; n < want; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no change within 10s", what)
			}
			n += e.RefreshDNS(time.Now().Add(time.Second))
		}
	}
	srv.Set("app.internal", 0, "198.51.100.8", "198.51.100.9")
	refresh("second answer", 1)
	_, cla, cv2 := published(t, cache, name)
	if got := strings.Join(addrsOf(cla), ","); got != "198.51.100.8,198.51.100.9" {
		t.Errorf("second answer: endpoints %s", got)
	}
	if cv2 != cv {
		t.Error("a changed answer changed the cluster, not only its endpoints")
	}

	srv.Fail(true)
	before := e.DNSResolutions()
	for e.DNSResolutions() == before {
		e.RefreshDNS(time.Now().Add(time.Second))
	}
	_, cla, _ = published(t, cache, name)
	if got := strings.Join(addrsOf(cla), ","); got != "198.51.100.8,198.51.100.9" {
		t.Errorf("after a failed resolution: endpoints %s, want the last good ones", got)
	}
	srv.Fail(false)

	srv.Set("app.internal", 0, "127.0.0.1", "169.254.169.254", "198.51.100.9")
	refresh("rebinding", 1)
	_, cla, _ = published(t, cache, name)
	if got := strings.Join(addrsOf(cla), ","); got != "198.51.100.9" {
		t.Errorf("rebinding to loopback and metadata: endpoints %s, want the allowed one alone", got)
	}
	r, _ := e.Result()
	pr := r.Policies.Of(objkey.Of(p))
	if pr.ResolvedRefs || pr.ResolvedRefsReason != translate.ReasonForbiddenAddress || !strings.Contains(pr.ResolvedRefsMessage, `"app.internal" resolves to 127.0.0.1, 169.254.169.254, left out`) {
		t.Errorf("status after rebinding: %s %s", pr.ResolvedRefsReason, pr.ResolvedRefsMessage)
	}

	// Envoy resolves it: the operator's opt-in.
	e.Reach = reach.Rules{EnvoyDNS: true}
	q := p.DeepCopy()
	q.Spec.Backends[0].DNS.Resolver = v1alpha1.DNSResolverEnvoy
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{q})
	c, cla, _ = published(t, cache, name)
	if c.GetClusterType().GetName() != xdsbuild.DNSClusterType || cla != nil || c.GetLoadAssignment() == nil {
		t.Errorf("dns.resolver Envoy: cluster type %q, EDS resource %v", c.GetClusterType().GetName(), cla != nil)
	}
}

// TestDNSRefreshFollowsTheSchedule: a name is resolved again at its refresh interval, or with respectTTL
// at its answer's TTL clamped to [min(5s, refreshInterval), 1h].
func TestDNSRefreshFollowsTheSchedule(t *testing.T) {
	w := &dnsWant{refresh: map[time.Duration]int{10 * time.Second: 1, 2 * time.Second: 1}}
	for _, c := range []struct {
		respect  bool
		ttl, due time.Duration
	}{
		{false, 30 * time.Second, 2 * time.Second},
		{true, 30 * time.Second, 30 * time.Second},
		{true, time.Second, 2 * time.Second}, // floored at min(5s, the shortest refresh)
		{true, 0, 2 * time.Second},
		{true, 48 * time.Hour, time.Hour},
	} {
		w.respectTTL = map[bool]int{true: 1}[c.respect]
		if got := w.interval(c.ttl); got != c.due {
			t.Errorf("respectTTL %v, TTL %s: due in %s, want %s", c.respect, c.ttl, got, c.due)
		}
	}
}
