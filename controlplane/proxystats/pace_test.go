package proxystats

import (
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"testing"
	"time"
)

// The /clusters filters cover every cluster once, each at most max clusters, whatever the names share.
func TestPrefixFiltersCoverEveryNameOnceInSlices(t *testing.T) {
	cases := map[string][]string{
		"one policy":                   {"default/p/app"},
		"none":                         nil,
		"a name is a prefix of others": {"a/b/c", "a/b/c2", "a/b/c20", "a/b/c3"},
		"metacharacters":               {"ns/a.b/x", "ns/a+b/x", "ns/a[b]/x", "ns/a(b)/x", "ns/a|b/x", "ns/a*b/x"},
	}
	var fill []string
	for i := range 2345 {
		fill = append(fill, fmt.Sprintf("default/f-%d/app", i))
	}
	for i := range 300 {
		fill = append(fill, fmt.Sprintf("team-%d/api/v%d", i%7, i))
	}
	cases["a fill of 2,645 policies"] = fill
	for name, names := range cases {
		t.Run(name, func(t *testing.T) {
			names = slices.Clone(names)
			slices.Sort(names)
			const max = 100
			filters := prefixFilters(names, max)
			if len(names) > 0 && len(filters) < (len(names)+max-1)/max {
				t.Errorf("%d filters for %d names, want at least %d", len(filters), len(names), (len(names)+max-1)/max)
			}
			matched := map[string]int{}
			for _, f := range filters {
				re, err := regexp.Compile(f)
				if err != nil {
					t.Fatalf("filter %q: %v", f, err)
				}
				n := 0
				for _, name := range names {
					if re.MatchString(name) {
						matched[name]++
						n++
					}
				}
				if n > max {
					t.Errorf("filter %q matches %d names, want at most %d", f, n, max)
				}
				for _, other := range []string{"xds_cluster", "lbplane_admin", ""} {
					if re.MatchString(other) && len(names) > 0 {
						t.Errorf("filter %q matches %q, which is not lbplane's", f, other)
					}
				}
			}
			for _, name := range names {
				if matched[name] != 1 {
					t.Errorf("%q matched by %d filters, want 1", name, matched[name])
				}
			}
			if len(names) > 0 && len(filters) > 3*len(names)/max+3 {
				t.Errorf("%d filters for %d names: slices far below the size asked for", len(filters), len(names))
			}
		})
	}
}

func TestFullReadsKeepWithinTheirShare(t *testing.T) {
	p := &Poller{Interval: 2 * time.Second, Window: time.Minute}
	for _, c := range []struct{ cost, want time.Duration }{
		{5 * time.Millisecond, time.Second},        // cheap: every interval (less half of one for jitter)
		{150 * time.Millisecond, 14 * time.Second}, // 1 %: 15 s
		{time.Second, 99 * time.Second},
		{10 * time.Second, 119 * time.Second}, // at most two windows
	} {
		if got := p.fullEvery(c.cost); got != c.want {
			t.Errorf("a full read of %v: next after %v, want %v", c.cost, got, c.want)
		}
	}
	p.FullReadShare = 0.1
	if got := p.fullEvery(1500 * time.Millisecond); got != 14*time.Second {
		t.Errorf("share 0.1, 1.5 s: %v", got)
	}
}

func TestHotFilterMatchesExactlyTheBusyClusters(t *testing.T) {
	f := hotFilter([]string{"ns/a/app", "ns/b.c/x+y"})
	re := regexp.MustCompile(f)
	for name, want := range map[string]bool{"ns/a/app": true, "ns/b.c/x+y": true, "ns/a/app2": false, "xns/a/app": false, "ns/bXc/x+y": false, "ns/b.c/xy": false} {
		if re.MatchString(name) != want {
			t.Errorf("%q matches %q: %v, want %v", f, name, !want, want)
		}
	}
	if f := hotFilter(nil); f != "" {
		t.Errorf("no busy cluster: %q, want no request", f)
	}
	// More than fit: the first ones, in a filter of bounded length.
	var many []string
	for i := range 2000 {
		many = append(many, fmt.Sprintf("ns/policy-%d/backend", i))
	}
	f = hotFilter(many)
	re = regexp.MustCompile(f)
	if len(f) > maxHotFilter+10 || !re.MatchString(many[0]) || !re.MatchString(many[100]) || re.MatchString(many[1999]) {
		t.Errorf("2000 names: a filter of %d bytes", len(f))
	}
}

func TestPartialReadsCarryTheIdleClusters(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lat := []Bucket{{UpperMs: 1, Count: 3}, {UpperMs: math.Inf(1), Count: 4}}
	full0 := &Sample{At: t0, StatsAt: t0, Clusters: map[string]*Cluster{
		"busy":    {Hosts: []Host{{Address: "a:1", Total: 10}}, Latency: lat, Ejections: map[string]uint64{"consecutive_5xx": 1}},
		"idle":    {Hosts: []Host{{Address: "b:1", Total: 5}}},
		"ejected": {Hosts: []Host{{Address: "c:1", Reasons: []string{"active health check failed"}}}},
		"inuse":   {Hosts: []Host{{Address: "d:1", Active: 1}}},
	}}
	// The first read: only what is not taking traffic or has requests in flight is busy.
	if got := hotClusters(nil, full0); !slices.Equal(got, []string{"ejected", "inuse"}) {
		t.Errorf("first read's busy clusters: %v", got)
	}
	full1 := &Sample{At: t0.Add(2 * time.Second), StatsAt: t0.Add(2 * time.Second), Clusters: map[string]*Cluster{
		"busy":    {Hosts: []Host{{Address: "a:1", Total: 12}}, Latency: lat, Ejections: map[string]uint64{"consecutive_5xx": 1}},
		"idle":    {Hosts: []Host{{Address: "b:1", Total: 5}}},
		"ejected": {Hosts: []Host{{Address: "c:1", Reasons: []string{"active health check failed"}}}},
		"inuse":   {Hosts: []Host{{Address: "d:1"}}},
		"new":     {Hosts: []Host{{Address: "e:1"}}},
	}}
	hot := hotClusters(full0, full1)
	if !slices.Equal(hot, []string{"busy", "ejected", "new"}) {
		t.Fatalf("busy clusters: %v", hot)
	}
	// A partial read of the busy clusters (the ejected endpoint came back meanwhile).
	read := map[string]*Cluster{
		"busy":    {Hosts: []Host{{Address: "a:1", Total: 20, Errors: 1}}},
		"ejected": {Hosts: []Host{{Address: "c:1"}}},
		"new":     {Hosts: []Host{{Address: "e:1"}}},
	}
	part := carry(full1, t0.Add(4*time.Second), read, nil)
	if !part.StatsAt.Equal(full1.StatsAt) || !part.StatsAt.Before(part.At) || !full1.StatsAt.Equal(full1.At) {
		t.Errorf("the partial read's stats are from %v (read at %v)", part.StatsAt, part.At)
	}
	if part.Clusters["idle"] != full1.Clusters["idle"] || part.Clusters["inuse"] != full1.Clusters["inuse"] {
		t.Error("the clusters not read are not the previous read's")
	}
	if b := part.Clusters["busy"]; b.Hosts[0].Total != 20 || !slices.Equal(b.Latency, lat) || b.Ejections["consecutive_5xx"] != 1 {
		t.Errorf("busy cluster after a partial read: %+v", b)
	}
	if len(part.Clusters["ejected"].Hosts[0].Reasons) != 0 {
		t.Error("the recovered endpoint still shows as ejected")
	}
	if got := hotClusters(full1, part); !slices.Equal(got, []string{"busy"}) {
		// ejected recovered and new saw no request: neither is read again until they move or the next full read.
		t.Errorf("busy clusters after the partial read: %v", got)
	}
	// The window over the partial read still sums requests from the fresh counters and latency from the
	// full reads.
	h := Summarize([]History{{Group: "g", Node: "n", Samples: []*Sample{full0, full1, part}}}, time.Minute)
	if b := h["g"]["busy"]; b.Requests != 10 || b.Errors != 1 {
		t.Errorf("busy over the window: %d requests %d errors, want 10 and 1", b.Requests, b.Errors)
	}
}

func TestAttributionWaitsForTheNextFullRead(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ej := func(n uint64) map[string]uint64 { return map[string]uint64{"consecutive_5xx": n, "success_rate": 1} }
	full0 := &Sample{At: t0, StatsAt: t0, Clusters: map[string]*Cluster{"c": {Hosts: []Host{{Address: "a:1"}}, Ejections: ej(1)}}}
	ejected := func() []Host { return []Host{{Address: "a:1", Outlier: true, Reasons: []string{"outlier detection"}}} }
	// The partial read sees the ejection, but carries the counters from before it: no detector yet.
	part := carry(full0, t0.Add(2*time.Second), map[string]*Cluster{"c": {Hosts: ejected()}}, nil)
	Attribute(full0, part)
	if got := part.Clusters["c"].Hosts[0].Reasons; !slices.Equal(got, []string{"outlier detection"}) {
		t.Fatalf("partial read: %v", got)
	}
	// The next full read sees the counter that moved since the last one.
	full1 := &Sample{At: t0.Add(4 * time.Second), StatsAt: t0.Add(4 * time.Second), Clusters: map[string]*Cluster{"c": {Hosts: ejected(), Ejections: ej(2)}}}
	Attribute(part, full1)
	if got := full1.Clusters["c"].Hosts[0].Reasons; !slices.Equal(got, []string{"outlier detection: consecutive 5xx"}) {
		t.Fatalf("full read after: %v", got)
	}
	// Two full reads in a row: the first met the ejection in the hosts before its counter moved (a full read
	// reads the counters first, and the ejection came in between); the second names it.
	fullA := &Sample{At: t0.Add(8 * time.Second), StatsAt: t0.Add(8 * time.Second), Clusters: map[string]*Cluster{"c": {Hosts: ejected(), Ejections: ej(2)}}}
	Attribute(&Sample{At: t0.Add(7 * time.Second), StatsAt: t0.Add(7 * time.Second), Clusters: map[string]*Cluster{"c": {Hosts: []Host{{Address: "a:1"}}, Ejections: ej(2)}}}, fullA)
	fullB := &Sample{At: t0.Add(10 * time.Second), StatsAt: t0.Add(10 * time.Second), Clusters: map[string]*Cluster{"c": {Hosts: ejected(), Ejections: ej(3)}}}
	Attribute(fullA, fullB)
	if got := fullB.Clusters["c"].Hosts[0].Reasons; !slices.Equal(got, []string{"outlier detection: consecutive 5xx"}) {
		t.Fatalf("the full read after one that met the ejection first: %v", got)
	}
	// Between full reads, a read whose counters are its own keeps a plain reason plain.
	full2 := &Sample{At: t0.Add(6 * time.Second), StatsAt: t0.Add(6 * time.Second), Clusters: map[string]*Cluster{"c": {Hosts: ejected(), Ejections: ej(2)}}}
	Attribute(full1, full2)
	if got := full2.Clusters["c"].Hosts[0].Reasons; !slices.Equal(got, []string{"outlier detection: consecutive 5xx"}) {
		t.Fatalf("the next full read: %v", got)
	}
}

// A window with no full read in it measures latency from the last full read before it, which the poller
// keeps for that: the latency covers more than the window rather than nothing.
func TestLatencyReachesBackToTheFullReadBefore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lat := func(n uint64) []Bucket { return []Bucket{{UpperMs: 1, Count: n}, {UpperMs: math.Inf(1), Count: n}} }
	full := func(at time.Duration, n uint64) *Sample {
		return &Sample{At: t0.Add(at), StatsAt: t0.Add(at), Clusters: map[string]*Cluster{"pa": {Hosts: []Host{{Address: "a:1", Total: n}}, Latency: lat(n)}}}
	}
	p := &Poller{Interval: 2 * time.Second, Window: time.Minute, Log: slog.New(slog.DiscardHandler), FullReadShare: 0.0001}
	key := "n http://x"
	p.proxies = map[string]*proxy{}
	p.add(key, "g", "n", full(0, 0), time.Second, nil)
	p.add(key, "g", "n", full(2*time.Second, 31), time.Second, nil) // 31 requests between the two
	for i := 2; i <= 50; i++ {                                      // partial reads every 2 s for 100 s, nothing moving
		prev := p.proxies[key].samples[len(p.proxies[key].samples)-1]
		p.add(key, "g", "n", carry(prev, t0.Add(time.Duration(2*i)*time.Second), nil, nil), 0, nil)
	}
	samples := p.proxies[key].samples
	if first := samples[0]; !first.StatsAt.Before(t0.Add(2 * time.Second)) {
		t.Fatalf("the poller kept samples from %v only", first.At.Sub(t0))
	}
	h := Summarize([]History{{Group: "g", Node: "n", Samples: samples}}, time.Minute)
	b := h["g"]["pa"]
	if b.LatencyP99Ms == nil || b.Requests != 0 {
		t.Errorf("a minute of partial reads after the traffic: %d requests (want 0), p99 %v (want the full reads' 31)", b.Requests, b.LatencyP99Ms)
	}
	// Full reads only: the window's own.
	h = Summarize([]History{{Group: "g", Node: "n", Samples: []*Sample{full(0, 0), full(2*time.Second, 31), full(70*time.Second, 31)}}}, time.Minute)
	if b := h["g"]["pa"]; b.LatencyP99Ms != nil {
		t.Errorf("full reads, no request in the window: p99 %v", *b.LatencyP99Ms)
	}
}

// A full read that failed (an answer too large, a timeout) cost Envoy as much as one that succeeded: the
// next waits as long, rather than being tried again at the next interval.
func TestFailedFullReadWaitsItsTurn(t *testing.T) {
	p := &Poller{Interval: 2 * time.Second, Window: time.Minute, Log: slog.New(slog.DiscardHandler)}
	p.proxies = map[string]*proxy{}
	p.add("k", "g", "n", nil, 500*time.Millisecond, fmt.Errorf("answer over 4 MiB"))
	px := p.proxies["k"]
	if want := time.Now().Add(p.fullEvery(500 * time.Millisecond)); px.retryAt.Before(want.Add(-time.Second)) || px.retryAt.After(want) {
		t.Errorf("after a failed full read of 500 ms: retry at %v, want about %v", px.retryAt, want)
	}
	p.add("k2", "g", "n", nil, 0, fmt.Errorf("connection refused"))
	if px := p.proxies["k2"]; !px.retryAt.IsZero() {
		t.Errorf("a failed partial read delays the next: %v", px.retryAt)
	}
}

// A partial read keeps the request counters of the clusters it reads from the read before, and takes the
// watched clusters' from their own read, without changing the earlier sample.
func TestPartialReadCarriesAndReadsCounters(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := &Sample{At: t0, StatsAt: t0, Clusters: map[string]*Cluster{
		"busy":    {Hosts: []Host{{Address: "a:1", Total: 1}}, Counters: Counters{Completed: 10}},
		"watched": {Hosts: []Host{{Address: "b:1"}}, Counters: Counters{Completed: 5, Errors5xx: 5}},
	}}
	read := map[string]*Cluster{"busy": {Hosts: []Host{{Address: "a:1", Total: 2}}}}
	counters := map[string]*Cluster{"watched": {Counters: Counters{Completed: 9, Errors5xx: 9}}, "gone": {Counters: Counters{Completed: 1}}}
	part := carry(prev, t0.Add(2*time.Second), read, counters)
	if got := part.Clusters["busy"].Counters; got.Completed != 10 {
		t.Errorf("the busy cluster's counters: %+v, want the previous read's", got)
	}
	if got := part.Clusters["watched"].Counters; got.Completed != 9 || got.Errors5xx != 9 {
		t.Errorf("the watched cluster's counters: %+v, want the ones read", got)
	}
	if prev.Clusters["watched"].Counters.Completed != 5 || part.Clusters["watched"] == prev.Clusters["watched"] {
		t.Error("the earlier sample was changed")
	}
	if _, ok := part.Clusters["gone"]; ok {
		t.Error("a counter of a cluster the Envoy does not have made a cluster")
	}
	w := Since(History{Node: "n", Samples: []*Sample{prev, part}}, t0, map[string]bool{"watched": true})
	if w.Requests != 4 || w.Errors != 4 {
		t.Errorf("window over the watched cluster: %+v", w)
	}
	if f := countersFilter([]string{"default/shop/a.b"}); f != `^cluster\.(?:default/shop/a\.b)\.(?:`+countersPattern+`)$` {
		t.Errorf("filter %s", f)
	}
}
