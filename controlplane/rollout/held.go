package rollout

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// Staging fails closed. In Kubernetes mode the API server has stored a change before lbplane hears of it,
// so a staged change whose rollout cannot start now (its state could not be written: the API server timed
// out, or refused it; or another kind of rollout of the policy is under way) cannot be refused as a push
// is. It is held instead: every Envoy is kept from it (each runs what it ran before the change), its status
// says why, and the elected replica tries to start it again every HeldRetry. It is never served to every
// Envoy at once. A later change that is not staged, or the policy's deletion, ends the hold.

// HeldRetry is how often the elected replica tries again to start a held change.
const HeldRetry = time.Second

// held is a staged change whose rollout could not start.
type held struct {
	ch     Change
	reason string
	since  time.Time
	tried  time.Time
}

// baselineOf is what every Envoy runs of a policy before a change whose previous version is old: the
// baseline of p, its rollout, when that rollout has not succeeded (a rollout under way, rolled back or
// aborted, superseded by the change), else old.
func baselineOf(p *policy, old *v1alpha1.LoadBalancerPolicy) *Version {
	if p != nil && p.Phase != "" && p.Phase != v1alpha1.RolloutSucceeded {
		return p.Baseline
	}
	return VersionOf(old)
}

// Stage starts the rollouts of changes that the sources already hold, or publish next whatever happens
// (Kubernetes: the API server stored them), one per policy, as Begin does; call it before the sources
// publish them. When they cannot start now it holds them, fail closed (see above), and tells why.
func (c *Controller) Stage(changes []Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start(changes, time.Now())
}

// start is Stage with c.mu held.
func (c *Controller) start(changes []Change, now time.Time) error {
	if c.byGroup == nil {
		c.byGroup = map[string]*group{}
	}
	err := c.check(changes)
	if err == nil {
		var kept map[string]*group
		err = c.retry(func() error {
			kept = c.keep()
			return c.begin(changes, now)
		})
		if err != nil {
			// What begin decided in memory is not served: every group as it was, and the changes held.
			c.putBack(kept)
		}
	}
	if err != nil {
		c.hold(changes, err, now)
		return err
	}
	for _, ch := range changes {
		if h := c.held[ch.Key]; h != nil && h.ch.Generation <= ch.Generation {
			delete(c.held, ch.Key)
			c.resplit(h.ch.Group)
		}
	}
	return nil
}

// hold keeps every Envoy from changes until their rollouts start; c.mu is held.
func (c *Controller) hold(changes []Change, why error, now time.Time) {
	if c.held == nil {
		c.held = map[objkey.Key]*held{}
	}
	for _, ch := range changes {
		h := c.held[ch.Key]
		if h == nil {
			h = &held{since: now}
			c.held[ch.Key] = h
		} else if h.ch.Group != ch.Group {
			defer c.resplit(h.ch.Group)
		}
		if h.reason != why.Error() || h.ch.Generation != ch.Generation {
			// Once per change and reason: the retries every HeldRetry are not logged again.
			c.log().Error("a staged change is held: no Envoy gets it until its rollout starts", "group", ch.Group, "policy", ch.Key.String(),
				"generation", ch.Generation, "reason", why.Error())
		}
		h.ch, h.reason, h.tried = ch, why.Error(), now
		c.resplit(ch.Group)
	}
}

// retryHeld tries again to start the held changes last tried at least HeldRetry ago, one at a time (one
// that still cannot start does not hold the others); c.mu is held.
func (c *Controller) retryHeld(now time.Time) {
	for _, k := range slices.SortedFunc(maps.Keys(c.held), func(a, b objkey.Key) int { return strings.Compare(a.String(), b.String()) }) {
		h := c.held[k]
		if h == nil || now.Sub(h.tried) < HeldRetry {
			continue
		}
		if c.start([]Change{h.ch}, now) == nil {
			c.log().Info("a held change's rollout started", "group", h.ch.Group, "policy", k.String(), "generation", h.ch.Generation,
				"held for", now.Sub(h.since).Round(time.Millisecond).String())
		}
	}
}

// unhold ends the holds of keys (a change that is not staged, or a deletion); c.mu is held.
func (c *Controller) unhold(keys []objkey.Key) {
	for _, k := range keys {
		if h := c.held[k]; h != nil {
			delete(c.held, k)
			c.resplit(h.ch.Group)
		}
	}
}

// resplit sets group's split again, from its rollouts and held changes; c.mu is held.
func (c *Controller) resplit(group string) {
	if g := c.byGroup[group]; g != nil {
		if err := c.split(g); err != nil {
			c.log().Error("rollout", "group", group, "error", err)
		}
		return
	}
	c.setSplit(group, nil)
}

// withHeld is sp with group's held changes kept from every Envoy; c.mu is held. A held policy whose
// traffic shift is under way stays as it is (every Envoy runs the shift's step); one whose staged rollout
// is under way has its canaries run that rollout's candidate and the others its baseline; any other runs
// its baseline everywhere.
func (c *Controller) withHeld(group string, sp *engine.Split) *engine.Split {
	g := c.byGroup[group]
	for k, h := range c.held {
		if h.ch.Group != group {
			continue
		}
		if sp == nil {
			sp = &engine.Split{Policies: map[objkey.Key]engine.PolicySplit{}}
		}
		var p *policy
		if g != nil {
			p = g.find(k)
		}
		ps, err := c.heldSplit(p, h, sp.Policies[k])
		if err != nil {
			// Every Envoy without the policy rather than with the held change.
			c.log().Error("reading the baseline of a held change", "policy", k.String(), "error", err)
			ps = engine.PolicySplit{}
		}
		sp.Policies[k] = ps
	}
	return sp
}

// heldSplit is held policy p's side of its group's split, ps as its rollout has it.
func (c *Controller) heldSplit(p *policy, h *held, ps engine.PolicySplit) (engine.PolicySplit, error) {
	switch {
	case p != nil && p.underWay() && p.Kind == KindTraffic:
		return ps, nil
	case p != nil && p.underWay() && p.Candidate != nil:
		ps.Candidate = p.Candidate.Policy()
		return ps, nil
	}
	out := engine.PolicySplit{}
	if b := baselineOf(p, h.ch.Old); b != nil {
		out.Baseline = b.Policy()
	}
	return out, nil
}

// heldStatus is the status of held policy k: its rollout's (p, nil when none) with why the change is held.
func (c *Controller) heldStatus(h *held, p *policy, st *v1alpha1.RolloutStatus) *v1alpha1.RolloutStatus {
	why := fmt.Sprintf("generation %d is held since %s: no Envoy gets it until its rollout starts (tried again every %s): %s",
		h.ch.Generation, h.since.UTC().Format(time.RFC3339), HeldRetry, h.reason)
	if p != nil && p.underWay() {
		st.Message = why + "; meanwhile " + st.Message
		return st
	}
	out := &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing, Stage: 1, Stages: int32(len(v1alpha1.RolloutDefaulted(h.ch.Rollout).Stages)),
		CandidateGeneration: h.ch.Generation, Message: why}
	if b := baselineOf(p, h.ch.Old); b != nil {
		out.BaselineGeneration = b.Generation
	}
	return out
}

// keep copies every group, for putBack; c.mu is held.
func (c *Controller) keep() map[string]*group {
	out := make(map[string]*group, len(c.byGroup))
	for name, g := range c.byGroup {
		v, err := json.Marshal(g)
		if err != nil {
			continue
		}
		cp := &group{}
		if json.Unmarshal(v, cp) != nil {
			continue
		}
		cp.raw, cp.localSince, cp.missing, cp.local = g.raw, g.localSince, g.missing, maps.Clone(g.local)
		out[name] = cp
	}
	return out
}

// putBack makes the groups kept's again, in memory, and serves them (nothing is stored); c.mu is held.
func (c *Controller) putBack(kept map[string]*group) {
	for name := range c.byGroup {
		if _, ok := kept[name]; !ok {
			delete(c.byGroup, name)
			c.setSplit(name, nil)
		}
	}
	for name, g := range kept {
		c.byGroup[name] = g
		if err := c.split(g); err != nil {
			c.log().Error("rollout", "group", name, "error", err)
		}
	}
}
