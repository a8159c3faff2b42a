package translate

import (
	"iter"

	"github.com/google/btree"

	"github.com/lbplane/lbplane/controlplane/objkey"
)

// PolicyResults holds the result of every policy by key. It is persistent: a copy-on-write B-tree, so that
// a translation hands out a new one that shares everything but the changed policies' paths with the last
// one, instead of a copy of every result per change. The zero value is empty. Once handed out in a Result
// it is never modified.
type PolicyResults struct {
	t *btree.BTreeG[*PolicyResult]
}

func byKey(a, b *PolicyResult) bool { return objkey.Compare(a.Key, b.Key) < 0 }

// NewPolicyResults holds the given results (the last one of a key wins).
func NewPolicyResults(results ...*PolicyResult) PolicyResults {
	var p PolicyResults
	for _, r := range results {
		p.set(r)
	}
	return p
}

// Get returns the result of one policy; nil, false when there is none.
func (p PolicyResults) Get(k objkey.Key) (*PolicyResult, bool) {
	if p.t == nil {
		return nil, false
	}
	return p.t.Get(&PolicyResult{Key: k})
}

// Of returns the result of one policy, or nil.
func (p PolicyResults) Of(k objkey.Key) *PolicyResult {
	r, _ := p.Get(k)
	return r
}

// Len is the number of results.
func (p PolicyResults) Len() int {
	if p.t == nil {
		return 0
	}
	return p.t.Len()
}

// All lists the results ordered by key (see objkey.Compare).
func (p PolicyResults) All() iter.Seq2[objkey.Key, *PolicyResult] {
	return func(yield func(objkey.Key, *PolicyResult) bool) {
		if p.t == nil {
			return
		}
		p.t.Ascend(func(r *PolicyResult) bool { return yield(r.Key, r) })
	}
}

// Map copies the results into a map, for callers that hand them on as one (the push API's wire types).
func (p PolicyResults) Map() map[objkey.Key]*PolicyResult {
	out := make(map[objkey.Key]*PolicyResult, p.Len())
	for k, r := range p.All() {
		out[k] = r
	}
	return out
}

// clone returns a copy to modify; p is left as it is (see btree's Clone: both may be read concurrently).
func (p PolicyResults) clone() PolicyResults {
	if p.t == nil {
		return PolicyResults{}
	}
	return PolicyResults{t: p.t.Clone()}
}

// set and remove modify p in place: only on a PolicyResults not handed out yet.
func (p *PolicyResults) set(r *PolicyResult) {
	if p.t == nil {
		p.t = btree.NewG(16, byKey)
	}
	p.t.ReplaceOrInsert(r)
}

func (p *PolicyResults) remove(k objkey.Key) {
	if p.t != nil {
		p.t.Delete(&PolicyResult{Key: k})
	}
}
