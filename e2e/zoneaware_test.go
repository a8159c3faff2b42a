package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
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
// way an operator would, and returns it with that bootstrap. Admin listens on a Unix socket, stats on a
// reserved port.
func startEnvoyInZone(t *testing.T, l *Lbplane, nodeID, zone string) (*Envoy, []byte) {
	t.Helper()
	bin := tools.Require(t, "envoy")
	dir := t.TempDir()
	socket := adminSocketPath(t)
	stats := reservePort(t)
	args := []string{"bootstrap", "--node-id", nodeID, "--xds-address", l.XDSAddr, "--admin-socket", socket, "--stats-port", fmt.Sprint(stats), "--zone", zone}
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
	// lbplane reads the Envoy's stats port: the health the server's predictions start from.
	e := &Envoy{NodeID: nodeID, AdminSocket: socket, AdminPort: registerAdmin(socket), StatsPort: stats}
	e.Process = startProcess(t, "envoy-"+nodeID+".log", bin, "-c", cfg, "--use-dynamic-base-id",
		"--concurrency", "1", "-l", "warn", "--component-log-level", "config:info,upstream:info", "--drain-time-s", "1")
	eventually(t, 30*time.Second, "Envoy's admin answers on its socket", func() error {
		resp, err := adminDo(e, http.MethodGet, "/ready")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return e, []byte(out)
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
// most traffic moves to zone-b, all of it once zone-a is down, and it comes back when zone-a does. What
// lbctl whatif predicted before (from the server, for its Envoy's zone) and lbctl diff --traffic
// predicts after are within 2 points of each endpoint's measured share of 10,000 requests, and lbctl
// status's EXPECTED is zone-a's.
func TestZoneAwareRouting(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a1", "a2", "a3", "b1", "b2", "b3")
	l := startLbplane(t)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	e, _ := startEnvoyInZone(t, l, "envoy-zone-a", "zone-a")
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

	// lbctl status's EXPECTED is for the group's Envoy, in zone-a: a third for each zone-a endpoint.
	eventually(t, 20*time.Second, "status expects zone-a's endpoints to take everything", func() error {
		// lbctl status NAME -o json prints the policy, as lbctl get NAME -o json does.
		var pol v1alpha1.LoadBalancerPolicy
		out := lbctlOK(t, l, "status", "zone-aware", "-o", "json")
		if err := json.Unmarshal([]byte(out), &pol); err != nil {
			return err
		}
		st := pol.Status
		if len(st.Backends) != 1 || len(st.Backends[0].PerEndpoint) != 6 || len(st.Backends[0].ExpectedCaveats) != 0 {
			return fmt.Errorf("backends %+v", st.Backends)
		}
		for _, e := range st.Backends[0].PerEndpoint {
			want := 0.0
			if e.Zone == "zone-a" {
				want = 0.3333
			}
			if e.ExpectedShare != want {
				return fmt.Errorf("%s (%s): expected %.4f, want %.4f", e.Address, e.Zone, e.ExpectedShare, want)
			}
		}
		return nil
	})
	// The server predicts for the Envoy it serves, in zone-a: all of zone-a's endpoints now, and with two of
	// them down, one healthy endpoint left in zone-a, below minEndpoints, so Envoy spreads by healthy
	// endpoints (1 in zone-a, 3 in zone-b: 25/75).
	nameOf := map[string]string{}
	for _, b := range bs {
		nameOf[fmt.Sprintf("127.0.0.1:%d", b.Port)] = b.Name
	}
	out := lbctlOK(t, l, "whatif", "zone-aware", "-o", "json", "--down", fmt.Sprintf("endpoint=127.0.0.1:%d", bs[0].Port),
		"--down", fmt.Sprintf("endpoint=127.0.0.1:%d", bs[1].Port))
	var pvs []trafficmodel.Preview
	if err := listItems(out, &pvs); err != nil || len(pvs) != 1 || pvs[0].Envoys != "an Envoy in zone-a" {
		t.Fatalf("whatif: %v\n%s", err, out)
	}
	before, after := map[string]float64{}, map[string]float64{}
	for _, ch := range pvs[0].Changes {
		before[nameOf[ch.Address]], after[nameOf[ch.Address]] = ch.Before, ch.After
	}
	if math.Abs(before["a1"]-1.0/3) > 1e-9 || math.Abs(after["a3"]-0.25) > 1e-9 || math.Abs(after["b1"]-0.25) > 1e-9 {
		t.Fatalf("whatif predicted %v before and %v after, want a third of zone-a's and 25 %% each of a3, b1-b3", before, after)
	}
	withinTwoPoints(t, "zone-a healthy, whatif before", concurrentSpread(t, c, url, 10000), before)

	bs[0].Stop()
	bs[1].Stop()
	eventually(t, 20*time.Second, "most traffic moves to zone-b", func() error {
		if share, got := zoneShare(c, url, 200, "b"); share < 0.6 || got["a3"] == 0 || got["a1"]+got["a2"] > 0 {
			return fmt.Errorf("zone-b share %.2f: %v", share, got)
		}
		return nil
	})
	measured := concurrentSpread(t, c, url, 10000)
	withinTwoPoints(t, "a1, a2 stopped, whatif after", measured, after)
	// diff --traffic of the same policy: before and after are what runs, with the health lbplane reads.
	doc := policy(t, zoneAwarePolicy, map[string]any{"Port": port, "B": bs, "Zones": []string{"zone-a", "zone-a", "zone-a", "zone-b", "zone-b", "zone-b"}})
	predicted := map[string]float64{}
	eventually(t, 20*time.Second, "diff --traffic predicts the spread with a1 and a2 down", func() error {
		out, errOut, _ := lbctl(t, l, string(doc), "diff", "--traffic", "-o", "json", "-f", "-")
		var pvs []trafficmodel.Preview
		if err := listItems(out, &pvs); err != nil || len(pvs) != 1 {
			return fmt.Errorf("%v: %s%s", err, out, errOut)
		}
		for _, ch := range pvs[0].Changes {
			predicted[nameOf[ch.Address]] = ch.After
		}
		if math.Abs(predicted["a3"]-0.25) > 1e-9 || predicted["a1"] != 0 {
			return fmt.Errorf("diff --traffic predicts %v (the server has not read a1 and a2 down yet?)", predicted)
		}
		return nil
	})
	withinTwoPoints(t, "a1, a2 stopped, diff --traffic", measured, predicted)
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

// genZoneAwareCase draws a random valid zone-aware policy over nb backends and which of its endpoints fail:
// round robin, least request or random, weights, zones among zone-a (the Envoy's), zone-b and zone-c (so
// that zone-a may have none, few or most of them), minEndpoints 1 to 3, a backup, a panic threshold.
func genZoneAwareCase(r *rand.Rand, nb int) diffCase {
	c := diffCase{algorithm: []string{"RoundRobin", "LeastRequest", "Random"}[r.IntN(3)], zoneAware: 1 + r.IntN(3)}
	n := 3 + r.IntN(nb-2)
	weighted := r.IntN(2) == 0
	for _, b := range r.Perm(nb)[:n] {
		e := diffEndpoint{backend: b, weight: 1, zone: diffZones[r.IntN(len(diffZones))]}
		if weighted {
			e.weight = 1 + r.IntN(4)
		}
		e.down = r.IntN(4) == 0
		c.endpoints = append(c.endpoints, e)
	}
	if r.IntN(4) == 0 {
		c.endpoints[n-1].backup = true // never all: the first stays a primary
	}
	if r.IntN(4) == 0 {
		c.panicThreshold = r.IntN(80)
	}
	return c
}

// TestZoneAwareModelMatchesEnvoy extends the differential test of the traffic model to zone-aware routing:
// random zone-aware policies (genZoneAwareCase) with random endpoints failing their health checks, pushed to
// one lbplane and one real Envoy bootstrapped in zone-a by lbctl bootstrap --zone. The model reads that
// same bootstrap (the node's zone and its local cluster) and each endpoint's share of 10,000 requests must
// be within 2 percentage points of its prediction (4 binomial standard deviations at most, at a share of
// one half). Least request is sent one request at a time, the others four at a time.
// LBPLANE_ZONE_DIFF_SEED and LBPLANE_ZONE_DIFF_CASES draw another sample.
func TestZoneAwareModelMatchesEnvoy(t *testing.T) {
	t.Parallel()
	seed, cases := diffSample(t, "LBPLANE_ZONE_DIFF", 7, 8)
	bs := startBackends(t, "d0", "d1", "d2", "d3", "d4", "d5")
	r := rand.New(rand.NewPCG(seed, 0))
	e := &env{L: startLbplane(t), Port: reservePort(t), B: bs}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
	var bootstrap []byte
	e.E, bootstrap = startEnvoyInZone(t, e.L, "envoy-zone-diff", "zone-a")
	local, err := trafficmodel.LocalFromBootstrap(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	if local.Zone != "zone-a" || local.Hosts["zone-a"] == 0 {
		t.Fatalf("the model reads the Envoy in %+v from its bootstrap", local)
	}
	addrOf := map[string]int{}
	for i, b := range bs {
		addrOf[fmt.Sprintf("127.0.0.1:%d", b.Port)] = i
	}
	c := newClient(true)
	for n := 0; n < cases; n++ {
		tc := genZoneAwareCase(r, len(bs))
		run := diffRun{requests: 10000, workers: 4, envoys: trafficmodel.EnvoysFrom(local), tolerance: func(float64, int) float64 { return 0.02 }}
		if tc.algorithm == "LeastRequest" {
			run.workers = 1 // least request's spread changes with requests in flight: the model's is one at a time
		}
		ok := t.Run(fmt.Sprintf("case%d", n), func(t *testing.T) {
			t.Logf("seed %d case %d: %s", seed, n, tc)
			runDiffCase(t, e, c, tc, run, addrOf)
		})
		if !ok {
			t.Logf("reproduce with LBPLANE_ZONE_DIFF_SEED=%d LBPLANE_ZONE_DIFF_CASES=%d", seed, n+1)
		}
	}
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

// concurrentSpread sends n requests, four at a time (round robin and random spread alike at any
// concurrency), and counts them by the backend that answered; any failure fails the test.
func concurrentSpread(t *testing.T, c *Client, url string, n int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	var failed error
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				b, code, err := doWith(c, url, nil)
				mu.Lock()
				if err == nil && code != 200 {
					err = fmt.Errorf("status %d", code)
				}
				if failed == nil && err != nil {
					failed = err
				}
				counts[b]++
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("a request to %s failed: %v (%v)", url, failed, counts)
	}
	return counts
}

// withinTwoPoints holds each backend's measured share to the predicted one: within 2 percentage points.
func withinTwoPoints(t *testing.T, what string, measured map[string]int, predicted map[string]float64) {
	t.Helper()
	total := 0
	for _, n := range measured {
		total += n
	}
	for name, p := range predicted {
		got := float64(measured[name]) / float64(total)
		if math.Abs(got-p) > 0.02 {
			t.Errorf("%s: %s measured %.2f %% of %d requests, predicted %.2f %%: %v", what, name, 100*got, total, 100*p, measured)
		}
	}
	t.Logf("%s: measured %v of %d, predicted %v", what, measured, total, predicted)
}
