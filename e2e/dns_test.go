package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/backend"
	"github.com/lbplane/lbplane/internal/dnstest"
	"github.com/lbplane/lbplane/internal/portreserve"
)

// dnsServer answers A and AAAA queries for one name with a set of addresses the test changes, on
// 127.0.0.1 (internal/dnstest), with TTL 0: nothing on the way may cache the answer past the refresh.
type dnsServer struct {
	*dnstest.Server
	name string
}

func startDNSServer(t *testing.T, name string, answer ...string) *dnsServer {
	t.Helper()
	s := &dnsServer{Server: dnstest.Start(t), name: name}
	s.Set(answer...)
	return s
}

// Set replaces the addresses the name resolves to.
func (s *dnsServer) Set(addrs ...string) { s.Server.Set(s.name, 0, addrs...) }

// startBackendAt runs a backend on ip:port: a DNS answer carries no port, so the backends of one name
// differ by loopback address and share the port, reserved on each of them (portreserve.ReserveOn).
func startBackendAt(t *testing.T, name, ip string, port int) *Backend {
	t.Helper()
	lis, err := portreserve.ListenOn(ip, port)
	if err != nil {
		t.Fatalf("backend %s on %s:%d: %v", name, ip, port, err)
	}
	return serveBackend(t, name, 0, port, lis, backend.ServeOptions{}, nil)
}

// startEnvoyResolving is startEnvoy with Envoy's DNS resolver pointed at one server (lbctl bootstrap
// --dns-resolver).
func startEnvoyResolving(t *testing.T, l *Lbplane, nodeID, resolver string) *Envoy {
	t.Helper()
	return startEnvoyFrom(t, envoybootstrap.Params{NodeID: nodeID, Group: "default", XDS: l.XDSAddr, Delta: true,
		TLS: envoyTLS(t, l, nodeID, "default"), DNSResolvers: []string{resolver}}, "config:info,upstream:info,dns:debug")
}

// TestDNSBackendFollowsTheAnswer: a backend named by DNS gets one endpoint per address the name resolves
// to, with the resolver pointed at a DNS server the test runs; when the answer changes, the traffic moves to
// the new addresses, and status shows the resolved endpoints. By default lbplane resolves the name and
// sends the addresses as endpoints (EDS); with the operator's opt-in (--allow-envoy-dns) and dns.resolver:
// Envoy, Envoy resolves it with its own resolver (a DNS cluster).
func TestDNSBackendFollowsTheAnswer(t *testing.T) {
	t.Parallel()
	for _, byEnvoy := range []bool{false, true} {
		t.Run(map[bool]string{false: "lbplane", true: "envoy"}[byEnvoy], func(t *testing.T) {
			t.Parallel()
			testDNSBackendFollowsTheAnswer(t, byEnvoy)
		})
	}
}

func testDNSBackendFollowsTheAnswer(t *testing.T, byEnvoy bool) {
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	port := portreserve.ReserveOn(t, ips...)
	bs := map[string]*Backend{}
	for i, ip := range ips {
		name := fmt.Sprintf("b%d", i+2)
		bs[name] = startBackendAt(t, name, ip, port)
	}
	const host = "app.lbplane.test"
	ns := startDNSServer(t, host, "127.0.0.2", "127.0.0.3")

	var l *Lbplane
	resolver := "Lbplane"
	if byEnvoy {
		l = startLbplane(t, "--allow-envoy-dns")
		startEnvoyResolving(t, l, "envoy-dns", ns.Addr)
		resolver = "Envoy"
	} else {
		l = startLbplane(t, "--dns-resolver", ns.Addr)
		startEnvoy(t, l, "envoy-dns", true)
	}
	listen := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", listen)
	push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: dns}
spec:
  listener: {address: 127.0.0.1, port: {{.Listen}}, protocol: HTTP}
  backends:
    - name: app
      dns: {refreshInterval: 500ms, lookupFamily: V4, resolver: `+resolver+`}
      healthCheck:
        active: {type: HTTP, interval: 1s, http: {path: /healthz}}
      endpoints:
        - {address: `+host+`, port: {{.Port}}}
`, map[string]any{"Listen": listen, "Port": port}))
	waitServing(t, url, "b2", "b3")
	waitSynced(t, l, 1)

	c := newClient(true)
	eventually(t, 15*time.Second, "both addresses of the first answer serve", func() error {
		if s := c.Spread(t, url, 20, nil); s["b2"] == 0 || s["b3"] == 0 {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	s := c.Spread(t, url, 200, nil)
	if s["b4"] != 0 || s["b2"] < 50 || s["b3"] < 50 {
		t.Errorf("first answer (127.0.0.2, 127.0.0.3): %v; want both of them and nothing on b4", s)
	}
	t.Logf("first answer: %v, %d queries so far", s, ns.Queries.Load())

	// lbplane maps the hosts to the backend by cluster name, those Envoy resolved (which it never listed)
	// too.
	eventually(t, 20*time.Second, "status shows the two resolved endpoints", func() error {
		b, err := backendStatus(t, l, "dns", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Total != 2 || b.Endpoints.Healthy != 2 {
			return fmt.Errorf("%+v", b.Endpoints)
		}
		// The policy lists one name; its endpoints are the two addresses Envoy resolved.
		// lbctl status NAME -o json prints the policy, as lbctl get NAME -o json does.
		var pol v1alpha1.LoadBalancerPolicy
		if err := json.Unmarshal([]byte(lbctlOK(t, l, "status", "dns", "-o", "json")), &pol); err != nil {
			return err
		}
		st := pol.Status
		if st.Endpoints.Total != 2 || st.Endpoints.Healthy != 2 {
			return fmt.Errorf("policy endpoints %+v", st.Endpoints)
		}
		return nil
	})
	// explain shows the DNS cluster with its endpoint inside it, or the endpoints lbplane resolved.
	out := lbctlOK(t, l, "explain", "dns")
	if byEnvoy && (!strings.Contains(out, "envoy.clusters.dns") || !strings.Contains(out, "load_assignment.endpoints")) {
		t.Errorf("lbctl explain dns does not show the DNS cluster:\n%s", out)
	}
	if !byEnvoy && strings.Contains(out, "envoy.clusters.dns") {
		t.Errorf("lbctl explain dns shows a DNS cluster Envoy resolves, with lbplane resolving:\n%s", out)
	}

	ns.Set("127.0.0.4")
	changed := time.Now()
	eventually(t, 30*time.Second, "the new address takes the traffic", func() error {
		if s := c.Spread(t, url, 20, nil); s["b4"] != 20 {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	t.Logf("traffic moved %s after the answer changed (refresh interval 500ms)", time.Since(changed).Round(time.Millisecond))
	before := map[string]int64{}
	for n, b := range bs {
		before[n] = b.Served.Load()
	}
	s = c.Spread(t, url, 200, nil)
	if s["b4"] != 200 {
		t.Errorf("second answer (127.0.0.4): %v; want all 200 on b4", s)
	}
	// Counted by the backends too, not only by the answers' header.
	if got := bs["b4"].Served.Load() - before["b4"]; got != 200 || bs["b2"].Served.Load() != before["b2"] || bs["b3"].Served.Load() != before["b3"] {
		t.Errorf("served during the last 200: b2 %d, b3 %d, b4 %d", bs["b2"].Served.Load()-before["b2"], bs["b3"].Served.Load()-before["b3"], got)
	}
	eventually(t, 20*time.Second, "status shows the one endpoint of the new answer", func() error {
		b, err := backendStatus(t, l, "dns", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Total != 1 {
			return fmt.Errorf("%+v", b.Endpoints)
		}
		return nil
	})
	if n := ns.Queries.Load(); n < 2 {
		t.Errorf("the DNS server got %d queries; the name must have been asked again", n)
	}
}
