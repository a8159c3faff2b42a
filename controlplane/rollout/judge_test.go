package rollout

import (
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
