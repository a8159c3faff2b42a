package rollout

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Verdicts of Judge and JudgeStage.
const (
	Pass = iota
	Hold
	Breach
)

// Why a stage that holds would be decided by one more canary (Verdict.Widen).
const (
	// widenDisagree: the canaries that served enough disagree, and no majority of them agrees.
	widenDisagree = iota + 1
	// widenQuiet: too few canaries served enough to be judged by more than one Envoy's numbers.
	widenQuiet
)

// NodeNumbers are one Envoy's numbers over a stage's window.
type NodeNumbers struct {
	Node string
	v1alpha1.RolloutNumbers
	// Dead are the clusters whose every endpoint fails its active health checks on this Envoy.
	Dead []string
}

// Verdict is a stage's judgement (JudgeStage).
type Verdict struct {
	Verdict int
	Why     string
	// Canary and Reference are the numbers judged: each side's believed Envoys.
	Canary, Reference v1alpha1.RolloutNumbers
	// Flagged are the Envoys not believed: their numbers disagreed with the others' on their side, or they
	// rejected the config the other canaries took.
	Flagged []string
	// Widen, on a hold, says that one more canary would decide (widenDisagree, widenQuiet).
	Widen int
}

// JudgeStage judges a stage on each Envoy's own numbers, so that no single Envoy decides: not one that
// lies about its stats (it reads them from a port the Envoy declares), nor one with a fault of its own.
//   - Each Envoy counts once, whatever requests it reports: a side's error rate is the mean of its
//     believed Envoys' own rates, and its p99 their median.
//   - An Envoy votes when it served at least minRequests / (2 × canaries), rounded up. A voter whose numbers
//     disagree with more than half of the other voters of its side (error rates further apart than
//     maxErrorRateIncrease and than chance allows, or p99s further apart than maxP99Ratio and
//     RolloutP99Slack) is flagged and not believed; with no majority (two that disagree), none is, and one
//     more canary decides, unless at least required of them breach each on its own numbers and together:
//     then the stage breaches, as it would whichever of them were believed.
//   - The stage needs required believed canaries (two when it has two or more): with fewer, it holds and
//     says that one more canary would decide (Widen).
//   - The other Envoys are the reference, with the same rule; when they disagree with no majority, the
//     canaries are compared with the lowest of them, so that a lying Envoy among them can only make the
//     verdict stricter.
//   - Canaries in nacked rejected the config, and those in late did not take it in time (see took.go):
//     they are flagged, and their numbers left out.
//
// A backend whose every endpoint fails its active health checks on most canaries (at least required of
// them), and not on most other Envoys (when there are others), breaches: with Envoy's panic mode its traffic still flows, but the
// change broke its health. No canary request at all holds or breaches as analysis.noTraffic says; fewer
// than minRequests hold. The believed numbers are then compared as Judge compares them.
func JudgeStage(a *v1alpha1.RolloutAnalysis, canaries, others []NodeNumbers, earlier *v1alpha1.RolloutNumbers, nacked, late []string, required int) Verdict {
	var v Verdict
	var notes []string
	var judged []NodeNumbers
	var total int64
	for _, c := range canaries {
		if slices.Contains(nacked, c.Node) || slices.Contains(late, c.Node) {
			continue
		}
		judged = append(judged, c)
		total += c.Requests
	}
	if len(nacked) > 0 {
		v.Flagged = append(v.Flagged, nacked...)
		notes = append(notes, fmt.Sprintf("%s rejected the config the other canaries took: not believed", strings.Join(nacked, ", ")))
	}
	if len(late) > 0 {
		v.Flagged = append(v.Flagged, late...)
		notes = append(notes, fmt.Sprintf("%s took the candidate after the other canaries' bake began: not believed", strings.Join(late, ", ")))
	}
	minReq := *a.MinRequests
	v.Canary = combine(judged)
	if dead := deadOnMost(judged, required); len(dead) > 0 && len(others) > 0 {
		if gone := slices.DeleteFunc(dead, func(c string) bool { return slices.Contains(deadOnMost(others, 1), c) }); len(gone) > 0 {
			v.Verdict = Breach
			v.Why = fmt.Sprintf("every endpoint of %s fails its active health checks on the canaries, not on the other Envoys", strings.Join(gone, ", "))
			return v.note(notes)
		}
	}
	switch {
	case len(judged) == 0:
		// No stats read from them over the window: no data, which is not no traffic.
		v.Verdict, v.Why = Hold, "no stats read from the canaries since the stage began (is their stats port read?)"
		return v.note(notes)
	case total == 0 && a.NoTraffic == v1alpha1.NoTrafficRollBack:
		v.Verdict, v.Why = Breach, "the canaries served no request (analysis.noTraffic: RollBack)"
		return v.note(notes)
	case total == 0:
		v.Verdict, v.Why = Hold, "the canaries served no request (analysis.noTraffic: Hold: waiting for traffic)"
		return v.note(notes)
	case total < minReq:
		v.Verdict, v.Why = Hold, fmt.Sprintf("the canaries served %d requests; %d are needed to judge", total, minReq)
		return v.note(notes)
	}
	voteMin := max(1, (minReq+int64(2*len(canaries))-1)/int64(2*len(canaries)))
	vs := voters(judged, voteMin)
	believed, flagged, tie := agree(a, vs)
	ref, refNote, refFlagged := reference(a, others, minReq)
	if tie {
		// Disagreeing canaries that each breach on their own numbers leave nothing for one more canary to
		// decide: whichever of them is believed, the change breaches, and one more canary would only run it
		// too. Two of them with a fault of their own (a stall that raised one's p99, say) could not make a
		// good change breach unless each breached alone. Those are judged as believed; the others flagged.
		if bad, rest := breachEach(a, vs, ref, earlier); len(bad) >= max(required, 1) {
			if verdict, _ := Judge(a, combine(bad), ref, earlier); verdict == Breach {
				notes = append(notes, fmt.Sprintf("the canaries disagree (%s), and each of %d breaches on its own numbers", describe(vs), len(bad)))
				believed, flagged, tie = bad, rest, false
			}
		}
	}
	for _, f := range flagged {
		v.Flagged = append(v.Flagged, f.Node)
	}
	if tie {
		v.Verdict, v.Widen = Hold, widenDisagree
		v.Why = fmt.Sprintf("the canaries disagree (%s): none is believed; one more canary decides", describe(flagged))
		return v.note(notes)
	}
	if len(flagged) > 0 {
		notes = append(notes, fmt.Sprintf("%s disagreed with the other canaries: not believed", describe(flagged)))
	}
	if len(believed) < required {
		v.Verdict, v.Widen = Hold, widenQuiet
		v.Why = fmt.Sprintf("%d of %d canaries served at least %d requests and agree; %d are needed to judge", len(believed), len(canaries), voteMin, required)
		return v.note(notes)
	}
	v.Canary = combine(believed)
	v.Reference = ref
	v.Flagged = append(v.Flagged, refFlagged...)
	if refNote != "" {
		notes = append(notes, refNote)
	}
	v.Verdict, v.Why = Judge(a, v.Canary, ref, earlier)
	return v.note(notes)
}

// breachEach splits voters into those that breach on their own numbers against ref and the rest.
func breachEach(a *v1alpha1.RolloutAnalysis, voters []NodeNumbers, ref v1alpha1.RolloutNumbers, earlier *v1alpha1.RolloutNumbers) (bad, rest []NodeNumbers) {
	for _, x := range voters {
		if verdict, _ := compare(a, combine([]NodeNumbers{x}), ref, earlier); verdict == Breach {
			bad = append(bad, x)
		} else {
			rest = append(rest, x)
		}
	}
	return bad, rest
}

func (v Verdict) note(notes []string) Verdict {
	if len(notes) > 0 {
		v.Why += "; " + strings.Join(notes, "; ")
	}
	slices.Sort(v.Flagged)
	v.Flagged = slices.Compact(v.Flagged)
	return v
}

// deadOnMost are the clusters dead (see NodeNumbers.Dead) on more than half of xs, and on at least min of
// them.
func deadOnMost(xs []NodeNumbers, min int) []string {
	count := map[string]int{}
	for _, x := range xs {
		for _, c := range x.Dead {
			count[c]++
		}
	}
	var out []string
	for c, n := range count {
		if 2*n > len(xs) && n >= min {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// voters are the Envoys of xs that served at least min requests.
func voters(xs []NodeNumbers, min int64) []NodeNumbers {
	var out []NodeNumbers
	for _, x := range xs {
		if x.Requests >= min {
			out = append(out, x)
		}
	}
	return out
}

// agree splits xs into the Envoys believed and those flagged: an Envoy is flagged when it disagrees with
// more than half of the others. tie: no majority (as many flagged as not, or more); none is believed then.
func agree(a *v1alpha1.RolloutAnalysis, xs []NodeNumbers) (believed, flagged []NodeNumbers, tie bool) {
	if len(xs) < 2 {
		return xs, nil, false
	}
	for i, x := range xs {
		against := 0
		for j, y := range xs {
			if i != j && disagree(a, x.RolloutNumbers, y.RolloutNumbers) {
				against++
			}
		}
		if 2*against > len(xs)-1 {
			flagged = append(flagged, x)
		} else {
			believed = append(believed, x)
		}
	}
	if 2*len(flagged) >= len(xs) {
		return nil, flagged, true
	}
	return believed, flagged, false
}

// disagree tells whether two Envoys' numbers differ by more than the analysis allows a canary to differ from
// the reference and, for error rates, by more than chance explains (three standard deviations of the
// difference of two proportions).
func disagree(a *v1alpha1.RolloutAnalysis, x, y v1alpha1.RolloutNumbers) bool {
	if x.Requests > 0 && y.Requests > 0 {
		apart := func(ex, ey int64) bool {
			rx, ry := float64(ex)/float64(x.Requests), float64(ey)/float64(y.Requests)
			p := float64(ex+ey) / float64(x.Requests+y.Requests)
			noise := 3 * math.Sqrt(p*(1-p)*(1/float64(x.Requests)+1/float64(y.Requests)))
			return math.Abs(rx-ry) > max(*a.MaxErrorRateIncrease, noise)
		}
		if apart(min(x.Errors, x.Requests), min(y.Errors, y.Requests)) || apart(min(x.ClientErrors, x.Requests), min(y.ClientErrors, y.Requests)) {
			return true
		}
	}
	if x.LatencyP99Ms != nil && y.LatencyP99Ms != nil {
		hi, lo := max(*x.LatencyP99Ms, *y.LatencyP99Ms), min(*x.LatencyP99Ms, *y.LatencyP99Ms)
		if hi > *a.MaxP99Ratio*lo && hi-lo > v1alpha1.RolloutP99Slack {
			return true
		}
	}
	return false
}

func rate(n v1alpha1.RolloutNumbers) float64 {
	if n.Requests == 0 {
		return 0
	}
	return min(1, float64(n.Errors)/float64(n.Requests))
}

func clientRate(n v1alpha1.RolloutNumbers) float64 {
	if n.Requests == 0 {
		return 0
	}
	return min(1, float64(n.ClientErrors)/float64(n.Requests))
}

// combine sums xs' requests and errors, and gives each Envoy one vote in the error rates (the mean of their
// own) and in the p99 (their median).
func combine(xs []NodeNumbers) v1alpha1.RolloutNumbers {
	var out v1alpha1.RolloutNumbers
	var sum, sum4 float64
	var p99s []float64
	for _, x := range xs {
		out.Envoys++
		out.Requests += x.Requests
		out.Errors += x.Errors
		out.ClientErrors += x.ClientErrors
		sum += rate(x.RolloutNumbers)
		sum4 += clientRate(x.RolloutNumbers)
		if x.LatencyP99Ms != nil {
			p99s = append(p99s, *x.LatencyP99Ms)
		}
	}
	if out.Envoys > 0 && out.Requests > 0 {
		out.ErrorRate = round4(sum / float64(out.Envoys))
		out.ClientErrorRate = round4(sum4 / float64(out.Envoys))
	}
	if n := len(p99s); n > 0 {
		slices.Sort(p99s)
		m := p99s[n/2]
		if n%2 == 0 {
			m = (p99s[n/2-1] + p99s[n/2]) / 2
		}
		out.LatencyP99Ms = &m
	}
	return out
}

// reference is the other Envoys' numbers, judged by the same rule as the canaries' (see JudgeStage); note
// says what was left out, and flagged who.
func reference(a *v1alpha1.RolloutAnalysis, others []NodeNumbers, minReq int64) (ref v1alpha1.RolloutNumbers, note string, flagged []string) {
	if len(others) == 0 {
		return ref, "", nil
	}
	voteMin := max(1, (minReq+int64(2*len(others))-1)/int64(2*len(others)))
	vs := voters(others, voteMin)
	if len(vs) == 0 {
		return combine(others), "", nil
	}
	believed, out, tie := agree(a, vs)
	for _, f := range out {
		flagged = append(flagged, f.Node)
	}
	switch {
	case tie:
		// No majority: the lowest error rate and the lowest p99 among them, so that a lie can only make the
		// verdict stricter.
		ref = combine(out)
		lowest := slices.MinFunc(out, func(x, y NodeNumbers) int { return cmp.Compare(rate(x.RolloutNumbers), rate(y.RolloutNumbers)) })
		ref.ErrorRate = round4(rate(lowest.RolloutNumbers))
		lowest = slices.MinFunc(out, func(x, y NodeNumbers) int {
			return cmp.Compare(clientRate(x.RolloutNumbers), clientRate(y.RolloutNumbers))
		})
		ref.ClientErrorRate = round4(clientRate(lowest.RolloutNumbers))
		ref.LatencyP99Ms = nil
		for _, o := range out {
			if p := o.LatencyP99Ms; p != nil && (ref.LatencyP99Ms == nil || *p < *ref.LatencyP99Ms) {
				ref.LatencyP99Ms = p
			}
		}
		return ref, fmt.Sprintf("the other Envoys disagree (%s): compared with the lowest of them", describe(out)), flagged
	case len(out) > 0:
		note = fmt.Sprintf("%s disagreed with the other Envoys: not believed", describe(out))
	}
	return combine(believed), note, flagged
}

// describe names Envoys with their numbers, for a message.
func describe(xs []NodeNumbers) string {
	var parts []string
	for _, x := range xs {
		p99 := ""
		if x.LatencyP99Ms != nil {
			p99 = fmt.Sprintf(", p99 %.1f ms", *x.LatencyP99Ms)
		}
		parts = append(parts, fmt.Sprintf("%s: error rate %.4f over %d requests%s", x.Node, rate(x.RolloutNumbers), x.Requests, p99))
	}
	return strings.Join(parts, "; ")
}

func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

// Judge compares the canaries' numbers with the other Envoys' over the same window (or, when those served
// too little to judge by, with earlier's, from an earlier stage; or with an error rate of zero and no
// latency bound when there is neither). Fewer canary requests than minRequests hold.
func Judge(a *v1alpha1.RolloutAnalysis, canary, base v1alpha1.RolloutNumbers, earlier *v1alpha1.RolloutNumbers) (int, string) {
	minReq := *a.MinRequests
	if canary.Requests < minReq {
		return Hold, fmt.Sprintf("the canaries served %d requests; %d are needed to judge", canary.Requests, minReq)
	}
	return compare(a, canary, base, earlier)
}

// compare is Judge without the canaries' minimum of requests: one canary's numbers are compared so when
// the canaries disagree (breachEach), each having served what a voter must.
func compare(a *v1alpha1.RolloutAnalysis, canary, base v1alpha1.RolloutNumbers, earlier *v1alpha1.RolloutNumbers) (int, string) {
	minReq := *a.MinRequests
	ref, refName := base, "the other Envoys'"
	if base.Requests < minReq {
		switch {
		case earlier != nil:
			ref, refName = *earlier, "the other Envoys' at the last stage that had them"
		default:
			ref, refName = v1alpha1.RolloutNumbers{}, "no reference (too little traffic on the other Envoys)"
		}
	}
	if inc := canary.ErrorRate - ref.ErrorRate; inc > *a.MaxErrorRateIncrease {
		return Breach, fmt.Sprintf("canary error rate %.4f (%d errors of %d requests) exceeds %s %.4f (%d of %d) by %.4f, more than maxErrorRateIncrease %.4f",
			canary.ErrorRate, canary.Errors, canary.Requests, refName, ref.ErrorRate, ref.Errors, ref.Requests, inc, *a.MaxErrorRateIncrease)
	}
	if inc := canary.ClientErrorRate - ref.ClientErrorRate; inc > *a.MaxErrorRateIncrease {
		return Breach, fmt.Sprintf("canary 4xx rate %.4f (%d of %d requests) exceeds %s %.4f (%d of %d) by %.4f, more than maxErrorRateIncrease %.4f",
			canary.ClientErrorRate, canary.ClientErrors, canary.Requests, refName, ref.ClientErrorRate, ref.ClientErrors, ref.Requests, inc, *a.MaxErrorRateIncrease)
	}
	if canary.LatencyP99Ms != nil && ref.LatencyP99Ms != nil {
		c, r := *canary.LatencyP99Ms, *ref.LatencyP99Ms
		if c > *a.MaxP99Ratio*r && c-r > v1alpha1.RolloutP99Slack {
			return Breach, fmt.Sprintf("canary p99 %.1f ms exceeds %g times %s %.1f ms", c, *a.MaxP99Ratio, refName, r)
		}
	}
	p99 := "-"
	if canary.LatencyP99Ms != nil {
		p99 = fmt.Sprintf("%.1f ms", *canary.LatencyP99Ms)
	}
	return Pass, fmt.Sprintf("canary error rate %.4f over %d requests, p99 %s; against %s %.4f over %d requests",
		canary.ErrorRate, canary.Requests, p99, refName, ref.ErrorRate, ref.Requests)
}
