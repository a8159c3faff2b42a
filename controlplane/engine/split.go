package engine

import (
	"maps"
	"slices"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Split is a staged rollout in one proxy group: the canary nodes run what the sources hold now (the
// candidate), the other nodes the baseline, the same policies with Baseline's in place of theirs.
type Split struct {
	// Baseline holds, for each policy being rolled out, the version the other nodes keep; nil means the
	// policy is not in the baseline (it is new).
	Baseline map[translate.Key]*v1alpha1.LoadBalancerPolicy
	// Canaries are the node ids served the candidate.
	Canaries map[string]bool
}

// splits is the engine's rollout state: guarded by e.mu.
type splits struct {
	byGroup map[string]*Split
	// translator and builds are the baseline's, kept apart from the candidate's so that each stays
	// incremental; published the groups last published split.
	translator *translate.Translator
	builds     map[string]*xdsbuild.Assembly
	published  map[string]bool
	// result is the baseline's last translation.
	result *translate.Result
}

// SetSplit makes group's nodes run a split (nil: every node runs the candidate again) and publishes.
// The split is in force for every later publish until changed.
func (e *Engine) SetSplit(group string, s *Split) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.split.byGroup == nil {
		e.split.byGroup = map[string]*Split{}
		e.split.published = map[string]bool{}
	}
	if s == nil {
		delete(e.split.byGroup, group)
	} else {
		e.split.byGroup[group] = &Split{Baseline: maps.Clone(s.Baseline), Canaries: maps.Clone(s.Canaries)}
	}
	e.publishSplits()
}

// Splits returns the groups that run a split now.
func (e *Engine) Splits() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.split.byGroup))
}

// BaselineResult is the last translation of the splits' baseline, nil when no group is split.
func (e *Engine) BaselineResult() *translate.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.split.result
}

// publishSplits publishes every split group's candidate and baseline, and ends the splits that were
// removed. The baseline is translated from the sources' policies with the baseline versions in place: the
// policies that did not change translate to the same resources on both sides. Caller holds e.mu.
func (e *Engine) publishSplits() {
	sp := &e.split
	if len(sp.byGroup) == 0 && len(sp.published) == 0 {
		return
	}
	for name := range sp.published {
		if _, ok := sp.byGroup[name]; !ok {
			e.cache.Publish(name, e.candidateState(name))
			delete(sp.published, name)
		}
	}
	if len(sp.byGroup) == 0 {
		sp.translator, sp.builds, sp.result = nil, nil, nil
		return
	}
	if sp.translator == nil {
		sp.translator, sp.builds = translate.NewTranslator(), map[string]*xdsbuild.Assembly{}
	}
	all, _, _ := merge(e.sources)
	overrides := map[translate.Key]*v1alpha1.LoadBalancerPolicy{}
	for _, s := range sp.byGroup {
		maps.Copy(overrides, s.Baseline)
	}
	base := make([]*v1alpha1.LoadBalancerPolicy, 0, len(all))
	for _, p := range all {
		k := translate.KeyOf(p)
		if o, ok := overrides[k]; ok {
			if o != nil {
				base = append(base, o)
			}
			continue
		}
		base = append(base, p)
	}
	refs := e.refs()
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
	res := sp.translator.Translate(base, refs)
	sp.result = res
	for name, s := range sp.byGroup {
		var baseline *xdscache.State
		if g, ok := res.IR.Groups[name]; ok {
			next, err := xdsbuild.Assemble(sp.builds[name], g)
			if err != nil {
				e.log.Error("building the baseline of a rollout failed; every node of the group gets the candidate", "group", name, "error", err)
				e.cache.Publish(name, e.candidateState(name))
				continue
			}
			sp.builds[name] = next
			baseline = next.State()
		} else {
			baseline, _ = xdscache.NewState(nil)
			delete(sp.builds, name)
		}
		e.cache.PublishSplit(name, e.candidateState(name), baseline, s.Canaries)
		sp.published[name] = true
	}
}

// candidateState is what the sources make of group now; caller holds e.mu.
func (e *Engine) candidateState(group string) *xdscache.State {
	if b := e.builds[group]; b != nil {
		return b.State()
	}
	st, _ := xdscache.NewState(nil)
	return st
}
