package xdscache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"sync"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/btree"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Resource is one marshalled resource with its own version (a hash of its content). It is immutable: every
// state that serves it, and every response that carries it, shares it.
type Resource struct{ e *entry }

// Name is the resource's name.
func (r *Resource) Name() string { return r.e.name }

// Version is the resource's own version.
func (r *Resource) Version() string { return r.e.version }

// Size is the resource's serialized size.
func (r *Resource) Size() int { return r.e.size() }

// NewResource marshals m and versions it by its content.
func NewResource(typ string, m proto.Message) (*Resource, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", typ, cachev3.GetResourceName(m), err)
	}
	sum := sha256.Sum256(b)
	return NewMarshalledResource(typ, cachev3.GetResourceName(m), m, b, hex.EncodeToString(sum[:8])), nil
}

// NewMarshalledResource wraps a resource the caller marshalled itself (say, by joining the bytes of parts
// it keeps marshalled). version must change whenever b does.
func NewMarshalledResource(typ, name string, m proto.Message, b []byte, version string) *Resource {
	e := &entry{name: name, version: version, sds: sdsNames(typ, m), typ: typ, value: b}
	e.sum = entrySum(typ, name, version)
	return &Resource{e: e}
}

// WithVersionOf returns an endpoint assignment whose version also covers its cluster's: an updated cluster
// warms until it gets its endpoints again, so a cluster change must re-send them (see NewState).
func (r *Resource) WithVersionOf(cluster *Resource) *Resource {
	e := *r.e
	e.version = coveringVersion(r.e.version, cluster.e.version)
	e.sum = entrySum(resource.EndpointType, e.name, e.version)
	return &Resource{e: &e}
}

// entrySum is an entry's share of its type's digest. Digests add the shares of their entries, so one
// changed resource updates a state's version without visiting the others.
func entrySum(typ, name, version string) uint64 {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\n", typ, name, version)
	return binary.LittleEndian.Uint64(h.Sum(nil))
}

// typeSet is the resources of one type in a state, in a copy-on-write B-tree ordered by name: a derived
// state clones its parent's tree in O(1) and copies only the nodes on the paths it changes, so a change
// costs O(log n) however many resources the type holds, and no state holds its own full copy. States share
// a typeSet while the type does not change; a typeSet is never modified once a state holds it.
type typeSet struct {
	tree *btree.BTreeG[*entry]
	sum  uint64
	link *link // see lineage.go
}

// setDegree is the B-tree's: nodes of up to 31 entries keep the copied paths short and cache-friendly.
const setDegree = 16

func byName(a, b *entry) bool { return a.name < b.name }

func newTypeSet(typ string, entries []*entry) *typeSet {
	ts := &typeSet{tree: btree.NewG(setDegree, byName), link: rootLink()}
	for _, e := range entries {
		if e.sum == 0 {
			e.sum = entrySum(typ, e.name, e.version)
		}
		ts.tree.ReplaceOrInsert(e)
		ts.sum += e.sum
	}
	return ts
}

func (ts *typeSet) len() int {
	if ts == nil {
		return 0
	}
	return ts.tree.Len()
}

func (ts *typeSet) get(name string) (*entry, bool) {
	if ts == nil {
		return nil, false
	}
	return ts.tree.Get(&entry{name: name})
}

// each calls f on every entry in name order until it returns false.
func (ts *typeSet) each(f func(*entry) bool) {
	if ts != nil {
		ts.tree.Ascend(f)
	}
}

// Change says what a new state changes from the one it derives from: resources put (added or replaced, by
// name) and names removed, by type URL.
type Change struct {
	Put    map[string][]*Resource
	Remove map[string][]string
}

// Derive returns a state equal to s with c applied. Only the changed types' trees are cloned (lazily, see
// typeSet), so its cost follows the size of the change, not that of every resource.
func (s *State) Derive(c Change) (*State, error) {
	next := &State{sets: maps.Clone(s.sets), Bytes: s.Bytes, parent: s.Version, removed: map[string]bool{}, added: map[string]bool{},
		dropped: map[string][]*entry{}}
	if next.sets == nil {
		next.sets = map[string]*typeSet{}
	}
	for _, typ := range Types {
		put, rm := c.Put[typ], c.Remove[typ]
		if len(put) == 0 && len(rm) == 0 {
			continue
		}
		old := s.set(typ)
		names := make([]string, 0, len(rm)+len(put))
		names = append(names, rm...)
		for _, r := range put {
			names = append(names, r.e.name)
		}
		ts := &typeSet{tree: old.tree.Clone(), sum: old.sum, link: childLink(old.link, names)}
		for _, n := range rm {
			if e, ok := ts.tree.Delete(&entry{name: n}); ok {
				next.removed[typ] = true
				next.dropped[typ] = append(next.dropped[typ], e)
				ts.sum -= e.sum
				next.Bytes -= e.size()
			}
		}
		seen := map[string]bool{}
		for _, r := range put {
			e := r.e
			if seen[e.name] {
				return nil, fmt.Errorf("%s %q appears twice", typ, e.name)
			}
			seen[e.name] = true
			if was, ok := ts.tree.ReplaceOrInsert(e); ok {
				ts.sum -= was.sum
				next.Bytes -= was.size()
			} else {
				next.added[typ] = true
			}
			ts.sum += e.sum
			next.Bytes += e.size()
		}
		next.sets[typ] = ts
	}
	next.Version = next.hash()
	return next, nil
}

// set returns the typeSet of a type, empty when the state has none.
func (s *State) set(typ string) *typeSet {
	if ts := s.sets[typ]; ts != nil {
		return ts
	}
	return newTypeSet(typ, nil)
}

// Lookup returns one resource of a state, if it has it.
func (s *State) Lookup(typ, name string) (*Resource, bool) {
	e, ok := s.sets[typ].get(name)
	if !ok {
		return nil, false
	}
	return &Resource{e: e}, true
}

// derivedWithoutRemovals tells whether next holds every resource of old for typ (next was derived from old
// by puts only), so that their union is next's.
func derivedWithoutRemovals(next, old *State, typ string) bool {
	return next.parent != "" && next.parent == old.Version && !next.removed[typ] && next.sets[typ] != nil
}

// Any is the resource as sent.
func (r *Resource) Any() *anypb.Any { return r.e.resource() }

// addsTo tells whether a derived state added a name of one of the types to its parent.
func (s *State) addsTo(types []string) bool {
	for _, typ := range types {
		if s.added[typ] {
			return true
		}
	}
	return false
}

// lazyParts makes a resource's bytes when a stream first needs them.
type lazyParts struct {
	typ   string
	n     int
	make  func() []byte
	once  sync.Once
	value *anypb.Any
}

// NewLazyResource is a resource whose bytes are made by build on first use, once, and shared
// from then on. A route table shared by thousands of policies changes with each of them; joining its bytes
// is left to the first response that carries it, so that changes no proxy has asked for yet cost nothing,
// and a burst of changes costs one join. version and size must be those of what build returns.
func NewLazyResource(typ, name, version string, size int, build func() []byte) *Resource {
	e := &entry{name: name, version: version, lazy: &lazyParts{typ: typ, n: size, make: build}}
	e.sum = entrySum(typ, name, version)
	return &Resource{e: e}
}

func (l *lazyParts) get() {
	l.once.Do(func() {
		b := l.make()
		l.value, l.make = &anypb.Any{TypeUrl: l.typ, Value: b}, nil
	})
}

// resource is the entry as sent: a new Any for a marshalled entry (responses only read it, and an Any per
// response is cheaper than one kept per resource), the shared one for a lazy entry.
func (e *entry) resource() *anypb.Any {
	if e.lazy != nil {
		e.lazy.get()
		return e.lazy.value
	}
	return &anypb.Any{TypeUrl: e.typ, Value: e.value}
}

// message decodes the entry's message from its bytes: only tests and rare readers need it, and keeping
// every message beside its bytes cost as much memory again as the bytes and the IR together.
func (e *entry) message() proto.Message {
	m, err := e.resource().UnmarshalNew()
	if err != nil {
		panic(fmt.Sprintf("xdscache: %s %q does not decode: %v", e.resource().GetTypeUrl(), e.name, err))
	}
	return m
}

func (e *entry) size() int {
	if e.lazy != nil {
		return e.lazy.n
	}
	return len(e.value)
}

// derivedFrom tells whether next was derived from old by Derive.
func derivedFrom(next, old *State) bool {
	return next.parent != "" && next.parent == old.Version && next.dropped != nil
}

// coveringVersion is the version of an endpoint assignment that also covers its cluster's version.
func coveringVersion(endpoints, cluster string) string {
	h := sha256.New()
	h.Write([]byte(endpoints))
	h.Write([]byte{'/'})
	h.Write([]byte(cluster))
	return hex.EncodeToString(h.Sum(nil)[:8])
}
