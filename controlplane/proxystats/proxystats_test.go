package proxystats

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// The fixtures were read from Envoy 1.40 with examples/health-checks.yaml after 127.0.0.1:18082 stopped.
func readFixtures(t *testing.T) map[string]*Cluster {
	t.Helper()
	cb, err := os.ReadFile("testdata/clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := ParseClusters(cb)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.ReadFile("testdata/stats.prom")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseStats(sb, clusters); err != nil {
		t.Fatal(err)
	}
	return clusters
}

func TestParseRealEnvoyOutput(t *testing.T) {
	c := readFixtures(t)["default/health/app"]
	if c == nil || len(c.Hosts) != 3 {
		t.Fatalf("want 3 hosts of default/health/app, got %+v", c)
	}
	down := findHost(c, "127.0.0.1:18082")
	if down == nil || !down.Outlier || !slices.Equal(down.Reasons, []string{"active health check failed", "outlier detection"}) {
		t.Errorf("18082: %+v", down)
	}
	if up := findHost(c, "127.0.0.1:18081"); up == nil || len(up.Reasons) != 0 || up.Total == 0 {
		t.Errorf("18081 should be healthy and have served requests: %+v", up)
	}
	if c.Ejections["consecutive_gateway_failure"] != 1 {
		t.Errorf("ejections: %v", c.Ejections)
	}
	if _, ok := c.Ejections["total"]; ok {
		t.Error("the total is not a detector")
	}
	if n := len(c.Latency); n < 2 || !math.IsInf(c.Latency[n-1].UpperMs, 1) || c.Latency[n-1].Count == 0 {
		t.Errorf("latency buckets: %+v", c.Latency)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := ParseClusters([]byte("<html>")); err == nil {
		t.Error("ParseClusters accepted HTML")
	}
	if _, err := ParseStats([]byte("not a metric line {"), map[string]*Cluster{}); err == nil {
		t.Error("ParseStats accepted garbage")
	}
}

func sample(at time.Time, hosts []Host, ej map[string]uint64, lat []Bucket) *Sample {
	return &Sample{At: at, Clusters: map[string]*Cluster{"ns/p/app": {Hosts: hosts, Ejections: ej, Latency: lat}}}
}

func TestAttributeNamesTheDetectorThatMoved(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := sample(t0, []Host{{Address: "a:1"}}, map[string]uint64{"consecutive_5xx": 2, "success_rate": 1}, nil)
	cur := sample(t0.Add(2*time.Second), []Host{{Address: "a:1", Outlier: true, Reasons: []string{"outlier detection"}}},
		map[string]uint64{"consecutive_5xx": 3, "success_rate": 1}, nil)
	Attribute(prev, cur)
	if got := cur.Clusters["ns/p/app"].Hosts[0].Reasons; !slices.Equal(got, []string{"outlier detection: consecutive 5xx"}) {
		t.Fatalf("reasons: %v", got)
	}
	// Still ejected later, after another detector fired for some other host: the reason stays.
	next := sample(t0.Add(4*time.Second), []Host{{Address: "a:1", Outlier: true, Reasons: []string{"outlier detection"}}},
		map[string]uint64{"consecutive_5xx": 3, "success_rate": 2}, nil)
	Attribute(cur, next)
	if got := next.Clusters["ns/p/app"].Hosts[0].Reasons; !slices.Equal(got, []string{"outlier detection: consecutive 5xx"}) {
		t.Fatalf("reasons after: %v", got)
	}
	// Ejected in the very first sample: no counter history, the plain reason stays.
	first := sample(t0, []Host{{Address: "a:1", Outlier: true, Reasons: []string{"outlier detection"}}}, map[string]uint64{"success_rate": 1}, nil)
	Attribute(nil, first)
	if got := first.Clusters["ns/p/app"].Hosts[0].Reasons; !slices.Equal(got, []string{"outlier detection"}) {
		t.Fatalf("first sample: %v", got)
	}
}

func buckets(counts ...uint64) []Bucket {
	bounds := []float64{1, 10, 100, math.Inf(1)}
	var out []Bucket
	for i, c := range counts {
		out = append(out, Bucket{UpperMs: bounds[i], Count: c})
	}
	return out
}

func TestSummarizeWindowAndProxies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// Proxy 1: 90 s of history; only the last minute counts.
	p1 := History{Group: "g", Node: "n1", Samples: []*Sample{
		sample(t0, []Host{{Address: "a:1", Total: 1000, Errors: 100}}, nil, buckets(500, 1000, 1000, 1000)),
		sample(t0.Add(30*time.Second), []Host{{Address: "a:1", Total: 1100, Errors: 100}, {Address: "b:1", Total: 10}}, nil, buckets(600, 1110, 1110, 1110)),
		sample(t0.Add(90*time.Second), []Host{{Address: "a:1", Total: 1300, Errors: 105},
			{Address: "b:1", Total: 50, Reasons: []string{"active health check failed"}}}, nil, buckets(700, 1340, 1350, 1350)),
	}}
	// Proxy 2 restarted: its counters went back; what it has now counts in full.
	p2 := History{Group: "g", Node: "n2", Samples: []*Sample{
		sample(t0.Add(60*time.Second), []Host{{Address: "a:1", Total: 500, Errors: 5}}, nil, buckets(10, 10, 10, 10)),
		sample(t0.Add(90*time.Second), []Host{{Address: "a:1", Total: 20, Errors: 1}, {Address: "b:1"}}, nil, buckets(5, 20, 20, 20)),
	}}
	h := Summarize([]History{p1, p2}, time.Minute)
	b, ok := h.Backend("g", "ns/p/app", "app")
	if !ok {
		t.Fatal("no backend")
	}
	// p1: a 200 + b 40 over 60 s; p2: 20 (restart).
	if b.Requests != 260 || b.Errors != 6 {
		t.Errorf("requests %d errors %d, want 260 and 6", b.Requests, b.Errors)
	}
	// b:1 is ejected on p1 only: one of two is no majority, so it counts as healthy, and the mismatch shows.
	if b.Proxies != 2 || b.Endpoints.Total != 2 || b.Endpoints.Healthy != 2 || b.Endpoints.Ejected != 0 || b.Endpoints.Mismatched != 1 {
		t.Errorf("counts: %+v proxies %d", b.Endpoints, b.Proxies)
	}
	if len(b.Ejected) != 0 || len(b.Mismatches) != 1 || b.Mismatches[0].Address != "b:1" || b.Mismatches[0].Counted ||
		!slices.Equal(b.Mismatches[0].EjectedOn, []string{"n1"}) || !slices.Equal(b.Mismatches[0].HealthyOn, []string{"n2"}) {
		t.Errorf("ejected %+v, mismatches %+v", b.Ejected, b.Mismatches)
	}
	want := []v1alpha1.ProxyBackendHealth{
		{Node: "n1", Endpoints: v1alpha1.BackendEndpointCounts{Total: 2, Healthy: 1, Ejected: 1, Mismatched: 1}, Mismatch: true},
		{Node: "n2", Endpoints: v1alpha1.BackendEndpointCounts{Total: 2, Healthy: 2, Mismatched: 1}},
	}
	if !slices.Equal(b.PerProxy, want) {
		t.Errorf("per proxy: %+v, want %+v", b.PerProxy, want)
	}
	if b.WindowSeconds != 60 {
		t.Errorf("window %d", b.WindowSeconds)
	}
	// Latency over the window: p1 adds (100, 230, 240, 240), p2 (5, 20, 20, 20) in full. Of 260 requests
	// the 257.4th falls in (10ms, 100ms], 7.4 of its 10: 10 + 90 * 0.74 = 76.6ms.
	if b.LatencyP99Ms == nil || *b.LatencyP99Ms != 77 {
		t.Errorf("p99 %v, want 77 ms", b.LatencyP99Ms)
	}
	if _, ok := h.Backend("other", "ns/p/app", "app"); ok {
		t.Error("a group without proxies reported a backend")
	}
}

func TestQuantile(t *testing.T) {
	for _, c := range []struct {
		bs   []Bucket
		q    float64
		want *float64
	}{
		{nil, 0.99, nil},
		{buckets(0, 0, 0, 0), 0.99, nil},
		{buckets(100, 100, 100, 100), 0.99, ptr(1.0)},
		{buckets(0, 100, 100, 100), 0.5, ptr(5.5)},
		{buckets(0, 0, 50, 100), 0.99, ptr(100.0)}, // past the last bound: at least that
		{buckets(0, 0, 100, 100), 0.99, ptr(99.0)},
	} {
		got := QuantileMs(c.bs, c.q)
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("QuantileMs(%v, %v) = %v, want %v", c.bs, c.q, got, c.want)
		}
	}
}

// is tells whether a set figure equals want.
func is(f *float64, want float64) bool { return f != nil && *f == want }

// TestFiguresAreRoundedNumbers: shares are fractions with four decimals, and they print as such in JSON.
func TestFiguresAreRoundedNumbers(t *testing.T) {
	for _, c := range []struct {
		x    float64
		d    int
		want string
	}{{1.0 / 3, 4, "0.3333"}, {2.0 / 3, 4, "0.6667"}, {0.1 + 0.2, 1, "0.3"}, {1234.5, -1, "1230"}, {76.6, 0, "77"}} {
		b, err := json.Marshal(round(c.x, c.d))
		if err != nil || string(b) != c.want {
			t.Errorf("round(%v, %d) = %s, want %s", c.x, c.d, b, c.want)
		}
	}
}

func TestPerEndpointSharesRatesAndSkew(t *testing.T) {
	t0 := time.Unix(1000, 0)
	hosts := func(a, b, c uint64, cDown bool) []Host {
		hc := Host{Address: "10.0.0.3:80", Total: c, Weight: 1}
		if cDown {
			hc.Reasons = []string{"active health check failed"}
		}
		return []Host{{Address: "10.0.0.1:80", Total: a, Errors: a / 10, Weight: 1, Active: 2}, {Address: "10.0.0.2:80", Total: b, Weight: 3}, hc}
	}
	h := History{Group: "g", Node: "n1", Samples: []*Sample{
		sample(t0, hosts(100, 100, 50, false), nil, nil),
		sample(t0.Add(2*time.Second), hosts(200, 400, 50, true), nil, nil),
	}}
	b, ok := Summarize([]History{h}, time.Minute).Backend("g", "ns/p/app", "app")
	if !ok {
		t.Fatal("no backend")
	}
	if len(b.PerEndpoint) != 3 {
		t.Fatalf("endpoints: %+v", b.PerEndpoint)
	}
	down, busy, light := b.PerEndpoint[0], b.PerEndpoint[1], b.PerEndpoint[2]
	if down.Address != "10.0.0.3:80" || down.EjectedOn != 1 || down.ExpectedShare != 0 || len(down.Reasons) != 1 {
		t.Errorf("the endpoint not taking traffic comes first, expecting nothing: %+v", down)
	}
	// 100 and 300 requests of 400 over 2 s; weights 1 and 3 of 4.
	if busy.Address != "10.0.0.2:80" || !is(busy.ObservedShare, 0.75) || busy.ExpectedShare != 0.75 || busy.RequestsPerSecond != 150 || busy.Weight != 3 {
		t.Errorf("busiest: %+v", busy)
	}
	if !is(light.ObservedShare, 0.25) || !is(light.ErrorRate, 0.1) || light.ActiveRequests != 2 || light.Requests != 100 {
		t.Errorf("lighter: %+v", light)
	}
	// Both got exactly their weight's share.
	if !is(b.Skew, 0) {
		t.Errorf("skew %v, want 0", b.Skew)
	}
	// Half of the requests each since the window began: observed/expected = 2 and 2/3.
	h.Samples = append(h.Samples, sample(t0.Add(4*time.Second), hosts(400, 400, 50, true), nil, nil))
	b, _ = Summarize([]History{h}, time.Minute).Backend("g", "ns/p/app", "app")
	if !is(b.Skew, 0.5) {
		t.Errorf("skew %v, want 0.5", b.Skew)
	}
}

// TestPerEndpointExpectedFromTheModel: with a prediction for every endpoint, the expected share, zone,
// level and backup marker are the model's, the endpoints not taking traffic are handed to it as down, the
// skew is taken against the model's shares, and the backend carries what the model leaves out.
func TestPerEndpointExpectedFromTheModel(t *testing.T) {
	t0 := time.Unix(1000, 0)
	hosts := func(a, b uint64) []Host {
		return []Host{{Address: "10.0.0.1:80", Total: a, Weight: 1}, {Address: "10.0.0.2:80", Total: b, Weight: 1},
			{Address: "10.0.0.9:80", Weight: 1, Priority: 1, Reasons: []string{"active health check failed"}}}
	}
	h := History{Group: "g", Node: "n1", Samples: []*Sample{sample(t0, hosts(0, 0), nil, nil), sample(t0.Add(time.Second), hosts(70, 30), nil, nil)}}
	var gotDown map[string]string
	expect := func(group, cluster string, down map[string]string) map[string]Expected {
		if group != "g" || cluster != "ns/p/app" {
			return nil
		}
		gotDown = down
		caveats := []string{"least request: under concurrent requests ..."}
		return map[string]Expected{"10.0.0.1:80": {Share: 0.7, Zone: "a", Caveats: caveats}, "10.0.0.2:80": {Share: 0.3, Zone: "b", Caveats: caveats},
			"10.0.0.9:80": {Priority: 1, Backup: true, Caveats: caveats}}
	}
	b, _ := SummarizeExpected([]History{h}, time.Minute, expect).Backend("g", "ns/p/app", "app")
	if len(b.ExpectedCaveats) != 1 || !strings.HasPrefix(b.ExpectedCaveats[0], "least request") {
		t.Errorf("caveats %q", b.ExpectedCaveats)
	}
	if len(gotDown) != 1 || gotDown["10.0.0.9:80"] != "active health check failed" {
		t.Errorf("down handed to the model: %v", gotDown)
	}
	by := map[string]v1alpha1.EndpointStatus{}
	for _, e := range b.PerEndpoint {
		by[e.Address] = e
	}
	if e := by["10.0.0.1:80"]; e.ExpectedShare != 0.7 || e.Zone != "a" {
		t.Errorf("10.0.0.1: %+v", e)
	}
	if e := by["10.0.0.9:80"]; e.ExpectedShare != 0 || !e.Backup || e.Priority != 1 {
		t.Errorf("backup: %+v", e)
	}
	if !is(b.Skew, 0) {
		t.Errorf("skew %v: 70/30 is what the model expects", b.Skew)
	}
	// Without the model, the spread by weight would call 70/30 skewed.
	b, _ = Summarize([]History{h}, time.Minute).Backend("g", "ns/p/app", "app")
	if !is(b.Skew, 0.4) {
		t.Errorf("by weight: skew %v, want 0.4", b.Skew)
	}
	if len(b.ExpectedCaveats) != 0 {
		t.Errorf("no model, caveats %q", b.ExpectedCaveats)
	}
}

// TestOneEnvoyCannotEjectForAll: the health an Envoy reports counts in its own row; for the backend an
// endpoint is ejected only when a majority of the Envoys that have it say so, and the streams of one node
// are one voice.
func TestOneEnvoyCannotEjectForAll(t *testing.T) {
	t0 := time.Unix(1000, 0)
	down := []string{"active health check failed"}
	hosts := func(downA, downB bool) []Host {
		a, b := Host{Address: "a:1", Weight: 1}, Host{Address: "b:1", Weight: 1}
		if downA {
			a.Reasons = down
		}
		if downB {
			b.Reasons = down
		}
		return []Host{a, b}
	}
	view := func(node string, downA, downB bool) History {
		return History{Group: "g", Node: node, Samples: []*Sample{sample(t0, hosts(downA, downB), nil, nil)}}
	}
	// A liar claims both down, twice over (two streams of one node); the real Envoy sees both up.
	b, _ := Summarize([]History{view("liar", true, true), view("liar", true, true), view("real", false, false)}, time.Minute).Backend("g", "ns/p/app", "app")
	if b.Proxies != 2 || b.Endpoints.Healthy != 2 || b.Endpoints.Ejected != 0 || b.Endpoints.Mismatched != 2 || len(b.Ejected) != 0 {
		t.Errorf("one Envoy of two ejected for all: proxies %d, %+v, ejected %+v", b.Proxies, b.Endpoints, b.Ejected)
	}
	if len(b.PerProxy) != 2 || b.PerProxy[0].Node != "liar" || !b.PerProxy[0].Mismatch || b.PerProxy[0].Endpoints.Ejected != 2 ||
		b.PerProxy[1].Node != "real" || b.PerProxy[1].Mismatch || b.PerProxy[1].Endpoints.Healthy != 2 {
		t.Errorf("per proxy: %+v", b.PerProxy)
	}
	for _, e := range b.PerEndpoint {
		if e.Health != v1alpha1.EndpointHealthy || e.EjectedOn != 1 || e.ReportedBy != 2 {
			t.Errorf("endpoint %+v", e)
		}
	}
	// Two of three Envoys see b down: that is a majority, counted, and still shown as a mismatch.
	b, _ = Summarize([]History{view("e1", false, true), view("e2", false, true), view("e3", false, false)}, time.Minute).Backend("g", "ns/p/app", "app")
	if b.Endpoints.Ejected != 1 || b.Endpoints.Healthy != 1 || b.Endpoints.Mismatched != 1 || len(b.Ejected) != 1 ||
		!slices.Equal(b.Ejected[0].Nodes, []string{"e1", "e2"}) || len(b.Mismatches) != 1 || !b.Mismatches[0].Counted {
		t.Errorf("majority: %+v ejected %+v mismatches %+v", b.Endpoints, b.Ejected, b.Mismatches)
	}
	if b.PerProxy[0].Node != "e3" || !b.PerProxy[0].Mismatch {
		t.Errorf("the Envoy that differs comes first: %+v", b.PerProxy)
	}
	// All agree: nothing mismatched.
	b, _ = Summarize([]History{view("e1", false, true), view("e2", false, true)}, time.Minute).Backend("g", "ns/p/app", "app")
	if b.Endpoints.Ejected != 1 || b.Endpoints.Mismatched != 0 || len(b.Mismatches) != 0 {
		t.Errorf("unanimous: %+v %+v", b.Endpoints, b.Mismatches)
	}
}
