package rollout

import (
	"slices"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func ms(v float64) *float64 { return &v }

func TestJudge(t *testing.T) {
	a := v1alpha1.RolloutDefaulted(nil).Analysis
	healthy := v1alpha1.RolloutNumbers{Envoys: 2, Requests: 1000, Errors: 5, ErrorRate: 0.005, LatencyP99Ms: ms(4)}
	for _, tc := range []struct {
		name            string
		canary, base    v1alpha1.RolloutNumbers
		earlier         *v1alpha1.RolloutNumbers
		want            int
		messageContains string
	}{
		{"too little traffic holds", v1alpha1.RolloutNumbers{Requests: 99, Errors: 99, ErrorRate: 1}, healthy, nil, Hold, "99 requests; 100 are needed"},
		{"same error rate passes", v1alpha1.RolloutNumbers{Requests: 500, Errors: 3, ErrorRate: 0.006, LatencyP99Ms: ms(5)}, healthy, nil, Pass, "canary error rate 0.0060"},
		{"error rate up by more than 5 points breaches", v1alpha1.RolloutNumbers{Requests: 500, Errors: 40, ErrorRate: 0.08}, healthy, nil, Breach, "exceeds the other Envoys' 0.0050"},
		{"p99 doubled but within the slack passes", v1alpha1.RolloutNumbers{Requests: 500, ErrorRate: 0, LatencyP99Ms: ms(20)}, healthy, nil, Pass, ""},
		{"p99 far above breaches", v1alpha1.RolloutNumbers{Requests: 500, ErrorRate: 0, LatencyP99Ms: ms(300)}, healthy, nil, Breach, "p99 300.0 ms"},
		{"no other Envoys: the earlier reference", v1alpha1.RolloutNumbers{Requests: 500, Errors: 40, ErrorRate: 0.08}, v1alpha1.RolloutNumbers{}, &healthy, Breach, "at the last stage that had them"},
		{"no reference at all: against zero", v1alpha1.RolloutNumbers{Requests: 500, Errors: 10, ErrorRate: 0.02}, v1alpha1.RolloutNumbers{}, nil, Pass, "no reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := Judge(a, tc.canary, tc.base, tc.earlier)
			if got != tc.want || !strings.Contains(msg, tc.messageContains) {
				t.Errorf("Judge = %d %q, want %d containing %q", got, msg, tc.want, tc.messageContains)
			}
		})
	}
}

func TestStageCount(t *testing.T) {
	for _, tc := range []struct {
		s    v1alpha1.RolloutStage
		n    int
		want int
	}{
		{v1alpha1.RolloutStage{Envoys: 1}, 3, 1},
		{v1alpha1.RolloutStage{Envoys: 5}, 3, 3},
		{v1alpha1.RolloutStage{Percent: 25}, 3, 1},
		{v1alpha1.RolloutStage{Percent: 25}, 10, 3},
		{v1alpha1.RolloutStage{Percent: 100}, 7, 7},
	} {
		if got := tc.s.Count(tc.n); got != tc.want {
			t.Errorf("%+v of %d = %d, want %d", tc.s, tc.n, got, tc.want)
		}
	}
}

// JudgeStage counts each Envoy once, tells chance from disagreement, and holds for want of canaries that
// agree.
func TestJudgeStage(t *testing.T) {
	a := v1alpha1.RolloutDefaulted(nil).Analysis
	n := func(node string, req, errs int64) NodeNumbers {
		return NodeNumbers{Node: node, RolloutNumbers: v1alpha1.RolloutNumbers{Envoys: 1, Requests: req, Errors: errs}}
	}
	others := []NodeNumbers{n("o1", 500, 0), n("o2", 500, 0)}
	fours := func(x NodeNumbers) NodeNumbers { x.ClientErrors = x.Requests; return x }
	dead := func(x NodeNumbers) NodeNumbers { x.Dead = []string{"default/p/new"}; return x }
	for _, tc := range []struct {
		name     string
		canaries []NodeNumbers
		nacked   []string
		want     int
		widen    int
		flagged  []string
		rate     float64
	}{
		// 2 of 60 and 0 of 60 are chance, not disagreement; the rate is each Envoy's once: (0.0333 + 0) / 2.
		{"chance is not disagreement", []NodeNumbers{n("c1", 60, 2), n("c2", 60, 0)}, nil, Pass, 0, nil, 0.0167},
		// A canary that claims a million requests counts as much as one with a hundred.
		{"one Envoy, one vote", []NodeNumbers{n("c1", 100, 20), n("c2", 1000000, 0), n("c3", 100, 20)}, nil, Breach, 0, []string{"c2"}, 0.2},
		{"two that disagree decide nothing", []NodeNumbers{n("c1", 100, 100), n("c2", 100, 0)}, nil, Hold, widenDisagree, []string{"c1", "c2"}, 0},
		{"a quiet canary leaves one to judge", []NodeNumbers{n("c1", 300, 0), n("c2", 3, 0)}, nil, Hold, widenQuiet, nil, 0},
		{"a rejecting canary is not believed", []NodeNumbers{n("c1", 100, 0), n("c2", 100, 0), n("c3", 0, 0)}, []string{"c3"}, Pass, 0, []string{"c3"}, 0},
		{"4xx answers breach too", []NodeNumbers{fours(n("c1", 100, 0)), fours(n("c2", 100, 0))}, nil, Breach, 0, nil, 0},
		{"a backend dead on the canaries breaches", []NodeNumbers{dead(n("c1", 100, 0)), dead(n("c2", 100, 0))}, nil, Breach, 0, nil, 0},
		{"one canary's dead backend is judged as numbers", []NodeNumbers{dead(n("c1", 100, 0)), n("c2", 100, 0)}, nil, Pass, 0, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeStage(a, tc.canaries, others, nil, tc.nacked, nil, 2)
			t.Log(v.Why)
			if v.Verdict != tc.want || v.Widen != tc.widen || !slices.Equal(v.Flagged, tc.flagged) || (tc.want == Pass && v.Canary.ErrorRate != tc.rate) {
				t.Errorf("verdict %d widen %d flagged %v rate %v (%s); want %d, %d, %v, %v", v.Verdict, v.Widen, v.Flagged, v.Canary.ErrorRate, v.Why,
					tc.want, tc.widen, tc.flagged, tc.rate)
			}
		})
	}
}

// Canaries whose stats were not read over the window hold the stage, whatever noTraffic says: no data is not
// no traffic.
func TestJudgeStageWithoutStatsHolds(t *testing.T) {
	a := v1alpha1.RolloutDefaulted(&v1alpha1.Rollout{Analysis: &v1alpha1.RolloutAnalysis{NoTraffic: v1alpha1.NoTrafficRollBack}}).Analysis
	if v := JudgeStage(a, nil, nil, nil, nil, nil, 2); v.Verdict != Hold || !strings.Contains(v.Why, "no stats") {
		t.Errorf("verdict %d: %s", v.Verdict, v.Why)
	}
	empty := []NodeNumbers{{Node: "c1", RolloutNumbers: v1alpha1.RolloutNumbers{Envoys: 1}}, {Node: "c2", RolloutNumbers: v1alpha1.RolloutNumbers{Envoys: 1}}}
	if v := JudgeStage(a, empty, nil, nil, nil, nil, 2); v.Verdict != Breach || !strings.Contains(v.Why, "noTraffic: RollBack") {
		t.Errorf("no request at all: verdict %d: %s", v.Verdict, v.Why)
	}
}

// Canaries whose p99s disagree (a stall on a loaded machine raises one Envoy's alone) but that each breach on
// their own numbers breach: one more canary would only run the bad change too. Canaries that disagree on
// whether the change is bad still take one more canary, and so does a good change with one slow canary.
func TestJudgeStageDisagreeingCanariesThatEachBreach(t *testing.T) {
	a := v1alpha1.RolloutDefaulted(&v1alpha1.Rollout{Analysis: &v1alpha1.RolloutAnalysis{MinRequests: ptr(int64(20)), MaxP99Ratio: ptr(50.0)}}).Analysis
	n := func(node string, req, errs int64, p99 float64) NodeNumbers {
		return NodeNumbers{Node: node, RolloutNumbers: v1alpha1.RolloutNumbers{Envoys: 1, Requests: req, Errors: errs, LatencyP99Ms: ms(p99)}}
	}
	others := []NodeNumbers{n("o1", 140, 0, 1)}
	for _, tc := range []struct {
		name     string
		canaries []NodeNumbers
		want     int
		widen    int
		flagged  []string
	}{
		{"half failing on both, one slow", []NodeNumbers{n("c1", 140, 70, 0.9), n("c2", 140, 68, 600)}, Breach, 0, nil},
		{"one fails, the other slow", []NodeNumbers{n("c1", 140, 70, 0.9), n("c2", 140, 0, 600)}, Breach, 0, nil},
		{"one fails, the other does not", []NodeNumbers{n("c1", 140, 70, 1), n("c2", 140, 0, 1)}, Hold, widenDisagree, []string{"c1", "c2"}},
		{"a good change, one slow canary", []NodeNumbers{n("c1", 140, 0, 0.9), n("c2", 140, 0, 48)}, Hold, widenDisagree, []string{"c1", "c2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeStage(a, tc.canaries, others, nil, nil, nil, 2)
			t.Log(v.Why)
			if v.Verdict != tc.want || v.Widen != tc.widen || !slices.Equal(v.Flagged, tc.flagged) {
				t.Errorf("verdict %d widen %d flagged %v (%s); want %d, %d, %v", v.Verdict, v.Widen, v.Flagged, v.Why, tc.want, tc.widen, tc.flagged)
			}
		})
	}
}
