package proxystats

import (
	"math"
	"os"
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
	if err := ParseStats(b, cl); err != nil {
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
	one, two := QuantileMs(lat, 0.99), QuantileMs(addBuckets(lat, lat), 0.99)
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
