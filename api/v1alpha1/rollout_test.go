package v1alpha1_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestValidateRollout(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	runCases(t, map[string]validateCase{
		"valid rollout": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Rollout = &v1alpha1.Rollout{Stages: []v1alpha1.RolloutStage{{Envoys: 1}, {Percent: 100}}, BakeTime: &metav1.Duration{Duration: 30e9}}
		}, nil},
		"bad stages and thresholds": {func(p *v1alpha1.LoadBalancerPolicy) {
			p.Spec.Rollout = &v1alpha1.Rollout{Stages: []v1alpha1.RolloutStage{{Envoys: 1, Percent: 5}, {}, {Percent: 120}},
				BakeTime: &metav1.Duration{}, Analysis: &v1alpha1.RolloutAnalysis{MaxErrorRateIncrease: f(2), MaxP99Ratio: f(0.5), MinRequests: n(0), NoTraffic: "Ignore"}}
		}, []string{
			`spec.rollout.stages[0]: set envoys or percent, not both`,
			`spec.rollout.stages[1]: set envoys or percent`,
			`spec.rollout.stages[2].percent: must be 1 to 100, got 120`,
			`spec.rollout.bakeTime: must be greater than zero`,
			`spec.rollout.analysis.maxErrorRateIncrease: must be 0 to 1, got 2`,
			`spec.rollout.analysis.maxP99Ratio: must be at least 1, got 0.5`,
			`spec.rollout.analysis.minRequests: must be at least 1, got 0`,
			`spec.rollout.analysis.noTraffic: must be Hold or RollBack, got "Ignore"`,
		}},
	})
}

func TestRolloutDefaulted(t *testing.T) {
	r := v1alpha1.RolloutDefaulted(nil)
	if len(r.Stages) != 3 || r.BakeTime.Duration != v1alpha1.DefaultRolloutBakeTime || *r.Analysis.MaxErrorRateIncrease != 0.05 ||
		*r.Analysis.MaxP99Ratio != 2 || *r.Analysis.MinRequests != 100 || r.Analysis.NoTraffic != v1alpha1.NoTrafficHold {
		t.Errorf("defaults: %+v %+v", r, r.Analysis)
	}
	set := &v1alpha1.Rollout{Analysis: &v1alpha1.RolloutAnalysis{MinRequests: func(v int64) *int64 { return &v }(5)}}
	if got := v1alpha1.RolloutDefaulted(set); *got.Analysis.MinRequests != 5 || set.BakeTime != nil {
		t.Errorf("a set field was replaced, or the input changed: %+v", got)
	}
}

// Every stage before the last has two canaries once the group has three Envoys, and the last has them all;
// a percentage is rounded up.
func TestStageCount(t *testing.T) {
	def := v1alpha1.DefaultRolloutStages()
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{1, []int{1, 1, 1}},
		{2, []int{1, 1, 2}},
		{3, []int{2, 2, 3}},
		{4, []int{2, 2, 4}},
		{10, []int{2, 3, 10}},
		{40, []int{2, 10, 40}},
	} {
		var got []int
		for i := range def {
			got = append(got, v1alpha1.StageCount(def, i, tc.n))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%d Envoys: stages of %v, want %v", tc.n, got, tc.want)
		}
	}
}
