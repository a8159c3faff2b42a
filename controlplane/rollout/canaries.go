package rollout

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Canaries are chosen so that no Envoy can make itself one, or guess that it will be:
//   - only Envoys connected, and acknowledging their config, for at least MinCanaryAge are chosen, and
//     only those with a stats port: one that has just connected (or connected to be chosen) is not;
//   - the group's chosen Envoys are put in a random order (crypto/rand) when a rollout starts and no other
//     rollout of the group is under way, and an Envoy that becomes eligible later goes to a random place
//     after the canaries in use;
//   - each policy's canaries are the first Envoys of that order, as many as its stage takes (at least two
//     once the group has three Envoys: see v1alpha1.StageCount), so the canaries of one stage stay canaries
//     in the next, and the canaries of the rollouts under way are prefixes of each other: an Envoy runs
//     one of a few views (engine.Split).
// A canary that disconnects stays one for CanaryGrace; after that it leaves the order and the next Envoy
// of the order takes its place (the stage's bake starts again).

// CanaryGrace is how long a canary that disconnected stays one: an Envoy that reconnects (or every Envoy,
// after lbplane restarted) finds itself on the side it was on.
const CanaryGrace = 30 * time.Second

// nodesOf are the node ids of group's connected Envoys, sorted.
func nodesOf(proxies []xdsserver.ProxyStatus, group string) []string {
	var out []string
	for _, p := range proxies {
		if p.Group == group {
			out = append(out, p.NodeID)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// minCanaryAge is MinCanaryAge, defaulted.
func (c *Controller) minCanaryAge() time.Duration {
	switch {
	case c.MinCanaryAge < 0:
		return 0
	case c.MinCanaryAge == 0:
		return DefaultMinCanaryAge
	}
	return c.MinCanaryAge
}

// eligible are the node ids of group's Envoys that may be chosen as canaries: connected for at least
// MinCanaryAge, with a stats port, having acknowledged config and not rejecting any, and answering.
func (c *Controller) eligible(proxies []xdsserver.ProxyStatus, group string, now time.Time) []string {
	age := c.minCanaryAge()
	var out []string
	for _, p := range proxies {
		if p.Group == group && now.Sub(p.ConnectedAt) >= age && p.StatsPort > 0 && p.Version != "" && p.State != xdsserver.Nacked && !p.Unresponsive {
			out = append(out, p.NodeID)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// present adds to the connected nodes the canaries of g's rollouts gone for less than CanaryGrace.
func (g *group) present(nodes []string, now time.Time) []string {
	if g.missing == nil {
		g.missing = map[string]time.Time{}
	}
	out := slices.Clone(nodes)
	seen := map[string]bool{}
	for _, p := range g.Policies {
		if !p.underWay() {
			continue
		}
		for _, n := range p.Canaries {
			if seen[n] {
				continue
			}
			seen[n] = true
			if slices.Contains(nodes, n) {
				delete(g.missing, n)
				continue
			}
			since, ok := g.missing[n]
			if !ok {
				since = now
				g.missing[n] = now
			}
			if now.Sub(since) < CanaryGrace {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// inUse tells whether a staged rollout of g but those of skip is under way before its last stage (which
// takes every Envoy), and how many Envoys at the head of g's order are canaries of those.
func (g *group) inUse(skip []*policy) (underWay bool, n int) {
	for _, p := range g.Policies {
		if p.Kind == KindTraffic || !p.underWay() || p.Stage >= len(p.Settings.Stages)-1 || slices.Contains(skip, p) {
			continue
		}
		underWay, n = true, max(n, len(p.Canaries))
	}
	return underWay, n
}

// keepOrder keeps g's order to the present nodes and the eligible ones: it is drawn again when rollouts
// start (starting) and no other staged rollout of the group is under way; otherwise, while one is, the
// nodes gone leave it and the eligible nodes not in it go to random places after the canaries in use. It
// tells whether the order changed.
func (c *Controller) keepOrder(g *group, present, eligible []string, starting []*policy) bool {
	underWay, inUse := g.inUse(starting)
	if !underWay && len(starting) == 0 {
		return false // nothing under way uses the order: it is drawn again when a rollout starts
	}
	var next []string
	if !underWay {
		next = slices.Clone(eligible)
		shuffle(next)
	} else {
		for _, n := range g.Order {
			if slices.Contains(present, n) {
				next = append(next, n)
			}
		}
		for _, n := range eligible {
			if !slices.Contains(next, n) {
				at := min(inUse, len(next))
				at += randIntn(len(next) - at + 1)
				next = slices.Insert(next, at, n)
			}
		}
	}
	if slices.Equal(next, g.Order) {
		return false
	}
	g.Order = next
	return true
}

// place makes p's canaries its stage's: the first of g's order among nodes (the present ones), as many as
// the stage takes plus p's extra ones; every node at the last stage. It tells whether they changed.
func (c *Controller) place(g *group, p *policy, nodes []string) bool {
	var next []string
	if p.Stage >= len(p.Settings.Stages)-1 {
		next = slices.Clone(nodes)
	} else {
		want := min(v1alpha1.StageCount(p.Settings.Stages, p.Stage, len(nodes))+p.Extra, len(nodes))
		if want < len(p.Canaries) && prefixOf(g.Order, nodes, p.Canaries) {
			// Fewer Envoys are present than the stage was counted on, and the canaries are still the head
			// of the order: they stay canaries. The fleet looks smaller while Envoys reconnect (after
			// lbplane restarts, every Envoy does); a canary dropped then would flip back to the baseline
			// and forward again a moment later.
			return false
		}
		for _, n := range g.Order {
			if len(next) >= want {
				break
			}
			if slices.Contains(nodes, n) {
				next = append(next, n)
			}
		}
	}
	slices.Sort(next)
	if slices.Equal(next, p.Canaries) {
		return false
	}
	p.Canaries = next
	return true
}

// prefixOf tells whether canaries, every one present, are the first Envoys of order among nodes.
func prefixOf(order, nodes, canaries []string) bool {
	i := 0
	for _, n := range order {
		if i == len(canaries) {
			break
		}
		if !slices.Contains(nodes, n) {
			continue
		}
		if !slices.Contains(canaries, n) {
			return false
		}
		i++
	}
	return i == len(canaries)
}

// stageLine says where p's stage stands, for its message.
func (c *Controller) stageLine(p *policy, nodes int) string {
	n := len(p.Settings.Stages)
	want := v1alpha1.StageCount(p.Settings.Stages, p.Stage, nodes) + p.Extra
	switch {
	case nodes == 0:
		return fmt.Sprintf("stage %d of %d: waiting for an Envoy to connect", p.Stage+1, n)
	case len(p.Canaries) == 0:
		return fmt.Sprintf("stage %d of %d: waiting for Envoys connected and acknowledging their config for %s to be canaries", p.Stage+1, n, c.minCanaryAge())
	case len(p.Canaries) < min(want, nodes):
		return fmt.Sprintf("stage %d of %d: %d of %d Envoys run the candidate (%d wanted: the others connected less than %s ago)", p.Stage+1, n,
			len(p.Canaries), nodes, min(want, nodes), c.minCanaryAge())
	}
	return fmt.Sprintf("stage %d of %d: %d of %d Envoys run the candidate", p.Stage+1, n, len(p.Canaries), nodes)
}

// shuffle puts xs in a random order (Fisher-Yates, crypto/rand): an Envoy cannot predict its place.
func shuffle(xs []string) {
	for i := len(xs) - 1; i > 0; i-- {
		j := randIntn(i + 1)
		xs[i], xs[j] = xs[j], xs[i]
	}
}

// randIntn is a uniform random int in [0, n) from crypto/rand.
func randIntn(n int) int {
	if n <= 1 {
		return 0
	}
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return int(v.Int64())
}
