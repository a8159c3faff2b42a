package xdscache

import "maps"

// Staged rollouts split a group: the nodes that are canaries of every policy being rolled out are served the
// candidate (the group's target), the nodes that are canaries of none the baseline (the config they ran
// before the changes), and a node that is a canary of some policies and not of others the view made for
// it. Every one is a whole State built by the same pipeline: the policies that did not change are the same
// resources, with the same versions, on every side, so a node that moves from one side to another is sent
// only what the changes touched. Every stream moves make-before-break, as on any publish (see steps.go).

// PublishSplit makes baseline the config of the group's nodes, but for the nodes in views, each of which is
// served its own State (the candidate, or a view with some policies at their baseline); nil baseline: every
// node gets candidate, as Publish. Nodes that connect later are served by the same rule.
func (c *Cache) PublishSplit(groupName string, candidate, baseline *State, views map[string]*State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(groupName)
	g.published = true
	if baseline == nil {
		views = nil
	}
	if g.target.Version == candidate.Version && sameState(g.baseline, baseline) && maps.EqualFunc(g.views, views, sameState) {
		return
	}
	c.targetsGen.Add(1)
	g.target = candidate
	g.remember(candidate)
	g.baseline, g.views = baseline, maps.Clone(views)
	if baseline != nil {
		g.remember(baseline)
	}
	seen := map[string]bool{candidate.Version: true}
	for _, v := range g.views {
		if !seen[v.Version] {
			seen[v.Version] = true
			g.remember(v)
		}
	}
	g.plans = map[string][]*State{}
	for st := range g.streams {
		c.replan(g, st)
	}
}

// TargetsGeneration changes whenever a group is given a new target, baseline or views (what TargetFor
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
	if g.baseline == nil {
		return g.target
	}
	if v := g.views[node]; v != nil {
		return v
	}
	return g.baseline
}

// TargetFor returns what a node of a group is to be served: the group's target, or in a split the node's
// view, or the baseline when the node is a canary of no policy.
func (c *Cache) TargetFor(groupName, node string) *State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[groupName]; ok {
		return g.targetFor(node)
	}
	return emptyState
}
