package xdscache

import (
	"slices"
	"strconv"
	"sync/atomic"
)

// A delta stream's answer is the difference between what the stream holds and what its group serves now.
// Comparing the two in full costs O(resources) per stream, per type, per publish step and per ACK: at
// 10,000 policies that, not translation, bounded a change's CPU. So every typeSet records which tree it was
// made from and the names that may differ from it (a link), every delta stream's version map records which
// typeSet it was last made equal to (a mark), and an answer looks only at the names changed between the two.

// link ties a typeSet to the one it was made from.
type link struct {
	id uint64
	// base is the typeSet this one was made from; nil when unknown (a fresh state, a merge of unrelated
	// states, or a lineage cut short). Links hold names only, never trees, so a long lineage keeps no old
	// resources alive.
	base *link
	// changed are the names whose entries may differ from base's: added, replaced or removed.
	changed []string
	depth   int
}

var linkIDs atomic.Uint64

// Lineages are cut after maxDepth links, and a change of more than maxChanged names starts a new one: an
// answer walking further, or looking at that many names, may as well compare everything.
const (
	maxDepth   = 64
	maxChanged = 4096
)

func rootLink() *link { return &link{id: linkIDs.Add(1)} }

func childLink(base *link, changed []string) *link {
	l := &link{id: linkIDs.Add(1)}
	if base == nil || len(changed) > maxChanged {
		return l
	}
	if base.depth >= maxDepth {
		base = recent(base, keptOnCut)
	}
	l.base, l.changed, l.depth = base, changed, base.depth+1
	return l
}

// keptOnCut is how many links a lineage keeps when it is cut at maxDepth.
const keptOnCut = 8

// recent copies the last n links of base's lineage (same ids, same names; changedBetween meets links by
// id), ending the copy there. A lineage cut at maxDepth used to start over with no base, so every stream
// got a full comparison of every resource of the type: at 10,000 policies, one timed change in about 20
// (the same one in every run) took 30 ms to 800 ms instead of 5 (bench/results/2026-11-23-vm-incremental
// 6.4). Streams answered lately still meet the new link; older links are let go.
func recent(base *link, n int) *link {
	var chain []*link
	for l := base; l != nil && len(chain) < n; l = l.base {
		chain = append(chain, l)
	}
	var below *link
	for i := len(chain) - 1; i >= 0; i-- {
		c := &link{id: chain[i].id, changed: chain[i].changed, base: below}
		if below != nil {
			c.depth = below.depth + 1
		}
		below = c
	}
	return below
}

// changedBetween returns the names whose entries may differ between the typeSets of two links, and false
// when their lineages do not meet within maxDepth links.
func changedBetween(from, to *link) ([]string, bool) {
	if from == to {
		return nil, true
	}
	// Usually the stream holds an ancestor of what is served.
	var names []string
	for l := to; l != nil; l = l.base {
		if l == from {
			slices.Sort(names)
			return slices.Compact(names), true
		}
		names = append(names, l.changed...)
	}
	names = names[:0]
	// The ancestors of to, each with the names changed on the way from it to to.
	at := map[uint64]int{}
	var path []*link
	for l := to; l != nil; l = l.base {
		at[l.id] = len(path)
		path = append(path, l)
	}
	for l := from; l != nil; l = l.base {
		if i, ok := at[l.id]; ok {
			for _, p := range path[:i] {
				names = append(names, p.changed...)
			}
			slices.Sort(names)
			return slices.Compact(names), true
		}
		names = append(names, l.changed...)
	}
	return nil, false
}

// markKey is the key under which a delta stream's version map records the typeSet it was last made equal
// to. No resource can have it: resource names never hold a NUL. go-control-plane keeps the map for the
// cache and only deletes from it the names a client unsubscribes.
const markKey = "\x00lbplane:synced"

func markOf(known map[string]string) (uint64, bool) {
	v, ok := known[markKey]
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(v, 10, 64)
	return id, err == nil
}

// lineages remembers the links of the typeSets a group served lately, so that a stream's mark can be
// followed back to its link. Links of typeSets served earlier than that are forgotten: their streams get
// one full comparison.
type lineages struct {
	byID  map[uint64]*link
	order []uint64
}

const keptLinks = 64

func (ls *lineages) add(l *link) {
	if ls.byID == nil {
		ls.byID = map[uint64]*link{}
	}
	if _, ok := ls.byID[l.id]; ok {
		return
	}
	ls.byID[l.id] = l
	ls.order = append(ls.order, l.id)
	if len(ls.order) > keptLinks {
		delete(ls.byID, ls.order[0])
		ls.order = ls.order[1:]
	}
}

func (ls *lineages) get(id uint64) *link {
	if ls == nil {
		return nil
	}
	return ls.byID[id]
}
