package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// clusterStatsPolicy ejects on passive checks only: an active check that passes would put the endpoint back
// (Envoy's successful_active_health_check_uneject_host) before lbplane reads it as ejected.
const clusterStatsPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: st}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      perEndpointStats: true
      healthCheck:
        passive: {consecutive5xx: 3, interval: 1s, baseEjectionTime: 30s, maxEjectionPercent: 50}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// hasStat tells whether admin's /stats text lists the stat (counters and gauges "name: value", histograms
// "name: P0(...)").
func hasStat(stats, name string) bool {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `: `).MatchString(stats)
}

// TestClusterStatsUsedKeepsWhatLbplaneReads: an Envoy bootstrapped with --cluster-stats used still gives
// lbplane everything its policy status shows (endpoint health, requests, errors, p99, responses by class,
// bytes, the outlier detector that ejected an endpoint) and the per-endpoint Prometheus series, and leaves out the cluster stats nothing
// reads; an Envoy with the default (all) on the same lbplane has them.
func TestClusterStatsUsedKeepsWhatLbplaneReads(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	l := startLbplane(t)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	used := startEnvoyFrom(t, envoybootstrap.Params{NodeID: "used", Group: "default", XDS: l.XDSAddr, Delta: true,
		TLS: envoyTLS(t, l, "used", "default"), ClusterStats: envoybootstrap.ClusterStatsUsed}, "config:info,upstream:info", "--drain-time-s", "1")
	// In a group of its own with no policy: only the bootstrap's clusters, the same in both modes.
	all := startEnvoyFrom(t, envoybootstrap.Params{NodeID: "all", Group: "other", XDS: l.XDSAddr, Delta: true,
		TLS: envoyTLS(t, l, "all", "other")}, "config:info,upstream:info", "--drain-time-s", "1")
	push(t, l, policy(t, clusterStatsPolicy, map[string]any{"Port": port, "B": bs}))
	waitServing(t, url, "a", "b", "c")
	load := startLoad(url, 100, 4, 2*time.Minute)
	defer load.Stop()

	eventually(t, 15*time.Second, "all three healthy, with requests and a p99", func() error {
		b, err := backendStatus(t, l, "st", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Total != 3 || b.Endpoints.Healthy != 3 || b.Requests == 0 || b.LatencyP99Ms == nil || b.Proxies != 1 ||
			b.Responses == nil || b.Responses.Success == 0 || b.Bytes == nil || b.Bytes.Received == 0 || b.Bytes.Sent == 0 {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})
	bs[2].FailWith(500)
	eventually(t, 10*time.Second, "c shown as ejected by outlier detection, attributed to consecutive 5xx", func() error {
		b, err := backendStatus(t, l, "st", "app")
		if err != nil {
			return err
		}
		if !slices.Contains(ejectedReasons(b, fmt.Sprintf("127.0.0.1:%d", bs[2].Port)), "outlier detection: consecutive 5xx") || b.Errors == 0 {
			return fmt.Errorf("%+v\n%s", b, adminGet(t, used.AdminPort, "/stats?filter=outlier_detection"))
		}
		return nil
	})
	bs[2].FailWith(0)

	const c = "cluster.default/st/app."
	stats := adminGet(t, used.AdminPort, "/stats")
	for _, name := range []string{c + "upstream_rq_time", c + "upstream_rq_total", c + "upstream_rq_2xx", c + "upstream_rq_5xx",
		c + "membership_healthy", c + "membership_total", c + "outlier_detection.ejections_active",
		c + "upstream_cx_rx_bytes_total", c + "upstream_cx_tx_bytes_total", c + "upstream_cx_none_healthy",
		c + "outlier_detection.ejections_enforced_consecutive_5xx",
		// What staged rollouts judge: requests as clients saw them, those that reached no endpoint included.
		c + "upstream_rq_completed", c + "upstream_rq_pending_failure_eject", c + "upstream_cx_none_healthy",
		// The chart's preStop hook and Envoy's own.
		"http.lbplane_stats.downstream_cx_active", "listener.admin.downstream_cx_active", "server.live", "cluster_manager.active_clusters"} {
		if !hasStat(stats, name) {
			t.Errorf("--cluster-stats used: %s missing from /stats", name)
		}
	}
	for _, name := range []string{c + "lb_healthy_panic", c + "upstream_cx_total", c + "health_check.attempt", c + "update_success",
		c + "circuit_breakers.default.rq_open", "cluster.lbplane_xds.lb_healthy_panic"} {
		if hasStat(stats, name) {
			t.Errorf("--cluster-stats used: %s in /stats, want it left out", name)
		}
	}
	if !hasStat(adminGet(t, all.AdminPort, "/stats"), "cluster.lbplane_xds.lb_healthy_panic") {
		t.Error("--cluster-stats all: cluster.lbplane_xds.lb_healthy_panic missing: the stat left out above proves nothing")
	}
	if prom := adminGet(t, used.AdminPort, "/stats/prometheus"); !regexp.MustCompile(`(?m)^envoy_cluster_endpoint_rq_total\{`).MatchString(prom) {
		t.Error("--cluster-stats used: no envoy_cluster_endpoint_rq_total (perEndpointStats) in /stats/prometheus")
	}
}
