package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// KeepEnded is how long a rollout that succeeded is still reported (status.rollout, lbctl rollout status,
// undo) before it is forgotten: the policy is then settled.
const KeepEnded = time.Hour

func (c *Controller) step(now time.Time) {
	if c.Leader != nil && !c.Leader() {
		c.mu.Lock()
		c.judging = time.Time{}
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.judging.IsZero() {
		c.judging = now
	}
	c.retryHeld(now)
	for _, name := range slices.Sorted(maps.Keys(c.byGroup)) {
		g := c.byGroup[name]
		store := !g.localSince.IsZero() // decided while this replica followed, and never stored by the leader then
		changed, err := c.progressGroup(g, now)
		if err != nil {
			c.log().Error("rollout", "group", name, "error", err)
		}
		if store || changed {
			if err := c.apply(g); err != nil {
				c.log().Error("rollout", "group", name, "error", err)
			}
		}
	}
}

// progressGroup moves each rollout of g on; it tells whether g is to be stored again. c.mu is held.
func (c *Controller) progressGroup(g *group, now time.Time) (bool, error) {
	proxies := c.Proxies()
	nodes := g.present(nodesOf(proxies, g.Group), now)
	changed := c.keepOrder(g, nodes, c.eligible(proxies, g.Group, now), nil)
	kept := g.Policies[:0]
	for _, p := range g.Policies {
		if p.Phase == v1alpha1.RolloutSucceeded && now.Sub(p.Ended) > KeepEnded {
			changed = true
			continue
		}
		kept = append(kept, p)
	}
	g.Policies = kept
	var errs []error
	for _, p := range g.Policies {
		if p.Phase != v1alpha1.RolloutProgressing {
			continue
		}
		var moved bool
		var err error
		if p.Kind == KindTraffic {
			moved, err = c.progressTraffic(g, p, proxies, now)
		} else {
			moved, err = c.progress(g, p, proxies, nodes, now)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.key(), err))
		}
		changed = changed || moved
	}
	if len(errs) > 0 {
		return changed, fmt.Errorf("%v", errs)
	}
	return changed, nil
}

// rejected are the nodes of among (every node of group when nil) that rejected p's config since its stage
// started.
func rejected(proxies []xdsserver.ProxyStatus, group string, p *policy, among []string) (nodes []string, msg string) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	for _, px := range proxies {
		if px.Group != group || (among != nil && !slices.Contains(among, px.NodeID)) || slices.Contains(nodes, px.NodeID) {
			continue
		}
		// A NACK from before the stage began is not the candidate's.
		if m := policystatus.RejectionSince(px, key, p.StageStarted); m != "" {
			nodes, msg = append(nodes, px.NodeID), m
		}
	}
	slices.Sort(nodes)
	return nodes, msg
}

// progress moves one policy's staged rollout on; it tells whether its group is to be stored. c.mu is held.
func (c *Controller) progress(g *group, p *policy, proxies []xdsserver.ProxyStatus, nodes []string, now time.Time) (bool, error) {
	nStages := len(p.Settings.Stages)
	if len(nodes) == 0 {
		p.Message = c.stageLine(p, 0)
		return false, nil
	}
	// Most canaries rejecting the candidate breach at once (checked before the canaries change: a NACK of
	// a canary that just joined counts from its stage's start); fewer are judged with the others.
	var nacked []string
	var msg string
	if len(p.Canaries) > 0 {
		nacked, msg = rejected(proxies, g.Group, p, p.Canaries)
	}
	if len(nacked) > 0 && 2*len(nacked) > len(p.Canaries) {
		who := "canary " + nacked[0]
		if len(nacked) > 1 {
			who = "canaries " + strings.Join(nacked, ", ")
		}
		c.rollBack(g, p, v1alpha1.RolloutRolledBack, fmt.Sprintf("stage %d of %d: %s rejected the config (%s)", p.Stage+1, nStages, who, msg), now)
		return true, nil
	}
	if c.place(g, p, nodes) {
		p.newStage(now)
		p.Message = c.stageLine(p, len(nodes))
		return true, nil
	}
	want := min(v1alpha1.StageCount(p.Settings.Stages, p.Stage, len(nodes))+p.Extra, len(nodes))
	if len(p.Canaries) == 0 || (len(p.Canaries) < want && len(p.Canaries) < 2) {
		p.Message = c.stageLine(p, len(nodes))
		return false, nil
	}
	// The bake counts from when every canary runs the candidate (took.go); one not believed earlier in the
	// rollout is not waited for again (its numbers are left out if it has not taken it).
	waiting, tookChanged := c.took(g, p, proxies, slices.Concat(nacked, p.Flagged), now)
	if len(waiting) > 0 && p.CandidateSince.IsZero() {
		return c.waitForCanaries(g, p, proxies, nodes, waiting, nacked, now) || tookChanged, nil
	}
	since := p.CandidateSince
	bake := p.Settings.BakeTime.Duration
	if now.Sub(since) < bake {
		p.Message = fmt.Sprintf("%s; canaries running the candidate since %s; judged at %s", c.stageLine(p, len(nodes)), since.UTC().Format(time.RFC3339),
			since.Add(bake).UTC().Format(time.RFC3339))
		return tookChanged, nil
	}
	canaries, others := c.numbers(g, p, since, nodes)
	where := fmt.Sprintf("stage %d of %d (%d of %d Envoys)", p.Stage+1, nStages, len(p.Canaries), len(nodes))
	v := JudgeStage(p.Settings.Analysis, canaries, others, p.Earlier, nacked, p.lateCanaries(nacked), min(2, want))
	// On a hold, one more canary decides, when the fleet has one: at once when the canaries disagree, after
	// a second bake when too few served enough.
	if v.Verdict == Hold && v.Widen != 0 && len(p.Canaries) < len(nodes) && (v.Widen == widenDisagree || now.Sub(since) >= 2*bake) {
		c.record(p, v)
		p.Extra++
		if c.place(g, p, nodes) {
			p.newStage(now)
			p.Message = fmt.Sprintf("%s: %s; one more canary: %s", where, v.Why, c.stageLine(p, len(nodes)))
			c.log().Info("rollout stage widened", "group", g.Group, "policy", p.key().String(), "canaries", p.Canaries, "flagged", v.Flagged)
			return true, nil
		}
		p.Extra--
	}
	if passed, store := c.settle(g, p, v, where, now); !passed {
		return store || tookChanged, nil
	}
	// The next stage that adds an Envoy; every Envoy runs the candidate once none is left.
	next, skipped := p.Stage+1, 0
	for next < nStages-1 && v1alpha1.StageCount(p.Settings.Stages, next, len(nodes)) <= len(p.Canaries) {
		next, skipped = next+1, skipped+1
	}
	if p.Stage == nStages-1 || (next == nStages-1 && len(p.Canaries) >= len(nodes)) {
		p.Phase, p.Ended = v1alpha1.RolloutSucceeded, now
		p.Message = fmt.Sprintf("every stage passed; every Envoy runs the candidate (last: %s)", v.Why)
		p.Canaries, p.Candidate, p.Took = nil, nil, nil
		c.log().Info("rollout succeeded", "group", g.Group, "policy", p.key().String())
		return true, nil
	}
	passed := p.Stage + 1
	p.Stage, p.Extra = next, 0
	c.place(g, p, nodes)
	p.newStage(now)
	skip := ""
	if skipped > 0 {
		skip = fmt.Sprintf(" (%d stage(s) skipped: they would add no Envoy)", skipped)
	}
	p.Message = fmt.Sprintf("stage %d passed (%s)%s; %s", passed, v.Why, skip, c.stageLine(p, len(nodes)))
	c.log().Info("rollout stage passed", "group", g.Group, "policy", p.key().String(), "stage", passed, "canaries", p.Canaries)
	return true, nil
}

// settle keeps a stage's verdict on p (see record): a hold says so in p's message, a breach rolls p back,
// and a pass keeps the reference's numbers as the next stage's earlier ones when they had traffic enough.
// where names the stage. It tells whether the verdict is a pass, and whether p's group is to be stored.
func (c *Controller) settle(g *group, p *policy, v Verdict, where string, now time.Time) (passed, store bool) {
	store = c.record(p, v)
	switch v.Verdict {
	case Hold:
		p.Message = where + ": holding: " + v.Why
		return false, store
	case Breach:
		c.rollBack(g, p, v1alpha1.RolloutRolledBack, where+": "+v.Why, now)
		return false, true
	}
	if v.Reference.Requests >= *p.Settings.Analysis.MinRequests {
		p.Earlier = &v.Reference
	}
	return true, store
}

// record keeps a stage's judgement on p: its numbers, and the Envoys not believed; it tells whether that
// flagged one not flagged before (to be stored).
func (c *Controller) record(p *policy, v Verdict) bool {
	p.Canary, p.BaselineNumbers = &v.Canary, &v.Reference
	before := len(p.Flagged)
	for _, f := range v.Flagged {
		if !slices.Contains(p.Flagged, f) {
			p.Flagged = append(p.Flagged, f)
		}
	}
	slices.Sort(p.Flagged)
	return len(p.Flagged) != before
}

// clusters are the names of p's clusters on either side (a candidate may move traffic to clusters the
// baseline lacks, and the other way round), from what the engine translated.
func (c *Controller) clusters(g *group, k objkey.Key) map[string]bool {
	out := map[string]bool{}
	res, _ := c.Engine.Result()
	for _, r := range []*translate.Result{res, c.Engine.BaselineResult(g.Group)} {
		if r == nil {
			continue
		}
		if pr := r.Policies.Of(k); pr != nil {
			for _, n := range pr.Clusters {
				out[n] = true
			}
		}
	}
	return out
}

// Watched names the clusters of group's staged rollouts and traffic shifts being judged, whose request
// counters every stats read is to read (proxystats.Poller.Watched).
func (c *Controller) Watched(group string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.byGroup[group]
	if g == nil {
		return nil
	}
	all := map[string]bool{}
	for _, p := range g.Policies {
		if p.Phase == v1alpha1.RolloutProgressing {
			maps.Copy(all, c.clusters(g, p.key()))
		}
	}
	return slices.Sorted(maps.Keys(all))
}

// numbers are, for p's clusters, each canary's and each other node's numbers since since, for the nodes
// whose stats cover the window.
func (c *Controller) numbers(g *group, p *policy, since time.Time, nodes []string) (canaries, others []NodeNumbers) {
	byNode := c.perNode(g, since, c.clusters(g, p.key()), nodes)
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		if slices.Contains(p.Canaries, n) {
			canaries = append(canaries, byNode[n])
		} else {
			others = append(others, byNode[n])
		}
	}
	return canaries, others
}

// perNode sums, for each node of nodes (every node of g's group when nil), what it served on clusters
// since since. A node counts once, however many streams or stats ports it has.
func (c *Controller) perNode(g *group, since time.Time, clusters map[string]bool, nodes []string) map[string]NodeNumbers {
	if c.Histories == nil {
		return nil
	}
	type acc struct {
		req, errs, fours uint64
		lat              []proxystats.Bucket
		dead             []string
	}
	sums := map[string]*acc{}
	for _, h := range c.Histories() {
		if h.Group != g.Group || (nodes != nil && !slices.Contains(nodes, h.Node)) {
			continue
		}
		w := proxystats.Since(h, since, clusters)
		if !w.Complete {
			continue
		}
		a := sums[h.Node]
		if a == nil {
			a = &acc{}
			sums[h.Node] = a
		}
		a.req += w.Requests
		a.errs += w.Errors
		a.fours += w.ClientErrors
		a.lat = proxystats.AddBuckets(a.lat, w.Latency)
		a.dead = append(a.dead, w.Dead...)
	}
	out := make(map[string]NodeNumbers, len(sums))
	for n, a := range sums {
		slices.Sort(a.dead)
		nn := NodeNumbers{Node: n, RolloutNumbers: v1alpha1.RolloutNumbers{Envoys: 1, Requests: int64(a.req), Errors: int64(a.errs),
			ClientErrors: int64(a.fours)}, Dead: slices.Compact(a.dead)}
		if a.req > 0 {
			nn.ErrorRate = round4(float64(a.errs) / float64(a.req))
			nn.ClientErrorRate = round4(float64(a.fours) / float64(a.req))
		}
		nn.LatencyP99Ms = proxystats.QuantileMs(a.lat, 0.99)
		out[n] = nn
	}
	return out
}

func ptr[T any](v T) *T { return &v }
