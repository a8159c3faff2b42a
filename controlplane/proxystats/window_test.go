package proxystats

import (
	"math"
	"os"
	"slices"
	"testing"
	"time"
)

// Envoy's histogram has one +Inf bucket after parsing, so that merged histograms (two Envoys, two
// clusters) keep their quantiles: a second one doubled the merged request count, and p99 read an hour.
func TestParsedHistogramMergesWithoutDoubling(t *testing.T) {
	b, err := os.ReadFile("testdata/stats.prom")
	if err != nil {
		t.Fatal(err)
	}
	cl := map[string]*Cluster{}
	if _, err := ParseStats(b, cl); err != nil {
		t.Fatal(err)
	}
	lat := cl["default/health/app"].Latency
	inf := 0
	for _, x := range lat {
		if math.IsInf(x.UpperMs, 1) {
			inf++
		}
	}
	if inf != 1 {
		t.Fatalf("%d +Inf buckets: %v", inf, lat)
	}
	one, two := QuantileMs(lat, 0.99), QuantileMs(AddBuckets(lat, lat), 0.99)
	if one == nil || two == nil || *one != *two || *one >= 3.6e6 {
		t.Errorf("p99 of one Envoy %v, of two alike %v", one, two)
	}
}

// Since sums what an Envoy served between its first sample at or after since and its last, for the named
// clusters only.
func TestSince(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := func(sec int, total, errs uint64) *Sample {
		return &Sample{At: at.Add(time.Duration(sec) * time.Second), Clusters: map[string]*Cluster{
			"p/a": {Hosts: []Host{{Address: "198.51.100.1:80", Total: total, Errors: errs}}},
			"q/b": {Hosts: []Host{{Address: "198.51.100.2:80", Total: 1000, Errors: 1000}}},
		}}
	}
	h := History{Node: "n", Samples: []*Sample{sample(0, 10, 1), sample(2, 50, 5), sample(4, 150, 25)}}
	w := Since(h, at.Add(time.Second), map[string]bool{"p/a": true})
	if !w.Complete || w.Requests != 100 || w.Errors != 20 {
		t.Errorf("window %+v; want 100 requests and 20 errors between the samples at 2s and 4s", w)
	}
	if w := Since(h, at.Add(3*time.Second), map[string]bool{"p/a": true}); w.Complete {
		t.Errorf("a window with only the last sample is complete: %+v", w)
	}
}

// Requests that never reached an endpoint count as failed requests: the counters were read from a real
// Envoy 1.40 (testdata/counters-*: /stats/prometheus with StatsFilter, and /clusters?format=json) after five
// requests on each HTTP route of clusters on a closed port (closed), behind a failing health check (uh), with
// a name that does not resolve (dns, no healthy upstream), speaking TLS to a plain backend (tls), answering
// 500 (five) or 400 (four), and ten to a healthy backend, five of them past a 0.2 s route timeout (ok); and
// three TCP connections to each of ok, closed (with an HTTP health check) and dns. With the router's dynamic stats off (no
// upstream_rq_completed nor 5xx), the endpoints' counters and the failed connections say the same of the
// failures. The clusters whose endpoint fails its active health check (uh; TCP's closed) are dead.
func TestSinceCountsWhatClientsSaw(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	http := map[string][2]uint64{"closed": {5, 5}, "uh": {5, 5}, "dns": {5, 5}, "tls": {5, 5}, "five": {5, 5}, "ok": {10, 5}, "four": {5, 0}}
	for _, tc := range []struct {
		name, file, dead string
		noDynamic        bool
		want             map[string][2]uint64 // cluster: requests, errors
	}{
		{"HTTP", "testdata/counters-http", "uh", false, http},
		{"HTTP without dynamic stats", "testdata/counters-http", "uh", true, http},
		{"TCP", "testdata/counters-tcp", "closed", false, map[string][2]uint64{"closed": {3, 3}, "dns": {3, 3}, "ok": {3, 0}}},
	} {
		cj, err := os.ReadFile(tc.file + ".clusters.json")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := ParseClusters(cj)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(tc.file + ".prom")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseStats(b, cl); err != nil {
			t.Fatal(err)
		}
		if tc.noDynamic {
			for _, c := range cl {
				c.Counters.Completed, c.Counters.Errors5xx = 0, 0
			}
		}
		h := History{Node: "n", Samples: []*Sample{{At: at, Clusters: map[string]*Cluster{}}, {At: at.Add(2 * time.Second), Clusters: cl}}}
		for name, want := range tc.want {
			w := Since(h, at, map[string]bool{name: true})
			if !w.Complete || w.Requests != want[0] || w.Errors != want[1] {
				t.Errorf("%s, cluster %s: %d requests and %d errors, want %d and %d", tc.name, name, w.Requests, w.Errors, want[0], want[1])
			}
			if dead := slices.Equal(w.Dead, []string{name}); dead != (name == tc.dead) {
				t.Errorf("%s, cluster %s: dead %v", tc.name, name, w.Dead)
			}
			if fours := w.ClientErrors; (name == "four" && !tc.noDynamic) != (fours == 5) || (name != "four" && fours != 0) {
				t.Errorf("%s, cluster %s: %d 4xx", tc.name, name, fours)
			}
		}
	}
}

// A cluster is dead when every endpoint failed its active checks; a new endpoint, which Envoy marks failed
// until its first check, is not counted as failing.
func TestDead(t *testing.T) {
	failed, pending := reasonActiveFailed, reasonActivePending
	for _, tc := range []struct {
		hosts [][]string
		want  bool
	}{
		{nil, false},
		{[][]string{{failed}, {reasonActiveTimedOut}}, true},
		{[][]string{{failed}, {}}, false},
		{[][]string{{failed, pending}}, false},
		{[][]string{{"outlier detection"}}, false},
	} {
		c := &Cluster{}
		for _, r := range tc.hosts {
			c.Hosts = append(c.Hosts, Host{Reasons: r})
		}
		if got := c.Dead(); got != tc.want {
			t.Errorf("hosts %v: dead %v, want %v", tc.hosts, got, tc.want)
		}
	}
}
