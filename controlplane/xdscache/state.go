// Package xdscache holds what each proxy group is served and answers go-control-plane's xDS server with it,
// for state-of-the-world and delta streams alike.
//
// It exists instead of go-control-plane's snapshot cache for three reasons:
//   - A NACK must not be answered by re-sending the rejected version. Responses are decided by comparing the
//     per-resource versions the stream was last sent with the current ones, so a NACK (which changes neither)
//     parks the watch until the config changes.
//   - EDS requests for names the group does not have are answered with an empty assignment, so a cluster that
//     is about to be removed (or a stale Envoy after a restart) never waits for its endpoints.
//   - Removals go last: a publish first serves the union of old and new clusters, and removes the old ones
//     only after the listeners and routes that stopped using them had time to arrive.
package xdscache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/btree"
	"google.golang.org/protobuf/proto"
)

// Types are the resource types served, in the order they are sent after a change: certificates before the
// clusters and listeners that use them; scopes (a port with many hosts) after the listener that reads them and
// before the route tables they name.
var Types = []string{resource.SecretType, resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.ScopedRouteType, resource.RouteType}

// entry is one resource, marshalled once and shared by every response that carries it.
type entry struct {
	name    string
	version string
	// typ and value are the resource as sent. The Any that wraps them is made per response (see resource):
	// a kept Any cost ~80 B and an allocation for each of the hundreds of thousands of resources held.
	typ   string
	value []byte
	// sds are the Secrets a listener or cluster uses (see referencedSecrets). The message itself is not
	// kept: its bytes are what streams are sent, and holding both doubled the memory a policy costs.
	sds []string
	sum uint64 // see entrySum
	// lazy, when set, makes any on first use (see NewLazyResource); size is then known before.
	lazy *lazyParts
}

// State is the immutable set of resources one group serves.
type State struct {
	// Version is derived from the content of every resource: the same config always has the same version.
	Version string
	// Bytes is the serialized size of every resource.
	Bytes int
	// sets holds each type's resources and digest, shared by the states derived from this one while the
	// type does not change (see Derive).
	sets map[string]*typeSet
	// parent is the version of the state this one was derived from (a version, not a pointer, so that
	// states do not keep their ancestors alive), and removed the types that lost a resource on the way:
	// the make-before-break union of the two is then this state's own resources where none was removed.
	parent  string
	removed map[string]bool
	added   map[string]bool
	// dropped are the parent's resources this state removed, by type: the union with the parent is this
	// state's tree with them put back (see combine).
	dropped map[string][]*entry
	// refs are the Secrets the state's listeners and clusters reference (see referencedSecrets), found
	// when a stream is first answered from the state.
	refsOnce sync.Once
	refs     map[string]bool
}

// secretRefs returns the Secrets the state's streams may be given.
func (s *State) secretRefs() map[string]bool {
	s.refsOnce.Do(func() { s.refs = referencedSecrets(s) })
	return s.refs
}

// NewState marshals and versions resources given by type URL.
func NewState(resources map[string][]proto.Message) (*State, error) {
	s := &State{}
	byType := map[string]map[string]*entry{}
	opts := proto.MarshalOptions{Deterministic: true}
	for _, typ := range Types {
		byType[typ] = map[string]*entry{}
		list := resources[typ]
		for _, m := range list {
			name := cachev3.GetResourceName(m)
			if _, dup := byType[typ][name]; dup {
				return nil, fmt.Errorf("%s %q appears twice", typ, name)
			}
			b, err := opts.Marshal(m)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", typ, name, err)
			}
			s.Bytes += len(b)
			sum := sha256.Sum256(b)
			e := &entry{name: name, version: hex.EncodeToString(sum[:8]), sds: sdsNames(typ, m), typ: typ, value: b}
			byType[typ][name] = e
		}
	}
	// An updated cluster warms until it gets its endpoints, and Envoy does not reuse the ones it has: unless
	// the assignment is sent again, the new cluster waits out its initial_fetch_timeout (15s) before serving.
	// So an assignment's version covers its cluster's version too, and a cluster update re-sends it.
	for name, e := range byType[resource.EndpointType] {
		if c, ok := byType[resource.ClusterType][name]; ok {
			e.version = coveringVersion(e.version, c.version)
		}
	}
	s.sets = map[string]*typeSet{}
	for _, typ := range Types {
		s.sets[typ] = newTypeSet(typ, slices.Collect(maps.Values(byType[typ])))
	}
	s.Version = s.hash()
	return s, nil
}

// Names lists the resource names of a type, sorted.
func (s *State) Names(typ string) []string {
	ts := s.sets[typ]
	names := make([]string, 0, ts.len())
	ts.each(func(e *entry) bool { names = append(names, e.name); return true })
	return names
}

// Changed returns the names of a type whose resources differ between two states: added, removed or with
// another version. It costs what changed when next derives from prev (the lineage the delta streams use),
// and a comparison of every name otherwise.
func Changed(prev, next *State, typ string) []string {
	a, b := prev.set(typ), next.set(typ)
	names, ok := changedBetween(a.link, b.link)
	if !ok {
		names = names[:0]
		a.each(func(e *entry) bool { names = append(names, e.name); return true })
		b.each(func(e *entry) bool {
			if _, in := a.get(e.name); !in {
				names = append(names, e.name)
			}
			return true
		})
	}
	var out []string
	for _, n := range names {
		ea, inA := a.get(n)
		eb, inB := b.get(n)
		if inA != inB || (inA && ea.version != eb.version) {
			out = append(out, n)
		}
	}
	return out
}

// Resource returns one resource of a type by name, decoded from the bytes that are sent, and its version.
// The message is the caller's.
func (s *State) Resource(typ, name string) (proto.Message, string, bool) {
	e, ok := s.sets[typ].get(name)
	if !ok {
		return nil, "", false
	}
	return e.message(), e.version, true
}

// ResourceVersion returns the version of one resource of a type, without decoding it.
func (s *State) ResourceVersion(typ, name string) (string, bool) {
	e, ok := s.sets[typ].get(name)
	if !ok {
		return "", false
	}
	return e.version, true
}

// Resources returns the resources of a type, sorted by name. The messages must not be modified.
func (s *State) Resources(typ string) []proto.Message {
	ts := s.sets[typ]
	out := make([]proto.Message, 0, ts.len())
	ts.each(func(e *entry) bool { out = append(out, e.message()); return true })
	return out
}

// plan returns the states that take a group from old to next without a request failing on the way:
//  1. new and changed clusters and endpoints, next to every old one, with the old listeners and routes, so
//     that no route points at a cluster Envoy is still warming;
//  2. the new listeners and routes, with the old clusters still there, so that nothing routed to a removed
//     cluster loses it before the route that stops using it has arrived;
//  3. next itself.
//
// Steps that change nothing are left out.
func plan(old, next *State) []*State {
	front := []string{resource.ListenerType, resource.ScopedRouteType, resource.RouteType}
	back := []string{resource.SecretType, resource.ClusterType, resource.EndpointType}
	staged := combine(map[string][]*State{
		resource.SecretType: {next, old}, resource.ClusterType: {next, old}, resource.EndpointType: {next, old},
		resource.ListenerType: {old}, resource.ScopedRouteType: {old}, resource.RouteType: {old},
	})
	bridged := combine(map[string][]*State{
		resource.SecretType: {next, old}, resource.ClusterType: {next, old}, resource.EndpointType: {next, old},
		resource.ListenerType: {next}, resource.ScopedRouteType: {next}, resource.RouteType: {next},
	})
	var steps []*State
	add := func(s *State) {
		last := old
		if len(steps) > 0 {
			last = steps[len(steps)-1]
		}
		if s.Version != last.Version {
			steps = append(steps, s)
		}
	}
	// Staging only matters when a route may point at a cluster that is new to Envoy.
	if addsAny(old, next, back) && !sameTypes(old, next, front) {
		add(staged)
	}
	add(bridged)
	add(next)
	if len(steps) == 0 {
		steps = append(steps, next)
	}
	return steps
}

// combine builds a state whose resources of each type come from the given states, the first one having a
// name winning.
func combine(from map[string][]*State) *State {
	u := &State{sets: map[string]*typeSet{}}
	for _, typ := range Types {
		states := from[typ]
		if ts := shared(typ, states); ts != nil {
			// One state, or states that hold the same resources of this type: nothing to merge.
			u.sets[typ] = ts
			continue
		}
		if len(states) == 2 && derivedFrom(states[0], states[1]) {
			// A state and its parent: the union is the state with what it removed put back.
			from := states[0].set(typ)
			var names []string
			for _, e := range states[0].dropped[typ] {
				names = append(names, e.name)
			}
			ts := &typeSet{tree: from.tree.Clone(), sum: from.sum, link: childLink(from.link, names)}
			for _, e := range states[0].dropped[typ] {
				if _, had := ts.tree.ReplaceOrInsert(e); had {
					panic("xdscache: a dropped resource is still in the state that dropped it")
				}
				ts.sum += e.sum
			}
			u.sets[typ] = ts
			continue
		}
		if len(states) == 2 {
			if ts := unionAlongLineage(states[0].set(typ), states[1].set(typ)); ts != nil {
				u.sets[typ] = ts
				continue
			}
		}
		ts := &typeSet{tree: btree.NewG(setDegree, byName), link: rootLink()}
		for _, s := range states {
			s.sets[typ].each(func(e *entry) bool {
				if !ts.tree.Has(e) {
					ts.tree.ReplaceOrInsert(e)
					ts.sum += e.sum
				}
				return true
			})
		}
		u.sets[typ] = ts
	}
	u.Version = u.hash()
	return u
}

// unionAlongLineage returns the union of two typeSets, a's entry winning a name both hold, when their
// lineages meet: only the names changed between them can be in b and not in a, so it costs what changed,
// and it is a itself, link and all, when b adds nothing. The union is linked to a's lineage (a child of a
// with the names it adds), so that the streams answered from it meet what is derived from a later.
//
// A publish that supersedes a staged one (the push benchmark's fill sends a thousand policies at a time,
// faster than the steps settle) combines the next state with a staged union, which is neither its parent
// nor shares its trees. Such unions used to be built anew with a link of their own (rootLink): the streams
// marked by them met nothing the engine derived afterwards, and the first change after the fill compared
// every cluster and endpoint in full (20-35 ms at 10,000 policies, bench/results/2026-11-23-vm-incremental
// 6.6 and 7.1). It returns nil when the lineages do not meet.
func unionAlongLineage(a, b *typeSet) *typeSet {
	names, ok := changedBetween(b.link, a.link)
	if !ok {
		return nil
	}
	var added []*entry
	for _, n := range names {
		if _, in := a.get(n); in {
			continue
		}
		if e, in := b.get(n); in {
			added = append(added, e)
		}
	}
	if len(added) == 0 {
		return a
	}
	ts := &typeSet{tree: a.tree.Clone(), sum: a.sum}
	addedNames := make([]string, len(added))
	for i, e := range added {
		ts.tree.ReplaceOrInsert(e)
		ts.sum += e.sum
		addedNames[i] = e.name
	}
	ts.link = childLink(a.link, addedNames)
	return ts
}

// shared returns the typeSet the states all hold for typ, or nil when they differ.
func shared(typ string, states []*State) *typeSet {
	if len(states) == 0 {
		return nil
	}
	if len(states) == 2 && derivedWithoutRemovals(states[0], states[1], typ) {
		return states[0].sets[typ]
	}
	first := states[0].sets[typ]
	for _, s := range states[1:] {
		if ts := s.sets[typ]; first == nil || ts == nil || ts.sum != first.sum || ts.len() != first.len() {
			return nil
		}
	}
	return first
}

func (s *State) hash() string {
	if len(s.sets) == len(Types) {
		// The sum of the entries' shares per type: the same resources give the same version, and a
		// derived state gets its version without visiting every resource.
		var b [8]byte
		h := sha256.New()
		for _, typ := range Types {
			binary.LittleEndian.PutUint64(b[:], s.sets[typ].sum)
			h.Write([]byte(typ))
			h.Write(b[:])
		}
		return hex.EncodeToString(h.Sum(nil)[:8])
	}
	h := sha256.New()
	for _, typ := range Types {
		s.sets[typ].each(func(e *entry) bool {
			fmt.Fprintf(h, "%s\x00%s\x00%s\n", typ, e.name, e.version)
			return true
		})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func addsAny(old, next *State, types []string) bool {
	if next.parent != "" && next.parent == old.Version {
		return next.addsTo(types)
	}
	for _, typ := range types {
		ns, olds := next.sets[typ], old.sets[typ]
		if ns != nil && olds != nil {
			// Only a name changed between the two lineages can be in next and not in old: a publish that
			// supersedes a staged one (old is the staged union) looks at those, not at every resource.
			if names, ok := changedBetween(olds.link, ns.link); ok {
				for _, n := range names {
					_, in := ns.get(n)
					if _, had := olds.get(n); in && !had {
						return true
					}
				}
				continue
			}
		}
		adds := false
		next.sets[typ].each(func(e *entry) bool {
			_, ok := old.sets[typ].get(e.name)
			adds = !ok
			return !adds
		})
		if adds {
			return true
		}
	}
	return false
}

func sameTypes(a, b *State, types []string) bool {
	for _, typ := range types {
		as, bs := a.sets[typ], b.sets[typ]
		if as != nil && as == bs {
			continue
		}
		// The digests add every entry's share (see entrySum): unequal digests are unequal sets, found
		// without visiting them.
		if as.len() != bs.len() || (as != nil && bs != nil && as.sum != bs.sum) {
			return false
		}
		same := true
		as.each(func(e *entry) bool {
			f, ok := bs.get(e.name)
			same = ok && f.version == e.version
			return same
		})
		if !same {
			return false
		}
	}
	return true
}

// emptyAssignment answers an EDS name the group does not have.
func emptyAssignment(name string) *entry {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&endpointv3.ClusterLoadAssignment{ClusterName: name})
	return &entry{name: name, version: "empty", typ: resource.EndpointType, value: b}
}

// pick returns the entries a subscription should hold now, and their versions. A wildcard walks the
// type's tree in order once; only names subscribed beyond it are looked up.
func (s *State) pick(typ string, wildcard bool, subscribed map[string]struct{}) ([]*entry, map[string]string) {
	ts := s.sets[typ]
	var entries []*entry
	versions := map[string]string{}
	if wildcard {
		entries = make([]*entry, 0, ts.len())
		versions = make(map[string]string, ts.len())
		ts.each(func(e *entry) bool {
			entries = append(entries, e)
			versions[e.name] = e.version
			return true
		})
	}
	var extra []string
	for n := range subscribed {
		if _, ok := versions[n]; !ok {
			extra = append(extra, n)
		}
	}
	if len(extra) == 0 {
		return entries, versions
	}
	slices.Sort(extra)
	for _, n := range extra {
		e, ok := ts.get(n)
		if !ok {
			if typ != resource.EndpointType {
				continue
			}
			e = emptyAssignment(n)
		}
		entries = append(entries, e)
		versions[n] = e.version
	}
	if wildcard {
		slices.SortFunc(entries, func(a, b *entry) int { return strings.Compare(a.name, b.name) })
	}
	return entries, versions
}
