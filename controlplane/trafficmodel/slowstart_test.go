package trafficmodel

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// TestSlowStartFraction follows Envoy's formula: weight × max((max(age, 1 ms) / window)^(1/aggression),
// min_weight_percent), full weight once the window has passed.
func TestSlowStartFraction(t *testing.T) {
	cases := []struct {
		name      string
		ss        ir.SlowStart
		age       time.Duration
		want      float64
		tolerance float64
	}{
		{"just joined: the minimum", ir.SlowStart{Window: 30 * time.Second, Aggression: 1, MinWeightPercent: 10}, 0, 0.1, 1e-9},
		{"half the window", ir.SlowStart{Window: 30 * time.Second, Aggression: 1, MinWeightPercent: 10}, 15 * time.Second, 0.5, 1e-9},
		{"the window passed", ir.SlowStart{Window: 30 * time.Second, Aggression: 1, MinWeightPercent: 10}, 30 * time.Second, 1, 1e-9},
		{"aggression 2 is faster at first", ir.SlowStart{Window: 40 * time.Second, Aggression: 2, MinWeightPercent: 10}, 10 * time.Second, 0.5, 1e-9},
		{"no minimum: a millisecond's worth", ir.SlowStart{Window: 60 * time.Second, Aggression: 1, MinWeightPercent: 0}, 0, 1.0 / 60000, 1e-12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(ir.RoundRobin, nil, nil, 1, 1)
			c.SlowStart = &tc.ss
			m := model(c, nil)
			if got := m.slow.Fraction(tc.age); math.Abs(got-tc.want) > tc.tolerance {
				t.Fatalf("fraction at %s: %v, want %v", tc.age, got, tc.want)
			}
		})
	}
}

// TestJoinedEndpointsRampUp: an endpoint that just joined a round-robin backend gets its minimum share of
// weight, half its weight half a window later; endpoints that all joined together keep equal shares (slow
// start does nothing when every endpoint is new); hashing backends do not ramp.
func TestJoinedEndpointsRampUp(t *testing.T) {
	ss := &ir.SlowStart{Window: 30 * time.Second, Aggression: 1, MinWeightPercent: 10}
	newOne := func(algo ir.Algorithm, ages Ages) []float64 {
		c := cluster(algo, nil, nil, 1, 1, 1)
		if algo == ir.RoundRobin || algo == ir.LeastRequest {
			c.SlowStart = ss
		}
		p := &Policy{Clusters: map[string]*Cluster{"c": model(c, nil)}}
		return p.Joined(ages).Clusters["c"].Shares()
	}
	third := "10.0.0.3:8080"
	for _, tc := range []struct {
		name string
		algo ir.Algorithm
		ages Ages
		want []float64
	}{
		{"just joined", ir.RoundRobin, Ages{third: 0}, []float64{1 / 2.1, 1 / 2.1, 0.1 / 2.1}},
		{"half the window, least request", ir.LeastRequest, Ages{third: 15 * time.Second}, []float64{0.4, 0.4, 0.2}},
		{"every endpoint new", ir.RoundRobin, Ages{"10.0.0.1:8080": 0, "10.0.0.2:8080": 0, third: 0}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"past the window", ir.RoundRobin, Ages{third: time.Minute}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := newOne(tc.algo, tc.ages)
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("shares %v, want %v", got, tc.want)
				}
			}
		})
	}
	c := cluster(ir.RingHash, nil, nil, 1, 1, 1)
	p := &Policy{Clusters: map[string]*Cluster{"c": model(c, nil)}}
	if h := p.Joined(Ages{third: 0}).Clusters["c"].Hosts[2]; h.Warming != 0 {
		t.Errorf("a ring hash endpoint warms up: %+v", h)
	}
}

// TestSlowStartCaveatSaysWhatTheSharesAssume: without ages the caveat says the shares are full weight and
// how to ask for the ramp; with them the shares follow it, and the caveat is gone.
func TestSlowStartCaveatSaysWhatTheSharesAssume(t *testing.T) {
	c := cluster(ir.RoundRobin, nil, nil, 1, 1)
	c.SlowStart = &ir.SlowStart{Window: time.Minute, Aggression: 1, MinWeightPercent: 10}
	m := model(c, nil)
	if cs := strings.Join(Caveats(m), "\n"); !strings.Contains(cs, "--joined") {
		t.Errorf("caveats without ages: %s", cs)
	}
	m.joined(Ages{"10.0.0.2:8080": 30 * time.Second})
	if cs := strings.Join(Caveats(m), "\n"); strings.Contains(cs, "slow start") {
		t.Errorf("caveats with 10.0.0.2 joined 30s ago: %s", cs)
	}
}

// TestJoinedAgesNameTheirField: bad input names joined or at.
func TestJoinedAgesNameTheirField(t *testing.T) {
	cfg := &ir.Config{Groups: map[string]*ir.Group{"default": {Name: "default", Clusters: []*ir.Cluster{{Name: "c", Source: ir.Source{Namespace: "default", Name: "p"},
		Endpoints: []ir.Endpoint{{Address: "10.0.0.1", Port: 80}}}}}}}
	for in, want := range map[[2]string]string{
		{"endpoint=10.0.0.9", "30s"}:  "joined: endpoint 10.0.0.9: no endpoint of default/p",
		{"endpoint=10.0.0.1", "soon"}: `at: "soon"`,
		{"endpoint=10.0.0.1", "-5s"}:  `at: "-5s"`,
		{"", "30s"}:                   "at: needs joined",
		{"address=10.0.0.1", ""}:      "joined \"address=10.0.0.1\"",
	} {
		var joined []string
		if in[0] != "" {
			joined = []string{in[0]}
		}
		_, err := JoinedAges(cfg, "default", "p", joined, in[1])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("joined %q at %q: %v, want %q", in[0], in[1], err, want)
		}
	}
	ages, err := JoinedAges(cfg, "default", "p", []string{"endpoint=10.0.0.1"}, "45s")
	if err != nil || ages["10.0.0.1:80"] != 45*time.Second {
		t.Errorf("ages %v, %v", ages, err)
	}
}
