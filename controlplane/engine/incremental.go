package engine

import (
	"maps"
	"slices"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// merged is the last merge of the sources, kept so that an edit in place (another policy under the same
// name at the same place of its source) patches it instead of merging every policy again.
type merged struct {
	sources  map[string][]*v1alpha1.LoadBalancerPolicy
	pos      map[string][]int // where each source's policies are in all; -1 when shadowed
	all      []*v1alpha1.LoadBalancerPolicy
	origin   map[objkey.Key]string
	shadowed map[objkey.Key]string
	// direct names the source whose list is all, when all is exactly one source's list.
	direct string
}

// mergeSources is merge, patched from the last one when only edits in place happened. The maps it
// returns are shared with earlier results and must not be modified.
func (e *Engine) mergeSources(sources map[string][]*v1alpha1.LoadBalancerPolicy) ([]*v1alpha1.LoadBalancerPolicy, map[objkey.Key]string, map[objkey.Key]string) {
	if m := e.merged; m != nil && len(m.sources) == len(sources) {
		var all []*v1alpha1.LoadBalancerPolicy
		ok := true
		for src, list := range sources {
			prev, had := m.sources[src]
			if !had || len(prev) != len(list) {
				ok = false
				break
			}
			for i, p := range list {
				if prev[i] == p {
					continue
				}
				if objkey.Of(prev[i]) != objkey.Of(p) {
					ok = false
					break
				}
				if at := m.pos[src][i]; at >= 0 && m.direct == "" {
					if all == nil {
						all = slices.Clone(m.all)
					}
					all[at] = p
				}
			}
			if !ok {
				break
			}
		}
		if ok {
			switch {
			case m.direct != "":
				all = sources[m.direct]
			case all == nil:
				all = m.all
			}
			e.merged = &merged{sources: maps.Clone(sources), pos: m.pos, all: all, origin: m.origin, shadowed: m.shadowed, direct: m.direct}
			return all, m.origin, m.shadowed
		}
	}
	all, origin, shadowed := merge(sources)
	pos := map[string][]int{}
	at := 0
	for _, src := range sourceOrder {
		for _, p := range sources[src] {
			if at < len(all) && all[at] == p {
				pos[src] = append(pos[src], at)
				at++
			} else {
				pos[src] = append(pos[src], -1)
			}
		}
	}
	e.merged = &merged{sources: maps.Clone(sources), pos: pos, all: all, origin: origin, shadowed: shadowed}
	// The usual case, one source and no name twice: the merge is that source's list itself, and an edit in
	// place takes the new list as it is instead of patching a copy.
	for src, list := range sources {
		if len(list) == len(all) && len(list) > 0 && len(shadowed) == 0 && slices.Equal(list, all) {
			e.merged.direct = src
			e.merged.all, all = list, list
		}
	}
	return all, origin, shadowed
}

// Translations counts the policies translated so far (not served from the translator's cache), for tests
// and metrics.
func (e *Engine) Translations() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.translator.Runs()
}
