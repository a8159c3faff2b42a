package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/internal/tools"
)

const zoneAwarePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: zone-aware}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {algorithm: RoundRobin, zoneAware: {minEndpoints: 2}}
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 1, http: {path: /healthz}}
      endpoints:
{{- range $i, $b := .B}}
        - {address: 127.0.0.1, port: {{$b.Port}}, zone: {{index $.Zones $i}}}
{{- end}}
`

// startEnvoyInZone starts an Envoy from the bootstrap `lbctl bootstrap --zone` prints (the real binary), the
// way an operator would. Admin binds an ephemeral port, which Envoy writes to a file.
func startEnvoyInZone(t *testing.T, l *Lbplane, nodeID, zone string) *Envoy {
	t.Helper()
	bin := tools.Require(t, "envoy")
	dir := t.TempDir()
	socket := adminSocketPath(t)
	args := []string{"bootstrap", "--node-id", nodeID, "--xds-address", l.XDSAddr, "--admin-socket", socket, "--stats-port", "0", "--zone", zone}
	if l.ownCA() {
		args = append(args, "--out-dir", filepath.Join(dir, "certs"))
	} else {
		args = append(args, "--xds-insecure")
	}
	out, errOut, err := lbctl(t, l, "", args...)
	if err != nil {
		t.Fatalf("lbctl bootstrap: %v: %s", err, errOut)
	}
	cfg := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(cfg, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &Envoy{NodeID: nodeID, AdminSocket: socket, AdminPort: registerAdmin(socket)}
	e.Process = startProcess(t, "envoy-"+nodeID+".log", bin, "-c", cfg, "--use-dynamic-base-id",
		"--concurrency", "1", "-l", "warn", "--component-log-level", "config:info,upstream:info", "--drain-time-s", "1")
	eventually(t, 30*time.Second, "Envoy's admin answers on its socket", func() error {
		resp, err := adminDo(e, http.MethodGet, "/ready")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return e
}

// zoneShare sends n requests and returns the share answered in zone ("a" backends are named a1, a2, ...),
// and the counts per backend; failed requests count against the zone.
func zoneShare(c *Client, url string, n int, zone string) (float64, map[string]int) {
	got := map[string]int{}
	for range n {
		b, code, err := doWith(c, url, nil)
		if err != nil || code != 200 {
			b = fmt.Sprintf("failed (%d %v)", code, err)
		}
		got[b]++
	}
	in := 0
	for b, k := range got {
		if strings.HasPrefix(b, zone) {
			in += k
		}
	}
	return float64(in) / float64(n), got
}

// TestZoneAwareRouting: an Envoy bootstrapped in zone-a sends ≥ 95 % of its requests to zone-a's three
// endpoints, round robin among them, while zone-a has at least minEndpoints (2) healthy; with only one left
// most traffic moves to zone-b, all of it once zone-a is down, and it comes back when zone-a does.
func TestZoneAwareRouting(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a1", "a2", "a3", "b1", "b2", "b3")
	l := startLbplane(t)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	e := startEnvoyInZone(t, l, "envoy-zone-a", "zone-a")
	push(t, l, policy(t, zoneAwarePolicy, map[string]any{"Port": port, "B": bs,
		"Zones": []string{"zone-a", "zone-a", "zone-a", "zone-b", "zone-b", "zone-b"}}))
	waitServing(t, url, "a1", "a2", "a3", "b1", "b2", "b3")
	c := newClient(true)
	const n = 600
	// Envoy's first health checks may still be under way: wait for all six endpoints to be known healthy
	// (zone-aware routing waits for two zones with healthy endpoints), then measure.
	eventually(t, 20*time.Second, "zone-a holds its traffic", func() error {
		if share, got := zoneShare(c, url, 60, "a"); share < 0.95 {
			return fmt.Errorf("zone-a share %.2f: %v", share, got)
		}
		return nil
	})
	share, got := zoneShare(c, url, n, "a")
	t.Logf("zone-a healthy: %v", got)
	if share < 0.95 {
		t.Fatalf("zone-a share %.3f of %d, want ≥ 0.95: %v\n%s", share, n, got, e.Clusters(t))
	}
	// Zone-aware routing keeps the balance among the zone's endpoints.
	for _, b := range []string{"a1", "a2", "a3"} {
		if got[b] < n/5 {
			t.Errorf("%s got %d of %d, want ≥ %d (round robin over zone-a): %v", b, got[b], n, n/5, got)
		}
	}

	// Below capacity: one healthy endpoint left in zone-a, so Envoy spreads by healthy endpoints
	// (1 in zone-a, 3 in zone-b: about 25/75).
	bs[0].Stop()
	bs[1].Stop()
	eventually(t, 20*time.Second, "most traffic moves to zone-b", func() error {
		if share, got := zoneShare(c, url, 200, "b"); share < 0.6 || got["a3"] == 0 {
			return fmt.Errorf("zone-b share %.2f: %v", share, got)
		}
		return nil
	})
	bs[2].Stop()
	eventually(t, 20*time.Second, "all traffic moves to zone-b", func() error {
		if share, got := zoneShare(c, url, 200, "b"); share < 1 {
			return fmt.Errorf("zone-b share %.2f: %v", share, got)
		}
		return nil
	})
	for _, b := range bs[:3] {
		b.Restart(t)
	}
	eventually(t, 20*time.Second, "traffic returns to zone-a", func() error {
		if share, got := zoneShare(c, url, 200, "a"); share < 0.95 {
			return fmt.Errorf("zone-a share %.2f: %v", share, got)
		}
		return nil
	})
}

const zoneWeightsPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: zone-weights}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing:
        zoneWeights: [{zone: zone-a, weight: 80}, {zone: zone-b, weight: 20}]
      endpoints:
{{- range $i, $b := .B}}
        - {address: 127.0.0.1, port: {{$b.Port}}, zone: {{index $.Zones $i}}}
{{- end}}
`

// TestZoneWeights: zone weights 80/20 over two endpoints per zone send 80 % (±3 points) of the requests to
// zone-a, though each zone has half the endpoints, from an Envoy with no zone of its own; each endpoint's
// share matches the traffic model of lbctl diff --traffic and whatif, also with one zone-a endpoint down
// (zone-a's weight times 1.4 × 1/2: 56 against 20).
func TestZoneWeights(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a1", "a2", "b1", "b2")
	data := map[string]any{"B": bs, "Zones": []string{"zone-a", "zone-a", "zone-b", "zone-b"}}
	e := setupWith(t, zoneWeightsPolicy, data, bs...)
	waitServing(t, e.URL, "a1", "a2", "b1", "b2")
	doc := policy(t, zoneWeightsPolicy, data)
	const n = 1000
	c := newClient(true)
	got := c.Spread(t, e.URL, n, nil)
	a := got["a1"] + got["a2"]
	t.Logf("80/20: %v", got)
	if share := float64(a) / n; share < 0.77 || share > 0.83 {
		t.Errorf("zone-a share %.3f of %d, want 0.80 ± 0.03: %v", share, n, got)
	}
	// modelled returns the model's share per backend name.
	modelled := func(down trafficmodel.Down) map[string]float64 {
		byPort := map[string]string{}
		for _, b := range bs {
			byPort[fmt.Sprintf("127.0.0.1:%d", b.Port)] = b.Name
		}
		out := map[string]float64{}
		for _, s := range trafficModel(t, doc, "zone-weights", down).Shares() {
			out[byPort[s.Address]] += s.Share
		}
		return out
	}
	near := func(got map[string]int, want map[string]float64) error {
		for _, b := range bs {
			if d := float64(got[b.Name])/n - want[b.Name]; d < -0.03 || d > 0.03 {
				return fmt.Errorf("%s: measured %d of %d, model %.3f: %v", b.Name, got[b.Name], n, want[b.Name], got)
			}
		}
		return nil
	}
	if err := near(got, modelled(nil)); err != nil {
		t.Error(err)
	}
	// lbplane's default outlier detection ejects a1 at its first refused connection.
	bs[0].Stop()
	want := modelled(trafficmodel.Down{fmt.Sprintf("127.0.0.1:%d", bs[0].Port): "stopped"})
	if d := want["a2"] - 56.0/76; d < -0.001 || d > 0.001 {
		t.Fatalf("model: a2 %.3f, want 56/76", want["a2"])
	}
	eventually(t, 20*time.Second, "zone-a's share follows its health", func() error {
		_, got := zoneShare(c, e.URL, n, "a")
		err := near(got, want)
		if err == nil {
			t.Logf("a1 down: %v, model %v", got, want)
		}
		return err
	})
}
