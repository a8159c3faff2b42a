package e2e

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// modelGaps is the Envoy behaviour the traffic model does not follow, and why. The generator below does not
// draw these; each is said in the model's own output where it applies (trace's caveats and notes).
var modelGaps = []struct{ behaviour, why string }{
	{"zone-aware routing with Envoys in several zones", "each Envoy keeps its requests in its own zone, and how many requests each Envoy sends is not known: predictions average the Envoys, and say so (TestZoneAwareModelMatchesEnvoy holds the model to one Envoy in zone-a)"},
	{"slow start", "an endpoint's weight ramps up from the moment it joined, which only Envoy knows: the model ramps the endpoints it is told joined, at the age it is told (whatif --joined --at, held to Envoy by TestSlowStartPredictionMatchesEnvoy)"},
	{"BackendUtilization (client-side weighted round robin)", "the weights follow the utilization the endpoints report over ORCA at run time"},
	{"least request and bounded load under concurrent requests", "Envoy then favours the endpoints with fewer requests in flight; the model gives what requests that do not overlap see (the test sends them one at a time)"},
	{"backends of host names (DNS)", "Envoy balances over the addresses it resolves; the model balances over the names and says so"},
	{"outlier ejections as they happen", "the model takes health as given (lbplane's last reading, or --down); the test marks endpoints down with active health checks"},
	{"which endpoint one round-robin or random request gets", "it depends on the requests before it, or on Envoy's random draw: the model gives the distribution, which is what is compared"},
}

// diffEndpoint is one endpoint of a generated policy: a test backend, with its weight, zone and role.
type diffEndpoint struct {
	backend int
	weight  int
	zone    string
	backup  bool
	down    bool
}

// diffCase is one generated policy and the endpoints whose health checks fail.
type diffCase struct {
	algorithm         string
	hashKey           string // "", "header", "path", "pathWithQuery", "host", "query"
	balanceFactor     int
	failoverThreshold int
	panicThreshold    int
	zoneWeights       map[string]int
	zoneFailover      []string
	// zoneAware is loadBalancing.zoneAware.minEndpoints; 0: no zone-aware routing.
	zoneAware int
	endpoints []diffEndpoint
}

var diffZones = []string{"zone-a", "zone-b", "zone-c"}

// genCase draws a random valid policy over nb backends, and which of its endpoints fail.
func genCase(r *rand.Rand, nb int) diffCase {
	c := diffCase{algorithm: []string{"RoundRobin", "LeastRequest", "Random", "RingHash", "Maglev"}[r.IntN(5)]}
	hashing := c.algorithm == "RingHash" || c.algorithm == "Maglev"
	if hashing {
		c.hashKey = []string{"header", "path", "pathWithQuery", "host", "query"}[r.IntN(5)]
		if r.IntN(3) == 0 {
			c.balanceFactor = 125 + r.IntN(100)
		}
	}
	n := 2 + r.IntN(nb-1)
	order := r.Perm(nb)[:n]
	weighted := r.IntN(2) == 0
	zoned := r.IntN(2) == 0
	for _, b := range order {
		e := diffEndpoint{backend: b, weight: 1}
		if weighted {
			e.weight = 1 + r.IntN(4)
		}
		if zoned {
			e.zone = diffZones[r.IntN(len(diffZones))]
		}
		e.down = r.IntN(4) == 0
		c.endpoints = append(c.endpoints, e)
	}
	if r.IntN(3) == 0 {
		c.endpoints[n-1].backup = true // never all: the first stays a primary
	}
	if zoned {
		switch r.IntN(3) {
		case 0:
			// Every zone with an endpoint has a weight (validation refuses one left out: it would get nothing).
			c.zoneWeights = map[string]int{}
			for _, e := range c.endpoints {
				c.zoneWeights[e.zone] = 1 + r.IntN(100)
			}
		case 1:
			c.zoneFailover = slices.Clone(diffZones)
			r.Shuffle(len(c.zoneFailover), func(i, j int) { c.zoneFailover[i], c.zoneFailover[j] = c.zoneFailover[j], c.zoneFailover[i] })
			c.zoneFailover = c.zoneFailover[:1+r.IntN(3)]
		}
	}
	hasBackup := slices.ContainsFunc(c.endpoints, func(e diffEndpoint) bool { return e.backup })
	if (hasBackup || len(c.zoneFailover) > 0) && r.IntN(2) == 0 {
		c.failoverThreshold = 40 + r.IntN(61)
	}
	if r.IntN(4) == 0 {
		c.panicThreshold = r.IntN(80)
	}
	return c
}

func (c diffCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", c.algorithm)
	if c.hashKey != "" {
		fmt.Fprintf(&b, " hash=%s", c.hashKey)
	}
	if c.balanceFactor > 0 {
		fmt.Fprintf(&b, " bounded=%d", c.balanceFactor)
	}
	if c.failoverThreshold > 0 {
		fmt.Fprintf(&b, " failoverThreshold=%d", c.failoverThreshold)
	}
	if c.panicThreshold > 0 {
		fmt.Fprintf(&b, " panic=%d", c.panicThreshold)
	}
	if c.zoneWeights != nil {
		fmt.Fprintf(&b, " zoneWeights=%v", c.zoneWeights)
	}
	if c.zoneFailover != nil {
		fmt.Fprintf(&b, " zoneFailover=%v", c.zoneFailover)
	}
	if c.zoneAware > 0 {
		fmt.Fprintf(&b, " zoneAware=%d", c.zoneAware)
	}
	for _, e := range c.endpoints {
		fmt.Fprintf(&b, " [b%d w%d %s", e.backend, e.weight, e.zone)
		if e.backup {
			b.WriteString(" backup")
		}
		if e.down {
			b.WriteString(" DOWN")
		}
		b.WriteString("]")
	}
	return b.String()
}

// yaml renders the case as a policy on port.
func (c diffCase) yaml(port int, bs []*Backend) []byte {
	var lb []string
	lb = append(lb, "algorithm: "+c.algorithm)
	switch c.hashKey {
	case "header":
		lb = append(lb, "hashKeys: [{header: {name: x-user}}]")
	case "path":
		lb = append(lb, "hashKeys: [{path: {}}]")
	case "pathWithQuery":
		lb = append(lb, "hashKeys: [{path: {withQuery: true}}]")
	case "host":
		lb = append(lb, "hashKeys: [{host: {}}]")
	case "query":
		lb = append(lb, "hashKeys: [{queryParameter: {name: u}}]")
	}
	if c.balanceFactor > 0 {
		lb = append(lb, "hashBalanceFactor: "+strconv.Itoa(c.balanceFactor))
	}
	if c.failoverThreshold > 0 {
		lb = append(lb, "failoverThreshold: "+strconv.Itoa(c.failoverThreshold))
	}
	if c.zoneWeights != nil {
		var zw []string
		for _, z := range diffZones {
			if w, ok := c.zoneWeights[z]; ok {
				zw = append(zw, fmt.Sprintf("{zone: %s, weight: %d}", z, w))
			}
		}
		lb = append(lb, "zoneWeights: ["+strings.Join(zw, ", ")+"]")
	}
	if c.zoneFailover != nil {
		lb = append(lb, "zoneFailover: ["+strings.Join(c.zoneFailover, ", ")+"]")
	}
	if c.zoneAware > 0 {
		lb = append(lb, fmt.Sprintf("zoneAware: {minEndpoints: %d}", c.zoneAware))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: diff}
spec:
  debugHeaders: true
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {%s}
      healthCheck:
        active: {type: HTTP, interval: 300ms, timeout: 250ms, unhealthyThreshold: 1, healthyThreshold: 1, http: {path: /healthz}}
`, port, strings.Join(lb, ", "))
	if c.panicThreshold > 0 {
		fmt.Fprintf(&b, "        panicThreshold: %d\n", c.panicThreshold)
	}
	b.WriteString("      endpoints:\n")
	for _, e := range c.endpoints {
		fmt.Fprintf(&b, "        - {address: 127.0.0.1, port: %d, weight: %d", bs[e.backend].Port, e.weight)
		if e.zone != "" {
			fmt.Fprintf(&b, ", zone: %s", e.zone)
		}
		if e.backup {
			b.WriteString(", backup: true")
		}
		b.WriteString("}\n")
	}
	return []byte(b.String())
}

// diffRequest is the i-th request of a case: every hash input differs from one request to the next.
func diffRequest(i int) trafficmodel.Request {
	return trafficmodel.Request{Path: fmt.Sprintf("/k/%d?u=user%d&v=%d", i%997, i, i%5),
		Headers: map[string][]string{"x-user": {fmt.Sprintf("user-%d", i)}, "host": {fmt.Sprintf("site%d.example", i)}}}
}

// TestTrafficModelMatchesEnvoy is the differential test of the traffic model: a generator draws random valid
// policies (algorithms, hash keys, weights, backups, failover and panic thresholds, zones with weights or
// failover, bounded load) and random endpoint failures (active health checks that fail), pushes each to one
// lbplane and one real Envoy, and sends requests one at a time. The share of requests each endpoint gets
// must be within 4 standard deviations of a binomial draw (plus 1.5 points) of the model's share, and for
// hashing algorithms the model must name the endpoint Envoy picked for at least 99 % of the requests.
// LBPLANE_MODEL_DIFF_SEED and LBPLANE_MODEL_DIFF_CASES draw another sample; modelGaps lists what the model
// does not follow.
func TestTrafficModelMatchesEnvoy(t *testing.T) {
	t.Parallel()
	seed, cases := diffSample(t, "LBPLANE_MODEL_DIFF", 30, 10)
	for _, g := range modelGaps {
		t.Logf("known gap, not drawn: %s: %s", g.behaviour, g.why)
	}
	bs := startBackends(t, "d0", "d1", "d2", "d3", "d4", "d5")
	r := rand.New(rand.NewPCG(seed, 0))
	// One lbplane and one Envoy for every case: each case is pushed over the last.
	e := &env{L: startLbplane(t), Port: reservePort(t), B: bs}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
	e.E = startEnvoy(t, e.L, "envoy-model-diff", true)
	addrOf := map[string]int{}
	for i, b := range bs {
		addrOf[fmt.Sprintf("127.0.0.1:%d", b.Port)] = i
	}
	c := newClient(true)
	// Within 4 standard deviations of a binomial draw, plus 1.5 points.
	run := diffRun{requests: 2000, workers: 1, tolerance: func(p float64, n int) float64 { return 4*math.Sqrt(p*(1-p)/float64(n)) + 0.015 }}
	for n := 0; n < cases; n++ {
		tc := genCase(r, len(bs))
		ok := t.Run(fmt.Sprintf("case%d", n), func(t *testing.T) {
			t.Logf("seed %d case %d: %s", seed, n, tc)
			runDiffCase(t, e, c, tc, run, addrOf)
		})
		if !ok {
			t.Logf("reproduce with LBPLANE_MODEL_DIFF_SEED=%d LBPLANE_MODEL_DIFF_CASES=%d", seed, n+1)
		}
	}
}

// diffSample is a differential test's seed and number of cases: the defaults, or PREFIX_SEED and
// PREFIX_CASES from the environment.
func diffSample(t *testing.T, prefix string, seed uint64, cases int) (uint64, int) {
	t.Helper()
	if s := os.Getenv(prefix + "_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s_SEED: %v", prefix, err)
		}
		seed = v
	}
	if s := os.Getenv(prefix + "_CASES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 500 {
			t.Fatalf("%s_CASES: want 1 to 500, got %q", prefix, s)
		}
		cases = v
	}
	return seed, cases
}

// diffRun is how a differential case is measured: how many requests, how many at once (1 for algorithms
// whose spread concurrency changes, and for hashing, whose owners are checked request by request), the
// Envoys the model predicts for (the Envoy's bootstrap), and the tolerance on an endpoint's share p.
type diffRun struct {
	requests  int
	workers   int
	envoys    trafficmodel.Envoys
	tolerance func(p float64, n int) float64
}

func runDiffCase(t *testing.T, e *env, c *Client, tc diffCase, run diffRun, addrOf map[string]int) {
	// A backend the case does not list fails its checks too: Envoy keeps an endpoint that left the
	// assignment while it passes them (the last case's, when the cluster itself did not change).
	down := trafficmodel.Down{}
	for i, b := range e.B {
		health := 503
		for _, ep := range tc.endpoints {
			switch {
			case ep.backend == i && ep.down:
				down[fmt.Sprintf("127.0.0.1:%d", b.Port)] = "health check fails"
			case ep.backend == i:
				health = 200
			}
		}
		b.SetHealth(health)
	}
	doc := tc.yaml(e.Port, e.B)
	push(t, e.L, doc)
	waitSynced(t, e.L, 1)
	// Envoy has the endpoints, each checked healthy or failed as the case says.
	eventually(t, 20*time.Second, "Envoy sees the case's endpoints and health", func() error {
		flags := map[string]string{}
		for _, l := range strings.Split(e.E.Clusters(t), "\n") {
			if rest, ok := strings.CutPrefix(l, "default/diff/app::"); ok {
				if addr, f, ok := strings.Cut(rest, "::health_flags::"); ok {
					flags[addr] = f
				}
			}
		}
		if len(flags) != len(tc.endpoints) {
			return fmt.Errorf("%d endpoints in Envoy, want %d: %v", len(flags), len(tc.endpoints), flags)
		}
		for _, ep := range tc.endpoints {
			addr := fmt.Sprintf("127.0.0.1:%d", e.B[ep.backend].Port)
			f, ok := flags[addr]
			switch {
			case !ok:
				return fmt.Errorf("%s not in Envoy: %v", addr, flags)
			case ep.down && (!strings.Contains(f, "/failed_active_hc") || strings.Contains(f, "pending")):
				return fmt.Errorf("%s should fail its check: %s", addr, f)
			case !ep.down && f != "healthy":
				return fmt.Errorf("%s should be healthy: %s", addr, f)
			}
		}
		return nil
	})
	m := trafficModel(t, doc, "diff", down)
	if len(m.Routes) != 1 || len(m.Routes[0].Clusters) != 1 {
		t.Fatalf("model routes %+v", m.Routes)
	}
	m.From(run.envoys)
	cl := m.Clusters[m.Routes[0].Clusters[0].Name]
	predicted := map[string]float64{}
	for i, s := range cl.Shares() {
		predicted[cl.Hosts[i].Address] += s
	}
	requests := run.requests
	observed := map[string]int{}
	var agree, owned atomic.Int64
	var mu sync.Mutex
	var failed error
	// send sends request i and counts where it went; it returns false once a request failed.
	send := func(i int) bool {
		rq := diffRequest(i)
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", e.Port, rq.Path), nil)
		if err != nil {
			panic(err)
		}
		req.Host = rq.Headers["host"][0]
		req.Header.Set("x-user", rq.Headers["x-user"][0])
		resp, err := c.HTTP.Do(req)
		var up string
		if err == nil {
			resp.Body.Close()
			up = resp.Header.Get("x-lbplane-upstream")
			switch _, known := addrOf[up]; {
			case resp.StatusCode != 200 || up == "":
				err = fmt.Errorf("request %d: status %d, upstream %q", i, resp.StatusCode, up)
			case !known:
				err = fmt.Errorf("request %d went to %s, not a test backend", i, up)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil || failed != nil {
			failed = cmp.Or(failed, err)
			return false
		}
		observed[up]++
		if cl.Hashing() {
			tr := m.TraceRequest(rq)
			if len(tr.Backends) == 1 && tr.Backends[0].Endpoint != "" {
				owned.Add(1)
				if tr.Backends[0].Endpoint == up {
					agree.Add(1)
				}
			}
		}
		return true
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, run.workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < requests && send(i); i = int(next.Add(1)) - 1 {
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	var rows []string
	for _, ep := range tc.endpoints {
		addr := fmt.Sprintf("127.0.0.1:%d", e.B[ep.backend].Port)
		p, got := predicted[addr], float64(observed[addr])/float64(requests)
		tol := run.tolerance(p, requests)
		row := fmt.Sprintf("%s b%d: model %.3f, Envoy %.3f (tolerance %.3f)", addr, ep.backend, p, got, tol)
		rows = append(rows, row)
		if math.Abs(got-p) > tol {
			t.Errorf("%s", row)
		}
	}
	t.Logf("levels: %s\n%s", levelsOf(cl), strings.Join(rows, "\n"))
	if cl.Hashing() {
		if owned.Load() != int64(requests) || float64(agree.Load()) < 0.99*float64(requests) {
			t.Errorf("hash owners: the model named %d of %d requests' endpoint, and Envoy agreed on %d", owned.Load(), requests, agree.Load())
		}
	}
}

func levelsOf(c *trafficmodel.Cluster) string {
	var out []string
	for _, l := range c.Levels {
		out = append(out, fmt.Sprintf("P%d %v %d/%d load %d%% panic %v", l.Priority, l.Zones, l.Healthy, l.Total, l.Load, l.Panic))
	}
	return strings.Join(out, "; ")
}
