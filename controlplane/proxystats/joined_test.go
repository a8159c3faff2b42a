package proxystats

import (
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"testing"
	"time"
)

// ramp is a linear slow start of window w from 10 %, as trafficmodel.Ramp.Fraction computes it with
// Envoy's defaults (the summary takes whatever function the expectation gives).
func ramp(w time.Duration) func(time.Duration) float64 {
	return func(age time.Duration) float64 {
		if age >= w {
			return 1
		}
		return max(float64(max(age, time.Millisecond))/float64(w), 0.1)
	}
}

func joinPoller(w time.Duration) *Poller {
	p := &Poller{Interval: 30 * time.Second, Window: time.Minute, Log: slog.New(slog.DiscardHandler),
		Expect: func(group, cluster string, down map[string]string) map[string]Expected {
			return map[string]Expected{"a:1": {Share: 0.5, Warming: ramp(w)}, "b:1": {Share: 0.5, Warming: ramp(w)}}
		}}
	p.proxies = map[string]*proxy{}
	return p
}

func hostsSample(at time.Time, hosts ...Host) *Sample {
	return &Sample{At: at, StatsAt: at, Clusters: map[string]*Cluster{"c": {Hosts: hosts}}}
}

func warmingOf(t *testing.T, h Health, addr string) *int32 {
	t.Helper()
	for _, e := range h["g"]["c"].PerEndpoint {
		if e.Address == addr {
			return e.WarmingPercent
		}
	}
	t.Fatalf("%s not listed: %+v", addr, h["g"]["c"].PerEndpoint)
	return nil
}

// An endpoint added between two reads of its cluster started its ramp in between: its status says how far
// into the window it is, from the middle of the two reads, and rises with the reads that follow although
// nothing else moves; once the window has passed, it is no longer warming. The endpoints of the Envoy's
// first read, which started long before, are not said to warm: lbplane did not see them join.
func TestWarmingFromTheReadsBetweenWhichAnEndpointJoined(t *testing.T) {
	p := joinPoller(20 * time.Second)
	t0 := time.Now().Add(-30 * time.Second)
	first := hostsSample(t0, Host{Address: "a:1", Weight: 1})
	p.add("e", "g", "n", first, time.Millisecond, nil)
	if h := p.Health(); warmingOf(t, h, "a:1") != nil {
		t.Fatalf("an endpoint there at the first read warms: %+v", h["g"]["c"].PerEndpoint)
	}
	second := hostsSample(t0.Add(time.Second), Host{Address: "a:1", Weight: 1}, Host{Address: "b:1", Weight: 1})
	p.add("e", "g", "n", second, time.Millisecond, nil)
	if got, want := second.Joined["c"]["b:1"], t0.Add(500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("b:1 joined at %v, want the middle of the reads %v", got, want)
	}
	if _, ok := second.Joined["c"]["a:1"]; ok {
		t.Fatalf("a:1 has a join time: %v", second.Joined)
	}
	// b:1 is 0.5 s into a 20 s window: the 10 % minimum.
	if w := warmingOf(t, p.Health(), "b:1"); w == nil || *w != 10 {
		t.Fatalf("b:1 warming %v, want 10", w)
	}
	var last int32
	for _, step := range []struct {
		at   time.Duration
		want int32
	}{{5 * time.Second, 22}, {10 * time.Second, 47}, {15 * time.Second, 72}} {
		// The same endpoints, read again: the cluster is carried by pointer, the percentage still moves.
		s := hostsSample(t0.Add(step.at), Host{Address: "a:1", Weight: 1}, Host{Address: "b:1", Weight: 1})
		p.add("e", "g", "n", s, time.Millisecond, nil)
		if s.Joined["c"]["b:1"] != second.Joined["c"]["b:1"] {
			t.Fatalf("the join time moved: %v", s.Joined)
		}
		w := warmingOf(t, p.Health(), "b:1")
		if w == nil || *w != step.want || *w <= last {
			t.Fatalf("at %s: b:1 warming %v, want %d", step.at, w, step.want)
		}
		last = *w
	}
	s := hostsSample(t0.Add(21*time.Second), Host{Address: "a:1", Weight: 1}, Host{Address: "b:1", Weight: 1})
	p.add("e", "g", "n", s, time.Millisecond, nil)
	if w := warmingOf(t, p.Health(), "b:1"); w != nil {
		t.Fatalf("past the window: b:1 warming %d", *w)
	}
}

// With active health checks, Envoy starts the ramp when the endpoint passes a check after waiting for its
// first one or failing: not when it was added. An endpoint added draining never ramps; reads too far
// apart tell nothing.
func TestJoinTimesFollowEnvoysRule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pending := Host{Address: "a:1", Reasons: []string{reasonActiveFailed, reasonActivePending}}
	failed := Host{Address: "a:1", Reasons: []string{reasonActiveFailed}}
	healthy := Host{Address: "a:1"}
	draining := Host{Address: "a:1", Reasons: []string{ReasonDraining}}
	ejected := Host{Address: "a:1", Reasons: []string{"outlier detection"}, Outlier: true}
	for _, tc := range []struct {
		name       string
		prev       []Host // nil: the cluster was not there
		cur        Host
		prevJoined time.Time
		gap        time.Duration
		want       time.Time
	}{
		{"added healthy", []Host{}, healthy, time.Time{}, time.Second, t0.Add(-500 * time.Millisecond)},
		{"a new cluster", nil, healthy, time.Time{}, time.Second, t0.Add(-500 * time.Millisecond)},
		{"waiting for its first check", []Host{}, pending, time.Time{}, time.Second, time.Time{}},
		{"passed its first check", []Host{pending}, healthy, time.Time{}, time.Second, t0.Add(-500 * time.Millisecond)},
		{"passed a check after failing", []Host{failed}, healthy, t0.Add(-time.Hour), 2 * time.Second, t0.Add(-time.Second)},
		{"failing", []Host{healthy}, failed, t0.Add(-time.Hour), time.Second, time.Time{}},
		{"ejected keeps its ramp", []Host{healthy}, ejected, t0.Add(-3 * time.Second), time.Second, t0.Add(-3 * time.Second)},
		{"added draining", []Host{}, draining, time.Time{}, time.Second, time.Time{}},
		{"undrained: Envoy does not ramp it", []Host{draining}, healthy, time.Time{}, time.Second, time.Time{}},
		{"reads too far apart", []Host{}, healthy, time.Time{}, time.Minute, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := &Sample{At: t0.Add(-tc.gap), Clusters: map[string]*Cluster{}}
			lastRead := map[string]time.Time{}
			if tc.prev != nil {
				prev.Clusters["c"] = &Cluster{Hosts: tc.prev}
				lastRead["c"] = prev.At
				if !tc.prevJoined.IsZero() {
					prev.Joined = map[string]map[string]time.Time{"c": {"a:1": tc.prevJoined}}
				}
			}
			cur := hostsSample(t0, tc.cur)
			markJoined(prev, cur, lastRead, prev.At, 10*time.Second)
			if got := cur.Joined["c"]["a:1"]; !got.Equal(tc.want) {
				t.Errorf("joined %v, want %v", got, tc.want)
			}
			if !lastRead["c"].Equal(t0) {
				t.Errorf("last read %v", lastRead["c"])
			}
		})
	}
}

// A partial read carries the join times of the clusters it does not read, and keeps the maps when no join
// changed (samples share them: a read costs the clusters it read); a full read drops the clusters gone.
func TestJoinTimesCarriedAndShared(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := &Sample{At: t0.Add(-time.Second), Clusters: map[string]*Cluster{
		"c": {Hosts: []Host{{Address: "a:1"}}}, "d": {Hosts: []Host{{Address: "b:1"}}}},
		Joined: map[string]map[string]time.Time{"c": {"a:1": t0.Add(-3 * time.Second)}, "d": {"b:1": t0.Add(-4 * time.Second)}}}
	cur := carry(prev, t0, map[string]*Cluster{"c": {Hosts: []Host{{Address: "a:1"}}}}, nil)
	markJoined(prev, cur, map[string]time.Time{"c": prev.At, "d": prev.At}, prev.At, 10*time.Second)
	if !maps.EqualFunc(cur.Joined, prev.Joined, func(a, b map[string]time.Time) bool { return maps.Equal(a, b) }) {
		t.Fatalf("joins %v, want %v", cur.Joined, prev.Joined)
	}
	if reflect.ValueOf(cur.Joined).UnsafePointer() != reflect.ValueOf(prev.Joined).UnsafePointer() {
		t.Errorf("the joins were copied")
	}
	full := &Sample{At: t0.Add(time.Second), Clusters: map[string]*Cluster{"c": {Hosts: []Host{{Address: "a:1"}}}}}
	lastRead := map[string]time.Time{"c": t0, "d": t0}
	markJoined(cur, full, lastRead, t0, 10*time.Second)
	if len(full.Joined) != 1 || !full.Joined["c"]["a:1"].Equal(t0.Add(-3*time.Second)) || len(lastRead) != 1 {
		t.Errorf("after d is gone: joins %v, last reads %v", full.Joined, lastRead)
	}
	if len(prev.Joined) != 2 {
		t.Errorf("an earlier sample's joins changed: %v", prev.Joined)
	}
}

// A first read of an Envoy that started less than the gap ago dates the ramps of its endpoints from the
// middle of its start and the read; an Envoy that started again since the last read did so too.
func TestJoinTimesOfANewOrRestartedEnvoy(t *testing.T) {
	p := joinPoller(time.Minute)
	t0 := time.Now().Add(-time.Minute)
	first := hostsSample(t0, Host{Address: "a:1"})
	first.Started = t0.Add(-2 * time.Second)
	p.add("e", "g", "n", first, time.Millisecond, nil)
	if got, want := first.Joined["c"]["a:1"], t0.Add(-time.Second); !got.Equal(want) {
		t.Fatalf("new Envoy: joined %v, want %v", got, want)
	}
	second := hostsSample(t0.Add(time.Minute), Host{Address: "a:1"})
	second.Started = first.Started
	p.add("e", "g", "n", second, time.Millisecond, nil)
	if !second.Joined["c"]["a:1"].Equal(first.Joined["c"]["a:1"]) {
		t.Fatalf("joined %v, want it carried", second.Joined)
	}
	third := hostsSample(t0.Add(time.Minute+time.Second), Host{Address: "a:1"})
	third.Started = t0.Add(time.Minute)
	p.add("e", "g", "n", third, time.Millisecond, nil)
	if got, want := third.Joined["c"]["a:1"], t0.Add(time.Minute+500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("restarted Envoy: joined %v, want %v", got, want)
	}
}

// Over several Envoys the status shows the lowest percentage: the latest ramp start any of them reports.
// An Envoy that does not know when its ramp started does not lower it; a warming endpoint is listed even
// when busier ones fill the list.
func TestWarmingIsTheLowestOverTheEnvoys(t *testing.T) {
	t0 := time.Unix(1000, 0)
	exp := func(group, cluster string, down map[string]string) map[string]Expected {
		out := map[string]Expected{}
		for i := range 12 {
			out[addrN(i)] = Expected{Share: 1.0 / 12, Warming: ramp(10 * time.Second)}
		}
		return out
	}
	hosts := func(requests uint64) []Host {
		var hs []Host
		for i := range 12 {
			hs = append(hs, Host{Address: addrN(i), Weight: 1, Total: requests * uint64(12-i)})
		}
		return hs
	}
	history := func(node string, joined map[string]time.Time) History {
		s0 := &Sample{At: t0, StatsAt: t0, Clusters: map[string]*Cluster{"c": {Hosts: hosts(0)}}}
		s1 := &Sample{At: t0.Add(4 * time.Second), StatsAt: t0.Add(4 * time.Second), Clusters: map[string]*Cluster{"c": {Hosts: hosts(10)}},
			Joined: map[string]map[string]time.Time{"c": joined}}
		return History{Group: "g", Node: node, Samples: []*Sample{s0, s1}}
	}
	last := addrN(11) // the fewest requests
	h := SummarizeExpected([]History{
		history("n1", map[string]time.Time{last: t0.Add(-4 * time.Second)}),
		history("n2", map[string]time.Time{last: t0.Add(2 * time.Second)}),
		history("n3", nil),
	}, time.Minute, exp)
	if w := warmingOf(t, h, last); w == nil || *w != 20 {
		t.Fatalf("warming %v, want 20 (2 s into 10 s, on n2)", w)
	}
	if n := len(h["g"]["c"].PerEndpoint); n != MaxBusiestListed+1 {
		t.Fatalf("%d listed", n)
	}
	if got := h["g"]["c"].PerEndpoint[0]; got.Address != last {
		t.Fatalf("the warming endpoint is not listed first: %+v", got)
	}
	for _, e := range h["g"]["c"].PerEndpoint[1:] {
		if e.WarmingPercent != nil {
			t.Fatalf("%s warming", e.Address)
		}
	}
}

func addrN(i int) string { return fmt.Sprintf("10.0.0.%d:80", i+1) }
