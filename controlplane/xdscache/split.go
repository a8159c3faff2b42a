package xdscache

import "maps"

// A staged rollout splits a group in two: the canary nodes are served the candidate (the group's target),
// the others the baseline, the config they ran before the change. Both are whole States built by the same
// pipeline: the policies that did not change are the same resources, with the same versions, on both sides,
// so a node that moves from one side to the other is sent only what the change touched. Every stream moves
// make-before-break, as on any publish (see steps.go).

// PublishSplit makes candidate the config of the group's nodes in canaries and baseline that of its other
// nodes (nil baseline: every node gets candidate, as Publish). Nodes that connect later are served by the
// same rule.
func (c *Cache) PublishSplit(groupName string, candidate, baseline *State, canaries map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(groupName)
	if baseline == nil {
		canaries = nil
	}
	if g.target.Version == candidate.Version && sameState(g.baseline, baseline) && maps.Equal(g.canaries, canaries) {
		return
	}
	c.targetsGen.Add(1)
	g.target = candidate
	g.remember(candidate)
	g.baseline, g.canaries = baseline, maps.Clone(canaries)
	if baseline != nil {
		g.remember(baseline)
	}
	g.plans = map[string][]*State{}
	for st := range g.streams {
		c.replan(g, st)
	}
}

// TargetsGeneration changes whenever a group is given a new target, baseline or canaries (what TargetFor
// returns), read without the cache's lock.
func (c *Cache) TargetsGeneration() uint64 { return c.targetsGen.Load() }

func sameState(a, b *State) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Version == b.Version
}

// targetFor is what a node of the group is to be served.
func (g *group) targetFor(node string) *State {
	if g.baseline != nil && !g.canaries[node] {
		return g.baseline
	}
	return g.target
}

// TargetFor returns what a node of a group is to be served: the group's target, or the baseline of a split
// when the node is not a canary.
func (c *Cache) TargetFor(groupName, node string) *State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[groupName]; ok {
		return g.targetFor(node)
	}
	return emptyState
}
