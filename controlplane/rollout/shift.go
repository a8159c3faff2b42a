package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
)

// KindTraffic is a rollout that shifts traffic to one backend in steps, on every Envoy (spec.rollout.
// trafficShift); the other kind gives the new generation to more Envoys stage by stage.
const KindTraffic = "traffic"

// shiftScale is what a route's weights add up to during a shift: a step's share in tenths of a percent.
const shiftScale = 1000

// Shift is candidate with every route that names backend sending it percent of its requests and the rest
// to the backends that route had in baseline (matched by name, or by place when unnamed), in their
// proportions. A backend of baseline's the candidate dropped is put back, so that its share can still go
// to it. A route baseline does not have, or had only backend (or nothing with a weight), is left as the
// candidate has it. The candidate is not changed.
func Shift(candidate, baseline *v1alpha1.LoadBalancerPolicy, backend string, percent int32) *v1alpha1.LoadBalancerPolicy {
	out := candidate.DeepCopy()
	if baseline == nil {
		return out
	}
	for i := range out.Spec.Routes {
		rt := &out.Spec.Routes[i]
		if !slices.ContainsFunc(rt.Backends, func(b v1alpha1.BackendRef) bool { return b.Name == backend }) {
			continue
		}
		var before *v1alpha1.Route
		for j := range baseline.Spec.Routes {
			br := &baseline.Spec.Routes[j]
			if (rt.Name != "" && br.Name == rt.Name) || (rt.Name == "" && br.Name == "" && j == i) {
				before = br
				break
			}
		}
		if before == nil {
			continue
		}
		var others []v1alpha1.BackendRef
		var sum int64
		for _, b := range before.Backends {
			w := int32(1)
			if b.Weight != nil {
				w = *b.Weight
			}
			if b.Name == backend || w <= 0 {
				continue
			}
			others = append(others, v1alpha1.BackendRef{Name: b.Name, Weight: &w})
			sum += int64(w)
		}
		if len(others) == 0 {
			continue
		}
		rest := int64(shiftScale - percent*shiftScale/100)
		refs := []v1alpha1.BackendRef{{Name: backend, Weight: ptr(percent * shiftScale / 100)}}
		for _, o := range others {
			refs = append(refs, v1alpha1.BackendRef{Name: o.Name, Weight: ptr(int32(rest * int64(*o.Weight) / sum))})
			if !slices.ContainsFunc(out.Spec.Backends, func(b v1alpha1.Backend) bool { return b.Name == o.Name }) {
				if k := slices.IndexFunc(baseline.Spec.Backends, func(b v1alpha1.Backend) bool { return b.Name == o.Name }); k >= 0 {
					out.Spec.Backends = append(out.Spec.Backends, *baseline.Spec.Backends[k].DeepCopy())
				}
			}
		}
		rt.Backends = refs
	}
	return out
}

// alongside names the backends that share a route with backend in p.
func alongside(p *v1alpha1.LoadBalancerPolicy, backend string) []string {
	var out []string
	for _, rt := range p.Spec.Routes {
		if !slices.ContainsFunc(rt.Backends, func(b v1alpha1.BackendRef) bool { return b.Name == backend }) {
			continue
		}
		for _, b := range rt.Backends {
			if b.Name != backend && !slices.Contains(out, b.Name) {
				out = append(out, b.Name)
			}
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// progressTraffic moves a traffic shift on: every Envoy runs the candidate with the step's weights; after
// the bake the backend's numbers, summed over the group's Envoys, are judged against the other backends'
// of its routes; c.mu is held.
func (c *Controller) progressTraffic(s *state, now time.Time) error {
	ts := s.Settings.TrafficShift
	n := len(ts.Steps)
	step := fmt.Sprintf("step %d of %d (%s at %d %%)", s.Stage+1, n, ts.Backend, ts.Steps[s.Stage])
	if len(s.Policies) != 1 || s.Policies[0].Candidate == nil {
		return c.rollBack(s, v1alpha1.RolloutAborted, step+": the rollout's record is incomplete")
	}
	pr := s.Policies[0]
	for _, p := range c.Proxies() {
		if p.Group != s.Group {
			continue
		}
		if msg := policystatus.RejectionSince(p, types.NamespacedName{Namespace: pr.Namespace, Name: pr.Name}, s.StageStarted); msg != "" {
			return c.rollBack(s, v1alpha1.RolloutRolledBack, fmt.Sprintf("%s: %s rejected the config (%s)", step, p.NodeID, msg))
		}
	}
	bake := s.Settings.BakeTime.Duration
	if now.Sub(s.StageStarted) < bake {
		s.Message = fmt.Sprintf("%s: judged at %s", step, s.StageStarted.Add(bake).UTC().Format(time.RFC3339))
		return nil
	}
	cand, err := c.Decode(pr.Candidate)
	if err != nil {
		return err
	}
	var base *v1alpha1.LoadBalancerPolicy
	if pr.Baseline != nil {
		if base, err = c.Decode(pr.Baseline); err != nil {
			return err
		}
	}
	shiftedTo := Shift(cand, base, ts.Backend, ts.Steps[s.Stage])
	from := map[string]bool{}
	for _, b := range alongside(shiftedTo, ts.Backend) {
		from[pr.Namespace+"/"+pr.Name+"/"+b] = true
	}
	to := map[string]bool{pr.Namespace + "/" + pr.Name + "/" + ts.Backend: true}
	rename := strings.NewReplacer("the canaries", "backend "+ts.Backend, "canary", ts.Backend, "the other Envoys'", "the other backends'").Replace
	why, passed, err := c.judge(s, c.clusterNumbers(s, to), c.clusterNumbers(s, from), step, rename)
	if !passed {
		return err
	}
	if s.Stage == n-1 {
		s.Phase = v1alpha1.RolloutSucceeded
		s.Message = fmt.Sprintf("every step passed; the routes run the spec's weights (last: %s)", why)
		c.log().Info("traffic shift succeeded", "group", s.Group, "policy", pr.key().String())
		return c.apply(s)
	}
	s.Stage++
	s.StageStarted = now
	s.Message = fmt.Sprintf("step %d passed (%s); step %d of %d: %s at %d %%", s.Stage, why, s.Stage+1, n, ts.Backend, ts.Steps[s.Stage])
	c.log().Info("traffic shift step passed", "group", s.Group, "step", s.Stage, "percent", ts.Steps[s.Stage])
	return c.apply(s)
}

// clusterNumbers sums the named clusters over the group's Envoys since the stage started.
func (c *Controller) clusterNumbers(s *state, clusters map[string]bool) v1alpha1.RolloutNumbers {
	var n v1alpha1.RolloutNumbers
	if c.Histories == nil {
		return n
	}
	var bs []proxystats.Bucket
	for _, h := range c.Histories() {
		if h.Group != s.Group {
			continue
		}
		w := proxystats.Since(h, s.StageStarted, clusters)
		if !w.Complete {
			continue
		}
		n.Envoys++
		n.Requests += int64(w.Requests)
		n.Errors += int64(w.Errors)
		bs = addAll(bs, w.Latency)
	}
	if n.Requests > 0 {
		n.ErrorRate = round4(float64(n.Errors) / float64(n.Requests))
	}
	n.LatencyP99Ms = proxystats.QuantileMs(bs, 0.99)
	return n
}
