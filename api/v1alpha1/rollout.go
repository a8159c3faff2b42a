package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rollout asks for a change of the policy to reach the Envoys of its proxy group in stages, each judged on
// the Envoys' own numbers before the next (docs/rollouts.md).
type Rollout struct {
	// stages are the steps, in order: the first stage's Envoys (the canaries) get the new generation while
	// the others keep the previous one; after bakeTime the canaries are compared with the others and the
	// rollout goes on, holds (too little traffic) or rolls back. A stage gives the new generation to either
	// a number of Envoys or a percentage of the group's connected Envoys (rounded up, at least one). When
	// the group has three Envoys or more, a stage before the last has at least two canaries; a stage that
	// would add no Envoy to the stage before it is skipped. The last stage always covers every Envoy.
	// Defaults to [{envoys: 1}, {percent: 25}, {percent: 100}].
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Stages []RolloutStage `json:"stages,omitempty"`
	// bakeTime is how long each stage runs before it is judged, counted from when every canary of the stage
	// runs the new generation (has acknowledged it); canaries that have not within bakeTime (at least 30s)
	// roll the change back when they are most of the stage's. Defaults to 60s.
	// +optional
	BakeTime *metav1.Duration `json:"bakeTime,omitempty"`
	// analysis are the thresholds a stage is judged by.
	// +optional
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`
	// trafficShift, instead of stages across Envoys, moves traffic to one backend in steps on every Envoy
	// (as Flagger's canary analysis does, with no Prometheus): each step is judged by that backend's errors
	// and p99 against the other backends of its routes, as the Envoys report them, and a breach shifts
	// everything back to the previous generation. stages are then unused.
	// +optional
	TrafficShift *TrafficShift `json:"trafficShift,omitempty"`
}

// TrafficShift moves traffic to one backend in steps. At each step, every route of the policy that names
// the backend sends it that share of its requests, and the rest to the backends the route had in the
// previous generation, in their proportions. After the last step passes, the routes run this spec's
// weights. A route that the previous generation did not have (or that had only this backend) runs this
// spec's weights from the start.
type TrafficShift struct {
	// backend is the backend traffic moves to (a name in spec.backends).
	Backend string `json:"backend"`
	// steps are the backend's share of each route that names it, in percent, increasing. Defaults to
	// [5, 25, 50, 100].
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Steps []int32 `json:"steps,omitempty"`
}

// DefaultTrafficShiftSteps are the steps of a traffic shift that names none.
func DefaultTrafficShiftSteps() []int32 { return []int32{5, 25, 50, 100} }

// RolloutStage is one step of a rollout: envoys or percent, not both.
type RolloutStage struct {
	// envoys is how many Envoys of the group run the new generation in this stage.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Envoys int32 `json:"envoys,omitempty"`
	// percent is the share of the group's connected Envoys that run the new generation (rounded up).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent int32 `json:"percent,omitempty"`
}

// RolloutAnalysis are the thresholds a stage is judged by. The canaries' numbers over the bake are compared
// with those of the Envoys still on the previous generation over the same window, for the policy's
// clusters: requests and errors as clients saw them (Envoy's upstream_rq_completed and upstream_rq_5xx:
// 5xx answers, and the 503 and 504 Envoy answers itself for a refused or reset connection, no healthy
// upstream or a timeout; for TCP, connections and those that failed to connect or found no healthy
// upstream), 4xx answers (upstream_rq_4xx), p99 of upstream_rq_time, and backends whose every endpoint
// fails its active health checks. Each Envoy counts once; one whose numbers disagree with the others' on
// its side is not believed.
type RolloutAnalysis struct {
	// maxErrorRateIncrease is how much the canaries' error rate (errors / requests, 0 to 1) may exceed the
	// others', and their 4xx rate the others'. Defaults to 0.05 (five percentage points).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	// +optional
	MaxErrorRateIncrease *float64 `json:"maxErrorRateIncrease,omitempty"`
	// maxP99Ratio is how many times the others' p99 latency the canaries' may be. A p99 within
	// RolloutP99Slack of the others' never breaches (histogram buckets are coarse at low latency).
	// Defaults to 2.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxP99Ratio *float64 `json:"maxP99Ratio,omitempty"`
	// minRequests is how many requests the canaries must have served during the bake before they are
	// judged; with fewer, the stage holds (it neither passes nor fails) until they have. Defaults to 100.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinRequests *int64 `json:"minRequests,omitempty"`
	// noTraffic is what a stage does when its canaries served no request at all over the bake: Hold (wait
	// for traffic, the default) or RollBack (an unused change is taken back as a failed one). Requests
	// that failed before reaching a backend are traffic: they are counted as errors.
	// +kubebuilder:validation:Enum=Hold;RollBack
	// +optional
	NoTraffic string `json:"noTraffic,omitempty"`
}

// Values of spec.rollout.analysis.noTraffic.
const (
	NoTrafficHold     = "Hold"
	NoTrafficRollBack = "RollBack"
)

// Rollout defaults (see Rollout).
const (
	DefaultRolloutBakeTime             = time.Minute
	DefaultRolloutMaxErrorRateIncrease = 0.05
	DefaultRolloutMaxP99Ratio          = 2.0
	DefaultRolloutMinRequests          = 100
	// RolloutP99Slack is the p99 increase, in milliseconds, that never counts as a breach.
	RolloutP99Slack = 25.0
)

// DefaultRolloutStages are the stages of a rollout that names none.
func DefaultRolloutStages() []RolloutStage {
	return []RolloutStage{{Envoys: 1}, {Percent: 25}, {Percent: 100}}
}

// RolloutDefaulted returns r (nil: every default) with its defaults filled, as a copy.
func RolloutDefaulted(r *Rollout) *Rollout {
	out := &Rollout{}
	if r != nil {
		out = r.DeepCopy()
	}
	if len(out.Stages) == 0 {
		out.Stages = DefaultRolloutStages()
	}
	durationOr(&out.BakeTime, DefaultRolloutBakeTime)
	if out.Analysis == nil {
		out.Analysis = &RolloutAnalysis{}
	}
	orDefault(&out.Analysis.MaxErrorRateIncrease, DefaultRolloutMaxErrorRateIncrease)
	orDefault(&out.Analysis.MaxP99Ratio, DefaultRolloutMaxP99Ratio)
	orDefault(&out.Analysis.MinRequests, int64(DefaultRolloutMinRequests))
	if out.Analysis.NoTraffic == "" {
		out.Analysis.NoTraffic = NoTrafficHold
	}
	if out.TrafficShift != nil && len(out.TrafficShift.Steps) == 0 {
		out.TrafficShift.Steps = DefaultTrafficShiftSteps()
	}
	return out
}

// Count is how many of n Envoys the stage covers (at least one, at most n).
func (s RolloutStage) Count(n int) int {
	c := int(s.Envoys)
	if s.Percent > 0 {
		c = (int(s.Percent)*n + 99) / 100
	}
	return max(1, min(c, n))
}

// StageCount is how many of a group's n Envoys stage i of stages gives the new generation: every Envoy at
// the last stage; before it, the stage's own count, and at least two when the group has three Envoys or
// more (a stage is then never judged on one Envoy's numbers alone, and one Envoy is left to compare with).
func StageCount(stages []RolloutStage, i, n int) int {
	if i >= len(stages)-1 {
		return n
	}
	c := stages[i].Count(n)
	if n >= 3 {
		c = max(c, 2)
	}
	return min(c, n)
}

// ConditionRolledBack is True when the policy's last staged rollout was rolled back: its canaries breached
// the analysis thresholds, a canary rejected the config, or an operator aborted it. The message has the
// numbers that decided and the stage reached.
const ConditionRolledBack = "RolledBack"

// Rollout phases (status.rollout.phase).
const (
	RolloutProgressing = "Progressing"
	RolloutPaused      = "Paused"
	RolloutSucceeded   = "Succeeded"
	RolloutRolledBack  = "RolledBack"
	RolloutAborted     = "Aborted"
)

// RolloutStatus is where a staged rollout of the policy stands.
type RolloutStatus struct {
	// phase is Progressing, Paused, Succeeded, RolledBack or Aborted.
	Phase string `json:"phase"`
	// stage is the stage reached, from 1; stages is how many there are.
	Stage  int32 `json:"stage"`
	Stages int32 `json:"stages"`
	// candidateGeneration is the generation being rolled out; baselineGeneration the last one every Envoy
	// ran (0: the policy is new).
	CandidateGeneration int64 `json:"candidateGeneration"`
	BaselineGeneration  int64 `json:"baselineGeneration"`
	// canaries are the Envoys (node ids) that run the candidate now.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Canaries []string `json:"canaries,omitempty"`
	// stageStarted is when the current stage began.
	// +optional
	StageStarted *metav1.Time `json:"stageStarted,omitempty"`
	// candidateSince is when every canary of the stage ran the candidate (each had acknowledged a config
	// that carries it): the stage's bake, and the numbers it is judged on, count from then. Unset while a
	// canary has yet to take it.
	// +optional
	CandidateSince *metav1.Time `json:"candidateSince,omitempty"`
	// message says what the rollout waits for, or why it ended.
	// +optional
	Message string `json:"message,omitempty"`
	// flagged are the Envoys (node ids) whose numbers disagreed with the others' on their side (or that
	// rejected the config the others took) during this rollout: they were not believed.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Flagged []string `json:"flagged,omitempty"`
	// canary and baseline are the last analysis: the canaries' and the other Envoys' numbers over the
	// same window (each side's error rate is the mean of its believed Envoys' own, and its p99 their median).
	// +optional
	Canary *RolloutNumbers `json:"canary,omitempty"`
	// +optional
	Baseline *RolloutNumbers `json:"baseline,omitempty"`
	// trafficBackend and trafficPercent, in a traffic shift, are the backend traffic moves to and its share
	// of its routes now. canary and baseline are then that backend's numbers and the other backends'.
	// +optional
	TrafficBackend string `json:"trafficBackend,omitempty"`
	// +optional
	TrafficPercent *int32 `json:"trafficPercent,omitempty"`
}

// RolloutNumbers are the requests, errors and p99 latency of a set of Envoys over an analysis window.
type RolloutNumbers struct {
	Envoys    int32   `json:"envoys"`
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	ErrorRate float64 `json:"errorRate"`
	// clientErrors are the requests answered with a 4xx, and clientErrorRate their share: compared as the
	// error rate is, so that a change that turns requests away (a backend that wants TLS answers 400)
	// breaches too.
	// +optional
	ClientErrors int64 `json:"clientErrors,omitempty"`
	// +optional
	ClientErrorRate float64 `json:"clientErrorRate,omitempty"`
	// +optional
	LatencyP99Ms *float64 `json:"latencyP99Ms,omitempty"`
}

func (v *validator) rollout(p path, r *Rollout, s *LoadBalancerPolicySpec, backends map[string]bool) {
	if r == nil {
		return
	}
	if ts := r.TrafficShift; ts != nil {
		tp := p.child("trafficShift")
		named := false
		for i, rt := range s.Routes {
			for _, b := range rt.Backends {
				if b.Name == ts.Backend {
					named = true
					if rt.SessionPersistence != nil {
						v.add(newPath("spec").child("routes").index(i).child("sessionPersistence"),
							"not allowed on a route of trafficShift.backend %q: its backends are one cluster, which cannot be judged apart", ts.Backend)
					}
				}
			}
		}
		switch {
		case !backends[ts.Backend]:
			v.add(tp.child("backend"), "must name a backend in spec.backends, got %q", ts.Backend)
		case !named:
			v.add(tp.child("backend"), "no route names backend %q: there is no traffic to shift", ts.Backend)
		}
		last := int32(0)
		for i, st := range ts.Steps {
			if st < 1 || st > 100 || st <= last {
				v.add(tp.child("steps").index(i), "must be 1 to 100 and above the step before, got %d", st)
			}
			last = st
		}
		if len(ts.Steps) > 20 {
			v.add(tp.child("steps"), "at most 20 steps, got %d", len(ts.Steps))
		}
	}
	stages := p.child("stages")
	for i, s := range r.Stages {
		sp := stages.index(i)
		switch {
		case s.Envoys != 0 && s.Percent != 0:
			v.add(sp, "set envoys or percent, not both")
		case s.Envoys == 0 && s.Percent == 0:
			v.add(sp, "set envoys or percent")
		case s.Envoys < 0:
			v.add(sp.child("envoys"), "must be at least 1, got %d", s.Envoys)
		case s.Percent < 0 || s.Percent > 100:
			v.add(sp.child("percent"), "must be 1 to 100, got %d", s.Percent)
		}
	}
	if len(r.Stages) > 10 {
		v.add(stages, "at most 10 stages, got %d", len(r.Stages))
	}
	if r.BakeTime != nil {
		v.duration(p.child("bakeTime"), r.BakeTime.Duration, false)
	}
	if a := r.Analysis; a != nil {
		ap := p.child("analysis")
		if x := a.MaxErrorRateIncrease; x != nil && (*x < 0 || *x > 1) {
			v.add(ap.child("maxErrorRateIncrease"), "must be 0 to 1, got %g", *x)
		}
		if x := a.MaxP99Ratio; x != nil && *x < 1 {
			v.add(ap.child("maxP99Ratio"), "must be at least 1, got %g", *x)
		}
		if x := a.MinRequests; x != nil && *x < 1 {
			v.add(ap.child("minRequests"), "must be at least 1, got %d", *x)
		}
		switch a.NoTraffic {
		case "", NoTrafficHold, NoTrafficRollBack:
		default:
			v.add(ap.child("noTraffic"), "must be %s or %s, got %q", NoTrafficHold, NoTrafficRollBack, a.NoTraffic)
		}
	}
}
