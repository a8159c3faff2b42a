package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/backend"
)

// startCountingBackend is a backend that counts the connections it accepted.
func startCountingBackend(t *testing.T, name string) (*Backend, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	port, lis := listenReserved(t)
	b := serveBackend(t, name, 0, port, lis, backend.ServeOptions{}, func(srv *http.Server) {
		srv.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
	})
	return b, &conns
}

// TestMaxConnectionDurationReconnects: with maxConnectionDuration, Envoy closes an upstream connection once
// it is that old and opens a new one, though one keep-alive client keeps it busy all along.
func TestMaxConnectionDurationReconnects(t *testing.T) {
	t.Parallel()
	b, conns := startCountingBackend(t, "a")
	tmpl := `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: mcd}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      connection: {maxConnectionDuration: 300ms}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`
	e := setupWith(t, tmpl, map[string]any{"Backend": b.Port}, b)
	waitServing(t, e.URL, "a")
	waitSynced(t, e.L, 1)
	c := newClient(true)
	before := conns.Load()
	// Bounded: 3000 requests or 20s, until the backend has seen 3 more connections.
	deadline := time.Now().Add(20 * time.Second)
	sent := 0
	for ; sent < 3000 && time.Now().Before(deadline) && conns.Load()-before < 3; sent++ {
		if _, err := requestVia(c, e.URL, nil); err != nil {
			t.Fatalf("request %d: %v", sent, err)
		}
	}
	got := conns.Load() - before
	t.Logf("%d requests over one client connection; the backend accepted %d new connections", sent, got)
	if got < 3 {
		t.Errorf("the backend accepted %d new connections; want Envoy to reconnect as each reaches 300ms", got)
	}
	if n := envoyStat(t, e.E, "cluster.default/mcd/app.upstream_cx_max_duration_reached"); n < 2 {
		t.Errorf("Envoy closed %d connections for their age; want at least 2", n)
	}
}

// TestRetryMovesToTheNextPriority: zone-a's endpoints fail every request, zone-b's answer. With
// avoidPreviousPriorities the single retry goes to zone-b, so every request succeeds; the first try still
// goes to zone-a, the preferred zone.
func TestRetryMovesToTheNextPriority(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a1", "a2", "b1")
	bs[0].FailWith(http.StatusServiceUnavailable)
	bs[1].FailWith(http.StatusServiceUnavailable)
	tmpl := `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: prio}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - name: all
      backends: [{name: app}]
      retry: {conditions: [5xx], attempts: 1, avoidPreviousHosts: false, avoidPreviousPriorities: true}
  backends:
    - name: app
      loadBalancing: {zoneFailover: [zone-a, zone-b]}
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 0).Port}}, zone: zone-a}
        - {address: 127.0.0.1, port: {{(index .B 1).Port}}, zone: zone-a}
        - {address: 127.0.0.1, port: {{(index .B 2).Port}}, zone: zone-b}
`
	e := setupWith(t, tmpl, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "b1")
	waitSynced(t, e.L, 1)
	served := func() [3]int64 { return [3]int64{bs[0].Served.Load(), bs[1].Served.Load(), bs[2].Served.Load()} }
	before := served()
	counts := newClient(true).Spread(t, e.URL, 200, nil)
	after := served()
	zoneA := after[0] - before[0] + after[1] - before[1]
	t.Logf("200 requests: answers %v; zone-a got %d first tries, zone-b %d", counts, zoneA, after[2]-before[2])
	if counts["b1"] != 200 {
		t.Errorf("answers %v; want every request answered by zone-b after its retry", counts)
	}
	if zoneA != 200 {
		t.Errorf("zone-a got %d first tries of 200: the preferred zone should get every first try", zoneA)
	}
}

// TestPerEndpointStatsReachPrometheus: with perEndpointStats, Envoy's Prometheus output has a request
// counter per endpoint, and each matches what that endpoint served.
func TestPerEndpointStatsReachPrometheus(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b")
	tmpl := `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: pes}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      perEndpointStats: true
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`
	e := setupWith(t, tmpl, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "a", "b")
	waitSynced(t, e.L, 1)
	newClient(true).Spread(t, e.URL, 100, nil)
	eventually(t, 30*time.Second, "each endpoint's request counter matches what it served", func() error {
		resp, err := adminDo(e.E, http.MethodGet, "/stats/prometheus")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, b := range bs {
			re := regexp.MustCompile(`(?m)^envoy_cluster_endpoint_rq_total\{[^}]*envoy_endpoint_address="127\.0\.0\.1:` + strconv.Itoa(b.Port) + `"[^}]*\} (\d+)`)
			m := re.FindSubmatch(body)
			if m == nil {
				return fmt.Errorf("no envoy_cluster_endpoint_rq_total for %s (port %d)", b.Name, b.Port)
			}
			if n, _ := strconv.ParseInt(string(m[1]), 10, 64); n != b.Served.Load() {
				return fmt.Errorf("%s: Envoy counts %d requests, the endpoint served %d", b.Name, n, b.Served.Load())
			}
		}
		return nil
	})
}

// TestAlwaysEjectOneEndpoint: with maxEjectionPercent 0 outlier detection may eject nothing, unless
// alwaysEjectOneEndpoint lets it eject one: then the failing endpoint leaves and every request succeeds.
func TestAlwaysEjectOneEndpoint(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "bad", "good1", "good2")
	bs[0].FailWith(http.StatusInternalServerError)
	tmpl := `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: eject}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - name: all
      backends: [{name: app}]
      retry: {attempts: 0}
  backends:
    - name: app
      healthCheck:
        passive: {consecutive5xx: 2, interval: 100ms, maxEjectionPercent: 0, alwaysEjectOneEndpoint: true, maxEjectionTime: 1h}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`
	e := setupWith(t, tmpl, map[string]any{"B": bs}, bs...)
	waitSynced(t, e.L, 1)
	c := newClient(true)
	eventually(t, 30*time.Second, "the failing endpoint is ejected", func() error {
		for i := 0; i < 30; i++ {
			if b, code, err := doWith(c, e.URL, nil); err != nil || code != 200 {
				return fmt.Errorf("status %d from %q: %v", code, b, err)
			}
		}
		return nil
	})
	counts := c.Spread(t, e.URL, 100, nil)
	if counts["bad"] != 0 {
		t.Errorf("answers %v; the failing endpoint should be ejected", counts)
	}
}
