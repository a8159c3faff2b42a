package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
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

// progressTraffic moves a traffic shift on: every Envoy runs the candidate with the step's weights; after
// the bake each Envoy's numbers for the backend are judged against its numbers for the other backends of
// its routes (JudgeStage, each Envoy counting once); it tells whether the group is to be stored. c.mu is
// held.
func (c *Controller) progressTraffic(g *group, p *policy, proxies []xdsserver.ProxyStatus, now time.Time) (bool, error) {
	ts := p.Settings.TrafficShift
	n := len(ts.Steps)
	step := fmt.Sprintf("step %d of %d (%s at %d %%)", p.Stage+1, n, ts.Backend, ts.Steps[p.Stage])
	if p.Candidate == nil {
		c.rollBack(g, p, v1alpha1.RolloutAborted, step+": the rollout's record is incomplete", now)
		return true, nil
	}
	nodes := nodesOf(proxies, g.Group)
	nacked, msg := rejected(proxies, g.Group, p, nil)
	if len(nacked) > 0 && 2*len(nacked) > len(nodes) {
		c.rollBack(g, p, v1alpha1.RolloutRolledBack, fmt.Sprintf("%s: %s rejected the config (%s)", step, strings.Join(nacked, ", "), msg), now)
		return true, nil
	}
	bake := p.Settings.BakeTime.Duration
	if now.Sub(p.StageStarted) < bake {
		p.Message = fmt.Sprintf("%s: judged at %s", step, p.StageStarted.Add(bake).UTC().Format(time.RFC3339))
		return false, nil
	}
	cand := p.Candidate.Policy()
	var base *v1alpha1.LoadBalancerPolicy
	if p.Baseline != nil {
		base = p.Baseline.Policy()
	}
	shiftedTo := Shift(cand, base, ts.Backend, ts.Steps[p.Stage])
	key := objkey.Key{Namespace: p.Namespace, Name: p.Name}
	from := map[string]bool{}
	for _, b := range alongside(shiftedTo, ts.Backend) {
		from[objkey.Cluster(key, b)] = true
	}
	to := map[string]bool{objkey.Cluster(key, ts.Backend): true}
	toNodes, fromNodes := c.perNode(g, p.StageStarted, to, nil), c.perNode(g, p.StageStarted, from, nil)
	var tos, froms []NodeNumbers
	for _, node := range slices.Sorted(maps.Keys(toNodes)) {
		tos = append(tos, toNodes[node])
	}
	for _, node := range slices.Sorted(maps.Keys(fromNodes)) {
		froms = append(froms, fromNodes[node])
	}
	v := JudgeStage(p.Settings.Analysis, tos, froms, p.Earlier, nacked, nil, min(2, len(nodes)))
	rename := strings.NewReplacer("the canaries", "backend "+ts.Backend, "canaries", "Envoys", "canary", ts.Backend, "the other Envoys'", "the other backends'").Replace
	v.Why = rename(v.Why)
	if passed, store := c.settle(g, p, v, step, now); !passed {
		return store, nil
	}
	if p.Stage == n-1 {
		p.Phase, p.Ended, p.Candidate = v1alpha1.RolloutSucceeded, now, nil
		p.Message = fmt.Sprintf("every step passed; the routes run the spec's weights (last: %s)", v.Why)
		c.log().Info("traffic shift succeeded", "group", g.Group, "policy", p.key().String())
		return true, nil
	}
	p.Stage++
	p.StageStarted = now
	p.Message = fmt.Sprintf("step %d passed (%s); step %d of %d: %s at %d %%", p.Stage, v.Why, p.Stage+1, n, ts.Backend, ts.Steps[p.Stage])
	c.log().Info("traffic shift step passed", "group", g.Group, "policy", p.key().String(), "step", p.Stage, "percent", ts.Steps[p.Stage])
	return true, nil
}
