package translate

import (
	"cmp"
	"iter"

	"github.com/google/btree"
)

// PolicyResults holds the result of every policy by key. It is persistent: a copy-on-write B-tree, so that
// a translation hands out a new one that shares everything but the changed policies' paths with the last
// one, instead of a copy of every result per change. The zero value is empty. Once handed out in a Result
// it is never modified.
type PolicyResults struct {
	t *btree.BTreeG[*PolicyResult]
}

func byKey(a, b *PolicyResult) bool { return CompareKeys(a.Key, b.Key) < 0 }

// CompareKeys orders keys by namespace, then name: the order PolicyResults.All lists them in.
func CompareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// NewPolicyResults holds the given results (the last one of a key wins).
func NewPolicyResults(results ...*PolicyResult) PolicyResults {
	var p PolicyResults
	for _, r := range results {
		p.set(r)
	}
	return p
}

// Get returns the result of one policy; nil, false when there is none.
func (p PolicyResults) Get(k Key) (*PolicyResult, bool) {
	if p.t == nil {
		return nil, false
	}
	return p.t.Get(&PolicyResult{Key: k})
}

// Of returns the result of one policy, or nil.
func (p PolicyResults) Of(k Key) *PolicyResult {
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

// All lists the results ordered by key (see CompareKeys).
func (p PolicyResults) All() iter.Seq2[Key, *PolicyResult] {
	return func(yield func(Key, *PolicyResult) bool) {
		if p.t == nil {
			return
		}
		p.t.Ascend(func(r *PolicyResult) bool { return yield(r.Key, r) })
	}
}

// Map copies the results into a map, for callers that hand them on as one (the push API's wire types).
func (p PolicyResults) Map() map[Key]*PolicyResult {
	out := make(map[Key]*PolicyResult, p.Len())
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

func (p *PolicyResults) remove(k Key) {
	if p.t != nil {
		p.t.Delete(&PolicyResult{Key: k})
	}
}
