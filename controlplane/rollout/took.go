package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// A stage's bake counts from the moment every canary runs the candidate, not from when the canaries were
// placed: an Envoy (or lbplane) short of CPU takes a config late, and a bake counted from placement would
// judge the baseline's numbers, or too few of the candidate's. A canary runs the candidate once it has
// acknowledged the config the engine serves it and that config carries the candidate generation
// (engine.Serving: what the engine built for the canary's view, not a second copy of which view a node
// gets). A canary that has not taken the candidate within takeBound (it rejects it, or does not answer)
// cannot be judged: most canaries so is a breach, fewer are left out of the numbers, as a canary that
// rejects what the others took is (JudgeStage).

// MinTakeBound is the least time a connected canary has to take the candidate, however short the bake.
const MinTakeBound = 30 * time.Second

// takeBound is how long a canary placed for p's stage has to take the candidate: the bake time, and at
// least MinTakeBound.
func takeBound(p *policy) time.Duration {
	return max(p.Settings.BakeTime.Duration, MinTakeBound)
}

// newStage starts p's stage anew at now (new canaries, a widened stage, a resume): its bake waits for the
// canaries to run the candidate again. The canaries that stay keep when they took it.
func (p *policy) newStage(now time.Time) {
	p.StageStarted, p.CandidateSince = now, time.Time{}
	maps.DeleteFunc(p.Took, func(n string, _ time.Time) bool { return !slices.Contains(p.Canaries, n) })
}

// bakeFrom is when p's bake counts from: when every canary ran the candidate, or, until they have, the
// stage's start (for a message that names the earliest judgement).
func (p *policy) bakeFrom() time.Time {
	if !p.CandidateSince.IsZero() {
		return p.CandidateSince
	}
	return p.StageStarted
}

// took notes, for each connected canary of p that runs the candidate and was not known to, when it took
// it (its last acknowledgement, no later than now); the canaries in skip (those that rejected the
// candidate, and those not believed earlier in the rollout) are noted when they take it, but not waited
// for. Once every other canary has, p's CandidateSince is the last of those times (and never before the
// stage's start). It returns the canaries that have not taken it, the skipped ones left out, and tells
// whether p changed (to be stored). c.mu is held.
func (c *Controller) took(g *group, p *policy, proxies []xdsserver.ProxyStatus, skip []string, now time.Time) (waiting []string, changed bool) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	for _, n := range p.Canaries {
		if _, ok := p.Took[n]; ok {
			continue
		}
		at, ok := c.runsCandidate(g, p, key, n, proxies)
		if !ok {
			if !slices.Contains(skip, n) {
				waiting = append(waiting, n)
			}
			continue
		}
		if at.IsZero() || at.After(now) {
			at = now // a report without the time, or from a host whose clock is ahead
		}
		if p.Took == nil {
			p.Took = map[string]time.Time{}
		}
		p.Took[n], changed = at, true
	}
	if len(waiting) > 0 || !p.CandidateSince.IsZero() {
		return waiting, changed
	}
	since := p.StageStarted
	for _, n := range p.Canaries {
		if at, ok := p.Took[n]; ok && at.After(since) {
			since = at
		}
	}
	p.CandidateSince = since
	return nil, true
}

// runsCandidate tells whether canary n of p acknowledged the config the engine serves it, and that config
// carries p's candidate, and when it last acknowledged. c.mu is held.
func (c *Controller) runsCandidate(g *group, p *policy, key types.NamespacedName, n string, proxies []xdsserver.ProxyStatus) (time.Time, bool) {
	version, gen := c.Engine.Serving(g.Group, n, p.key())
	if gen != p.CandidateGeneration || version == "" {
		return time.Time{}, false
	}
	for _, px := range proxies {
		if px.Group != g.Group || px.NodeID != n || px.Version != version || px.State == xdsserver.Stale {
			continue
		}
		if policystatus.RejectionSince(px, key, p.StageStarted) != "" {
			continue
		}
		return px.AckedAt, true
	}
	return time.Time{}, false
}

// whyNotTaken says why canary n has not taken p's candidate, for a breach's message: Envoy's message when
// it rejected it, else what it last acknowledged. c.mu is held.
func (c *Controller) whyNotTaken(g *group, p *policy, n string, proxies []xdsserver.ProxyStatus) string {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	bound := takeBound(p)
	for _, px := range proxies {
		if px.Group != g.Group || px.NodeID != n {
			continue
		}
		if m := policystatus.RejectionSince(px, key, p.StageStarted); m != "" {
			return fmt.Sprintf("canary %s rejected the candidate (%s)", n, m)
		}
		switch {
		case px.Unresponsive:
			return fmt.Sprintf("canary %s has not answered the candidate's config within %s (%s)", n, bound, px.Message)
		case px.Version == "":
			return fmt.Sprintf("canary %s has acknowledged no config within %s", n, bound)
		}
		return fmt.Sprintf("canary %s has not acknowledged the candidate's config within %s (the last config it acknowledged is version %s, state %s)", n, bound, px.Version, px.State)
	}
	return fmt.Sprintf("canary %s has not taken the candidate within %s (it is not connected)", n, bound)
}

// notTaken names the canaries of late that never took p's candidate, each with why, for a message.
func (c *Controller) notTaken(g *group, p *policy, late []string, proxies []xdsserver.ProxyStatus) string {
	var why []string
	for _, n := range late {
		why = append(why, c.whyNotTaken(g, p, n, proxies))
	}
	return strings.Join(why, "; ")
}

// waitForCanaries is progress while canaries of p have yet to take its candidate (waiting; nacked rejected
// it): the stage waits for them, up to takeBound from its start (or from when this replica began to judge)
// for each connected one. Past it, when most canaries have not taken the candidate the rollout rolls back,
// naming them and why; fewer are left out of the numbers, and the bake counts from the others'. A canary
// that is not connected waits until it reconnects or, after CanaryGrace, is replaced. It tells whether p's
// group is to be stored. c.mu is held.
func (c *Controller) waitForCanaries(g *group, p *policy, proxies []xdsserver.ProxyStatus, nodes, waiting, nacked []string, now time.Time) bool {
	from := p.StageStarted
	if c.judging.After(from) {
		from = c.judging
	}
	deadline := from.Add(takeBound(p))
	connected := nodesOf(proxies, g.Group)
	late := 0
	for _, n := range waiting {
		if slices.Contains(connected, n) && !now.Before(deadline) {
			late++
		}
	}
	if late < len(waiting) {
		p.Message = fmt.Sprintf("%s; waiting for %d of %d canaries to take the candidate (%s), until %s at most", c.stageLine(p, len(nodes)),
			len(waiting), len(p.Canaries), strings.Join(waiting, ", "), deadline.UTC().Format(time.RFC3339))
		return false
	}
	out := slices.Concat(nacked, waiting)
	slices.Sort(out)
	if 2*len(out) > len(p.Canaries) {
		c.rollBack(g, p, v1alpha1.RolloutRolledBack, fmt.Sprintf("stage %d of %d: %d of %d canaries did not take the candidate: %s", p.Stage+1,
			len(p.Settings.Stages), len(out), len(p.Canaries), c.notTaken(g, p, out, proxies)), now)
		return true
	}
	// Left out: the bake counts from the others' (JudgeStage flags them).
	since := p.StageStarted
	for _, n := range p.Canaries {
		if at, ok := p.Took[n]; ok && at.After(since) {
			since = at
		}
	}
	p.CandidateSince = since
	p.Message = fmt.Sprintf("%s; %s: left out; the other canaries run the candidate since %s", c.stageLine(p, len(nodes)), c.notTaken(g, p, waiting, proxies),
		since.UTC().Format(time.RFC3339))
	c.log().Warn("rollout canaries left out", "group", g.Group, "policy", p.key().String(), "canaries", waiting)
	return true
}

// lateCanaries are p's canaries that had not taken the candidate when its bake began, but those that
// rejected it (nacked): left out of its numbers.
func (p *policy) lateCanaries(nacked []string) []string {
	var out []string
	for _, n := range p.Canaries {
		if at, ok := p.Took[n]; (!ok || at.After(p.CandidateSince)) && !slices.Contains(nacked, n) {
			out = append(out, n)
		}
	}
	return out
}
