package proxystats

import (
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// The summaries are computed once per read (and per ExpectKey): status, history, the dashboard and metrics
// all ask for them between two reads, and at 10,000 clusters each summary costs tens of milliseconds and
// megabytes. A second Envoy, a new read or a new expectation gives new ones; one Envoy's view is its sum.
func TestSummariesAreKeptUntilTheNextRead(t *testing.T) {
	expectKey, computed := 1, 0
	p := &Poller{Interval: time.Minute, Window: time.Minute, Log: slog.New(slog.DiscardHandler),
		Expect: func(group, cluster string, down map[string]string) map[string]Expected {
			computed++
			return map[string]Expected{"a:1": {Share: 1}}
		},
		ExpectKey: func() any { return expectKey }}
	p.proxies = map[string]*proxy{}
	sample := func(n uint64) *Sample {
		return &Sample{At: time.Now(), StatsAt: time.Now(), Clusters: map[string]*Cluster{"pa": {Hosts: []Host{{Address: "a:1", Total: n}}}}}
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	p.add("n1 http://x", "g", "n1", sample(1), time.Millisecond, nil)

	by, h := p.ByProxy(), p.Health()
	if len(by) != 1 || !same(by["n1"], h) || computed != 1 {
		t.Fatalf("one Envoy: its view and the sum are not one summary (%d computed)", computed)
	}
	if !same(p.Health(), h) || !same(p.ByProxy(), by) || computed != 1 {
		t.Fatalf("asked again without a read: computed again (%d)", computed)
	}
	expectKey = 2
	if h2 := p.Health(); same(h2, h) || computed != 2 {
		t.Fatalf("a new expectation: kept the old summary (%d computed)", computed)
	}
	h = p.Health()
	p.add("n1 http://x", "g", "n1", sample(5), 0, nil)
	if h2 := p.Health(); same(h2, h) || h2["g"]["pa"].Requests != 4 {
		t.Fatalf("after a read: %+v", h2["g"]["pa"])
	}
	p.add("n2 http://y", "g", "n2", sample(7), time.Millisecond, nil)
	by, h = p.ByProxy(), p.Health()
	if len(by) != 2 || same(by["n1"], h) || same(by["n2"], h) || h["g"]["pa"].Proxies != 2 {
		t.Fatalf("two Envoys: %d views, the sum reported by %d", len(by), h["g"]["pa"].Proxies)
	}
}

// The kept statuses are the ones computed afresh, read after read: through partial reads that carry the
// idle cluster, a full read that reads it again unchanged, traffic that starts and stops, an ejection, and
// a new expectation. And an idle cluster's status is computed once the window has nothing of it moving.
func TestKeptStatusesAreTheComputedOnes(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	version := 1
	exps := map[int]map[string]Expected{}
	expect := func(group, cluster string, down map[string]string) map[string]Expected {
		if exps[version] == nil {
			share := 0.4 + 0.1*float64(version) // another share for each version of the config
			exps[version] = map[string]Expected{"a:1": {Share: share}, "b:1": {Share: 1 - share}}
		}
		return exps[version]
	}
	p := &Poller{Interval: time.Hour, Window: 10 * time.Second, Log: slog.New(slog.DiscardHandler), Expect: expect,
		ExpectKey: func() any { return version }}
	p.proxies = map[string]*proxy{}
	idle := func() *Cluster {
		return &Cluster{Hosts: []Host{{Address: "a:1", Total: 7, Weight: 1}, {Address: "b:1", Total: 3, Weight: 1}}, Ejections: map[string]uint64{}}
	}
	busy := func(n uint64, ejected bool) *Cluster {
		c := &Cluster{Hosts: []Host{{Address: "a:1", Total: n, Weight: 1}, {Address: "b:1", Total: n, Weight: 1}},
			Latency: []Bucket{{UpperMs: 1, Count: 2 * n}, {UpperMs: math.Inf(1), Count: 2 * n}}, Ejections: map[string]uint64{}}
		if ejected {
			c.Hosts[1].Reasons, c.Hosts[1].Outlier = []string{"outlier detection"}, true
		}
		return c
	}
	// Reads about 2 s apart, as a read put off for config sent lately makes them: the window's length moves.
	at := func(i int) time.Time {
		return t0.Add(time.Duration(2*i)*time.Second + time.Duration(i%3)*300*time.Millisecond)
	}
	// "late" is first read at read 3, by a partial read: the latency base, older than the last full read,
	// does not have it.
	full := func(i int, n uint64, ejected bool) *Sample {
		s := &Sample{At: at(i), StatsAt: at(i), Clusters: map[string]*Cluster{"idle": idle(), "busy": busy(n, ejected)}}
		if i >= 3 {
			s.Clusters["late"] = idle()
		}
		return s
	}
	p.add("n http://x", "g", "n", full(0, 0, false), time.Millisecond, nil)
	var n uint64
	var idleRows, lateRows []v1alpha1.BackendStatus
	for i := 1; i <= 30; i++ {
		var s *Sample
		switch {
		case i == 15:
			s = full(i, n, false) // every cluster read again
		default:
			prev := p.proxies["n http://x"].samples[len(p.proxies["n http://x"].samples)-1]
			read := map[string]*Cluster{}
			if i == 3 {
				read["late"] = idle()
			}
			if i < 10 || (i > 20 && i < 25) {
				n += 5 // traffic
				read["busy"] = busy(n, i == 22)
			}
			s = carry(prev, at(i), read, nil)
		}
		if i == 27 {
			version = 2 // the config changed: new expected shares
		}
		p.add("n http://x", "g", "n", s, 0, nil)
		hs, _ := p.fresh()
		got := p.Health()
		if want := SummarizeExpected(hs, p.Window, expect); !reflect.DeepEqual(got, want) {
			t.Fatalf("read %d: kept\n%+v\nwant\n%+v", i, got, want)
		}
		idleRows = append(idleRows, got["g"]["idle"])
		if i >= 3 {
			lateRows = append(lateRows, got["g"]["late"])
		}
	}
	// The idle cluster never moves: its status is computed at the first read and again only for the new
	// expectation, the full read included (it read the cluster again as it was: the same pointer kept).
	reused := 0
	for i := 1; i < len(idleRows); i++ {
		if &idleRows[i].PerEndpoint[0] == &idleRows[i-1].PerEndpoint[0] {
			reused++
		}
	}
	if reused != 28 {
		t.Errorf("the idle cluster's status was kept %d times out of 29", reused)
	}
	// The late cluster's is computed again at the next read (the read before now has it), when the window's
	// start first has it (requests are counted from there), and for the new expectation.
	reused = 0
	for i := 1; i < len(lateRows); i++ {
		if &lateRows[i].PerEndpoint[0] == &lateRows[i-1].PerEndpoint[0] {
			reused++
		}
	}
	if reused != 24 {
		t.Errorf("the late cluster's status was kept %d times out of 27", reused)
	}
}

// A host field added later must be compared too: every field of two hosts that differ in it alone.
func TestSameClusterComparesEveryHostField(t *testing.T) {
	base := Host{Address: "a:1", Reasons: []string{"x"}, Outlier: true, Total: 1, Errors: 1, Active: 1, Weight: 1, Priority: 1}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		h := base
		h.Reasons = slices.Clone(base.Reasons)
		f := reflect.ValueOf(&h).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("b:1")
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"y"}))
		case reflect.Bool:
			f.SetBool(false)
		case reflect.Uint64, reflect.Uint32:
			f.SetUint(2)
		default:
			t.Fatalf("Host.%s: a kind sameCluster's test does not know", v.Type().Field(i).Name)
		}
		if sameCluster(&Cluster{Hosts: []Host{base}}, &Cluster{Hosts: []Host{h}}) {
			t.Errorf("hosts differing in %s are the same to sameCluster", v.Type().Field(i).Name)
		}
	}
	if !sameCluster(&Cluster{Hosts: []Host{base}, Ejections: map[string]uint64{}}, &Cluster{Hosts: []Host{base}}) {
		t.Error("an empty map read is not the same as none")
	}
}

// A summary of many clusters calls Yield as it goes (every few hundred clusters), and what it sums up is
// what it would without.
func TestSummaryYieldsAsItGoes(t *testing.T) {
	yields := 0
	p := &Poller{Interval: time.Hour, Window: 10 * time.Second, Log: slog.New(slog.DiscardHandler), Yield: func() { yields++ }}
	p.proxies = map[string]*proxy{}
	t0 := time.Now().Add(-time.Minute)
	clusters := map[string]*Cluster{}
	for i := range 2000 {
		clusters[fmt.Sprintf("c%d", i)] = &Cluster{Hosts: []Host{{Address: "a:1", Total: uint64(i), Weight: 1}}, Ejections: map[string]uint64{}}
	}
	p.add("n http://x", "g", "n", &Sample{At: t0, StatsAt: t0, Clusters: clusters}, time.Millisecond, nil)
	got := p.Health()
	hs, _ := p.fresh()
	if want := SummarizeExpected(hs, p.Window, nil); !reflect.DeepEqual(got, want) {
		t.Fatal("the summary that yielded differs from one that did not")
	}
	if len(got["g"]) != 2000 {
		t.Fatalf("%d clusters summed up, want 2000", len(got["g"]))
	}
	// 2,000 clusters gone through three times (marked, summed, kept statuses copied): 11 calls.
	if yields < 3*2000/yieldEvery {
		t.Errorf("Yield called %d times, want at least %d", yields, 3*2000/yieldEvery)
	}
}
