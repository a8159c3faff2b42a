package engine

import (
	"maps"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Split is the staged rollouts of one proxy group, one per policy: each policy being rolled out is run as
// the sources hold it (the candidate) by its canary nodes, and as its Baseline by the other nodes. A node
// that is a canary of some policies and not of others is served a view of its own: the sources' policies
// with the baselines of the policies it is not a canary of. The rollouts choose canaries as prefixes of one
// order of the group's nodes, so that the distinct views are few (one more than the distinct canary counts).
type Split struct {
	Policies map[objkey.Key]PolicySplit
}

// PolicySplit is one policy's side of a Split.
type PolicySplit struct {
	// Baseline is the version the nodes that are not canaries run; nil: none (the policy is new to them).
	Baseline *v1alpha1.LoadBalancerPolicy
	// Canaries are the node ids that run the candidate.
	Canaries map[string]bool
	// Candidate, when set, is what the canaries run instead of the sources' version: a newer version the
	// sources already hold is kept from every Envoy while this one is rolled out.
	Candidate *v1alpha1.LoadBalancerPolicy
}

// splits is the engine's rollout state: guarded by e.mu.
type splits struct {
	byGroup map[string]*Split
	// views are each split group's views but the candidate, by viewID: each with its own translator and
	// build, so that each stays incremental. published are the groups last published split.
	views     map[string]map[string]*view
	published map[string]bool
}

// view is the config of the nodes that are canaries of the same policies of a split group.
type view struct {
	translator *translate.Translator
	build      *xdsbuild.Assembly
	// result is the view's last translation.
	result *translate.Result
}

// baseView is the viewID of the nodes that are canaries of no policy: every policy at its baseline.
const baseView = ""

// SetSplit makes group's nodes run a split (nil: every node runs the candidate again) and publishes.
// The split is in force for every later publish until changed.
func (e *Engine) SetSplit(group string, s *Split) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSplit(group, s)
	e.publishSplits()
}

// SetSplitLater is SetSplit without the publish: the split is in force from the next publish, which the
// caller makes with the sources it goes with. A policy taken out of a rollout because a newer version of it
// is pushed at once would otherwise be served, until that push is published, as the sources hold it: the
// candidate that was rolled back.
func (e *Engine) SetSplitLater(group string, s *Split) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.setSplit(group, s)
}

// setSplit records group's split; caller holds e.mu.
func (e *Engine) setSplit(group string, s *Split) {
	if e.split.byGroup == nil {
		e.split.byGroup = map[string]*Split{}
		e.split.published = map[string]bool{}
		e.split.views = map[string]map[string]*view{}
	}
	if s == nil {
		delete(e.split.byGroup, group)
	} else {
		c := &Split{Policies: make(map[objkey.Key]PolicySplit, len(s.Policies))}
		for k, p := range s.Policies {
			c.Policies[k] = PolicySplit{Baseline: p.Baseline, Canaries: maps.Clone(p.Canaries), Candidate: p.Candidate}
		}
		e.split.byGroup[group] = c
	}
}

// Splits returns the groups that run a split now.
func (e *Engine) Splits() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.split.byGroup))
}

// BaselineResult is the last translation of group's baseline (every policy of its split at its
// baseline), nil when the group is not split.
func (e *Engine) BaselineResult(group string) *translate.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v := e.split.views[group][baseView]; v != nil {
		return v.result
	}
	return nil
}

// Serving tells what node, of a split or unsplit group, is served of policy k: the version of the config
// the xDS cache serves it (xdscache.Cache.TargetFor) and the generation of k that config was translated
// from (0: it carries no k). A staged rollout reads it to know which config carries its candidate, and so
// whether a canary that acknowledged a version runs the candidate.
func (e *Engine) Serving(group, node string, k objkey.Key) (version string, generation int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	version = e.cache.TargetFor(group, node).Version
	res := e.result
	if s := e.split.byGroup[group]; s != nil && e.split.published[group] {
		byNode, candidateID, _ := s.nodeViews(node)
		if id := byNode[node]; !runsCandidate(id, candidateID) {
			v := e.split.views[group][id]
			if v == nil {
				return version, 0
			}
			res = v.result
		}
	}
	if res == nil {
		return version, 0
	}
	if r := res.Policies.Of(k); r != nil && r.ProxyGroup == group {
		return version, r.Generation
	}
	return version, 0
}

// runsCandidate tells whether the nodes of view id (see nodeViews) are served the group's own build, the
// candidate of every policy, rather than a view.
func runsCandidate(id, candidateID string) bool { return id == candidateID && id != baseView }

// nodeViews names each node's view of s (only that node's, unless only is empty): the policies it is a
// canary of, sorted and joined, and canaryOf says them by the view's name. A node that is a canary of every
// policy runs the candidate, and is named with candidate; when a policy's canaries run a Candidate of their
// own, no view is the sources' and candidate names none.
func (s *Split) nodeViews(only string) (byNode map[string]string, candidate string, canaryOf map[string]map[objkey.Key]bool) {
	of := map[string][]objkey.Key{}
	all := make([]objkey.Key, 0, len(s.Policies))
	own := false
	for k, p := range s.Policies {
		own = own || p.Candidate != nil
		all = append(all, k)
		if only != "" {
			if p.Canaries[only] {
				of[only] = append(of[only], k)
			}
			continue
		}
		for n := range p.Canaries {
			of[n] = append(of[n], k)
		}
	}
	candidate = viewName(all)
	if own {
		candidate = "\x00" // no policy key has it
	}
	byNode = make(map[string]string, len(of))
	canaryOf = map[string]map[objkey.Key]bool{}
	for n, keys := range of {
		id := viewName(keys)
		byNode[n] = id
		if canaryOf[id] == nil {
			canaryOf[id] = make(map[objkey.Key]bool, len(keys))
			for _, k := range keys {
				canaryOf[id][k] = true
			}
		}
	}
	return byNode, candidate, canaryOf
}

// viewName names the view of the nodes that are canaries of keys: their string forms, sorted and joined.
func viewName(keys []objkey.Key) string {
	slices.SortFunc(keys, objkey.Compare)
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.String()
	}
	return strings.Join(names, "\n")
}

// overrides are the policies a view runs at their baseline instead of the sources' version (a nil value:
// not at all): those whose canaries the view's nodes are not among (canaryOf: the policies they are
// canaries of); and those whose canaries they are among that run a Candidate of their own.
func (s *Split) overrides(canaryOf map[objkey.Key]bool) map[objkey.Key]*v1alpha1.LoadBalancerPolicy {
	out := map[objkey.Key]*v1alpha1.LoadBalancerPolicy{}
	for k, p := range s.Policies {
		switch {
		case !canaryOf[k]:
			out[k] = p.Baseline
		case p.Candidate != nil:
			out[k] = p.Candidate
		}
	}
	return out
}

// publishSplits publishes every split group's candidate and views, and ends the splits that were removed.
// A view is translated from the sources' policies of its group with the baselines in place of the policies
// its nodes are not canaries of: the policies that did not change translate to the same resources on every
// side. Caller holds e.mu.
func (e *Engine) publishSplits() {
	sp := &e.split
	if len(sp.byGroup) == 0 && len(sp.published) == 0 {
		return
	}
	for name := range sp.published {
		if _, ok := sp.byGroup[name]; !ok {
			e.cache.Publish(name, e.candidateState(name))
			delete(sp.published, name)
			delete(sp.views, name)
			e.publishGRPC(name, false)
		}
	}
	if len(sp.byGroup) == 0 {
		return
	}
	all, _, _ := merge(e.sources)
	byGroup := map[string][]*v1alpha1.LoadBalancerPolicy{}
	for _, p := range all {
		if g := p.Spec.ProxyGroupOrDefault(); sp.byGroup[g] != nil {
			byGroup[g] = append(byGroup[g], p)
		}
	}
	refs := e.refs()
	for name, s := range sp.byGroup {
		byNode, candidateID, canaryOf := s.nodeViews("")
		ids := map[string]bool{baseView: true}
		for _, id := range byNode {
			if id != candidateID {
				ids[id] = true
			}
		}
		if sp.views[name] == nil {
			sp.views[name] = map[string]*view{}
		}
		views := sp.views[name]
		for id := range views {
			if !ids[id] {
				delete(views, id)
			}
		}
		states := map[string]*xdscache.State{}
		failed := false
		for id := range ids {
			st, err := e.buildView(name, views, id, s.overrides(canaryOf[id]), byGroup[name], refs)
			if err != nil {
				e.log.Error("building a view of a rollout failed; every node of the group gets the candidate", "group", name, "error", err)
				failed = true
				break
			}
			states[id] = st
		}
		if failed {
			e.cache.Publish(name, e.candidateState(name))
			sp.published[name] = false // served whole: no view is (Serving)
			continue
		}
		candidate := e.candidateState(name)
		nodes := make(map[string]*xdscache.State, len(byNode))
		for n, id := range byNode {
			if runsCandidate(id, candidateID) {
				nodes[n] = candidate
			} else {
				nodes[n] = states[id]
			}
		}
		e.cache.PublishSplit(name, candidate, states[baseView], nodes)
		sp.published[name] = true
	}
}

// buildView translates and builds one view of a split group (see publishSplits); caller holds e.mu.
func (e *Engine) buildView(group string, views map[string]*view, id string, overrides map[objkey.Key]*v1alpha1.LoadBalancerPolicy,
	policies []*v1alpha1.LoadBalancerPolicy, refs translate.Refs) (*xdscache.State, error) {
	v := views[id]
	if v == nil {
		v = &view{translator: translate.NewTranslator()}
		views[id] = v
	}
	in := make([]*v1alpha1.LoadBalancerPolicy, 0, len(policies))
	for _, p := range policies {
		if o, ok := overrides[objkey.Of(p)]; ok {
			if o != nil {
				in = append(in, o)
			}
			continue
		}
		in = append(in, p)
	}
	// A baseline may reference files the sources' policies no longer do: they are read for it, apart
	// from e.files (which follows the held policies; see RefreshFiles).
	for _, o := range overrides {
		if o == nil {
			continue
		}
		for _, path := range translate.PolicyFiles(o) {
			if _, ok := refs.Files[path]; !ok {
				refs.Files = maps.Clone(refs.Files)
				refs.Files[path] = e.read(path)
			}
		}
	}
	res := v.translator.Translate(in, refs)
	v.result = res
	g, ok := res.IR.Groups[group]
	if !ok {
		v.build = nil
		st, _ := xdscache.NewState(nil)
		return st, nil
	}
	next, err := xdsbuild.Assemble(v.build, g)
	if err != nil {
		return nil, err
	}
	v.build = next
	return next.State(), nil
}

// runBuild is what group's Envoys run as far as every one of them runs the same: the baselines' build when
// the group is split and no policy of it has a canary (every Envoy runs the baselines: a rollout rolled
// back, or held before its first stage), the sources' build otherwise (during a stage the canaries run the
// candidate and the others the baseline: the candidate is what the rollout is heading to). Caller holds e.mu.
func (e *Engine) runBuild(group string) *xdsbuild.Assembly {
	s := e.split.byGroup[group]
	v := e.split.views[group][baseView]
	if s == nil || v == nil || v.build == nil {
		return e.builds[group]
	}
	for _, p := range s.Policies {
		if len(p.Canaries) > 0 {
			return e.builds[group]
		}
	}
	return v.build
}

// candidateState is what the sources make of group now; caller holds e.mu.
func (e *Engine) candidateState(group string) *xdscache.State {
	if b := e.builds[group]; b != nil {
		return b.State()
	}
	st, _ := xdscache.NewState(nil)
	return st
}
