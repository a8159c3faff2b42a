package xdscache

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// DefaultGroup serves Envoys whose node has no cluster set.
const DefaultGroup = v1alpha1.DefaultProxyGroup

// GroupOf is the proxy group of a node: its cluster name.
func GroupOf(n *corev3.Node) string {
	if n.GetCluster() == "" {
		return DefaultGroup
	}
	return n.GetCluster()
}

// Cache implements go-control-plane's cache.Cache over one State per proxy group.
type Cache struct {
	// Settle blocks until every connected proxy of a group has acknowledged version, or gives up (it must
	// bound its own wait); it returns early when ctx ends. Nil applies all steps of a publish at once.
	Settle func(ctx context.Context, group, version string)

	mu     sync.Mutex
	nextID int64
	groups map[string]*group
}

type group struct {
	state  *State // what is served now
	target *State // what the last publish asked for; differs from state while a publish is staged
	// refs are the Secrets state's listeners and clusters reference: the only ones its streams are given.
	refs   map[string]bool
	links  lineages // of the typeSets served lately, for delta answers
	cancel context.CancelFunc
	sotw   map[int64]*sotwWatch
	delta  map[int64]*deltaWatch
}

type sotwWatch struct {
	req *cachev3.Request
	sub cachev3.Subscription
	ch  chan cachev3.Response
	typ int // index in Types, -1 for a type not served
}

type deltaWatch struct {
	req *cachev3.DeltaRequest
	sub cachev3.Subscription
	ch  chan cachev3.DeltaResponse
	typ int
}

var _ cachev3.Cache = (*Cache)(nil)

// New returns an empty cache.
func New() *Cache {
	return &Cache{groups: map[string]*group{}}
}

var emptyState, _ = NewState(nil)

func (c *Cache) group(name string) *group {
	g, ok := c.groups[name]
	if !ok {
		g = &group{state: emptyState, target: emptyState, sotw: map[int64]*sotwWatch{}, delta: map[int64]*deltaWatch{}}
		g.remember(emptyState)
		c.groups[name] = g
	}
	return g
}

// Publish makes s the config of a group, make-before-break (see plan). The first step is served before
// Publish returns; later steps follow as the group's proxies acknowledge the earlier ones. A newer Publish
// cancels the remaining steps of an older one.
func (c *Cache) Publish(groupName string, s *State) {
	c.mu.Lock()
	g := c.group(groupName)
	if g.target.Version == s.Version {
		c.mu.Unlock()
		return
	}
	if g.cancel != nil {
		g.cancel()
		g.cancel = nil
	}
	g.target = s
	steps := plan(g.state, s)
	if c.Settle == nil {
		for _, st := range steps {
			c.set(g, st)
		}
		c.mu.Unlock()
		return
	}
	c.set(g, steps[0])
	if len(steps) == 1 {
		c.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	c.mu.Unlock()
	go func() {
		prev := steps[0]
		for _, st := range steps[1:] {
			c.Settle(ctx, groupName, prev.Version)
			c.mu.Lock()
			if ctx.Err() != nil {
				c.mu.Unlock()
				return
			}
			c.set(g, st)
			c.mu.Unlock()
			prev = st
		}
	}()
}

// set serves a new state and answers the open watches it changes, stream by stream, and within a stream
// type by type in Types order. The server's channels hold one response per type, so sending under the lock
// never blocks. A stream's responses go into its channel one after the other, so that its server goroutine
// sends them together and gRPC writes them to the connection in one system call (and the proxy answers them
// in one): with type after type across all streams instead, each stream's responses were far apart, each
// its own write, read and wake-up (bench/results/2026-11-23-vm-incremental section 5.6).
func (c *Cache) set(g *group, s *State) {
	if g.state == s {
		return
	}
	g.state = s
	g.refs = referencedSecrets(s)
	g.remember(s)
	for _, ids := range byStream(g.sotw, func(w *sotwWatch) (chan cachev3.Response, int) { return w.ch, w.typ }) {
		for _, id := range ids {
			if w := g.sotw[id]; id != 0 {
				if resp := sotwResponse(s, g.refs, w.req, w.sub, false); resp != nil {
					w.ch <- resp
					delete(g.sotw, id)
				}
			}
		}
	}
	for _, ids := range byStream(g.delta, func(w *deltaWatch) (chan cachev3.DeltaResponse, int) { return w.ch, w.typ }) {
		for _, id := range ids {
			if w := g.delta[id]; id != 0 {
				if resp := deltaResponse(s, g.refs, &g.links, w.req, w.sub); resp != nil {
					w.ch <- resp
					delete(g.delta, id)
				}
			}
		}
	}
}

// streamWatches are one stream's watch IDs by their type's index in Types; 0 is none (IDs start at 1).
type streamWatches [6]int64

func init() {
	if len(Types) != len(streamWatches{}) {
		panic("xdscache: streamWatches must hold one watch per type in Types")
	}
}

// byStream groups watches by the stream they belong to (the server gives every watch of a stream the same
// channel), each group in Types order; watches of other types (typ -1) are left out: they never change.
func byStream[W any, C comparable](watches map[int64]W, key func(W) (ch C, typ int)) []streamWatches {
	at := make(map[C]int, len(watches)/len(Types)+1)
	var out []streamWatches
	for id, w := range watches {
		ch, typ := key(w)
		if typ < 0 {
			continue
		}
		i, ok := at[ch]
		if !ok || out[i][typ] != 0 {
			i = len(out)
			at[ch] = i
			out = append(out, streamWatches{})
		}
		out[i][typ] = id
	}
	return out
}

// remember keeps the links of a served state's typeSets, so that the marks streams get from it can be
// followed (see lineage.go).
func (g *group) remember(s *State) {
	for _, ts := range s.sets {
		if ts != nil && ts.link != nil {
			g.links.add(ts.link)
		}
	}
}

// State returns what a group is served now and what it will be served once pending removals are done.
func (c *Cache) State(groupName string) (current, target *State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(groupName)
	return g.state, g.target
}

// CreateWatch answers a state-of-the-world request now if the stream lacks something, or parks it.
func (c *Cache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, ch chan cachev3.Response) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(GroupOf(req.GetNode()))
	if resp := sotwResponse(g.state, g.refs, req, sub, req.GetResponseNonce() == ""); resp != nil {
		ch <- resp
		return func() {}, nil
	}
	return park(c, g.sotw, &sotwWatch{req: req, sub: sub, ch: ch, typ: slices.Index(Types, req.GetTypeUrl())}), nil
}

// park keeps a watch until it is answered or its stream cancels it; c.mu is held.
func park[W any](c *Cache, watches map[int64]W, w W) (cancel func()) {
	c.nextID++
	id := c.nextID
	watches[id] = w
	return func() {
		c.mu.Lock()
		delete(watches, id)
		c.mu.Unlock()
	}
}

// CreateDeltaWatch answers a delta request now if anything differs from what the stream holds, or parks it.
func (c *Cache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(GroupOf(req.GetNode()))
	if resp := deltaResponse(g.state, g.refs, &g.links, req, sub); resp != nil {
		ch <- resp
		return func() {}, nil
	}
	return park(c, g.delta, &deltaWatch{req: req, sub: sub, ch: ch, typ: slices.Index(Types, req.GetTypeUrl())}), nil
}

// Fetch (REST xDS) is not offered: Envoys use ADS.
func (c *Cache) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errors.New("lbplane serves xDS over ADS only")
}

// sotwResponse returns the response a state-of-the-world stream needs, or nil when it holds everything
// already. Clusters and listeners are sent whole (the protocol treats a missing one as removed); endpoints
// and routes only when one the stream asked for changed. A NACK leaves the stream's versions as they were
// sent, so it gets no response until the config changes.
func sotwResponse(s *State, refs map[string]bool, req *cachev3.Request, sub cachev3.Subscription, first bool) cachev3.Response {
	typ := req.GetTypeUrl()
	entries, versions := s.pick(typ, sub.IsWildcard(), sub.SubscribedResources())
	entries, versions = servable(typ, refs, entries, versions)
	known := sub.ReturnedResources()
	changed := first
	if cachev3.ResourceRequiresFullStateInSotw(typ) {
		changed = changed || !maps.Equal(versions, known)
	} else {
		for n, v := range versions {
			if known[n] != v {
				changed = true
				break
			}
		}
	}
	if !changed {
		return nil
	}
	anys := make([]*anypb.Any, len(entries))
	for i, e := range entries {
		anys[i] = e.resource()
	}
	return &sotwResp{req: req, version: s.Version, resources: anys, returned: versions}
}

// deltaResponse returns the changes a delta stream needs, or nil. It updates the stream's version map in
// place (go-control-plane hands it back as the next one), and marks it with the typeSet it now matches, so
// that the next answer compares only the names changed since (see lineage.go).
func deltaResponse(s *State, refs map[string]bool, links *lineages, req *cachev3.DeltaRequest, sub cachev3.Subscription) cachev3.DeltaResponse {
	typ := req.GetTypeUrl()
	known := sub.ReturnedResources()
	if known == nil {
		known = map[string]string{}
	}
	var changed []*discovery.Resource
	var removed []string
	if names, ok := changedSinceMark(s, links, known, req); ok {
		compared.Add(int64(len(names)))
		ts := s.sets[typ]
		subscribed := sub.SubscribedResources()
		for _, n := range names {
			e, ok := ts.get(n)
			_, named := subscribed[n]
			switch {
			case ok && (sub.IsWildcard() || named):
			case named && typ == resource.EndpointType:
				e, ok = emptyAssignment(n), true
			default:
				ok = false
			}
			v, held := known[n]
			switch {
			case ok && (!held || v != e.version):
				changed = append(changed, &discovery.Resource{Name: n, Version: e.version, Resource: e.resource()})
				known[n] = e.version
			case !ok && held:
				removed = append(removed, n)
				delete(known, n)
			}
		}
	} else {
		fullCompares.Add(1)
		entries, versions := s.pick(typ, sub.IsWildcard(), sub.SubscribedResources())
		entries, versions = servable(typ, refs, entries, versions)
		compared.Add(int64(len(entries) + len(known)))
		for _, e := range entries {
			if known[e.name] != e.version {
				changed = append(changed, &discovery.Resource{Name: e.name, Version: e.version, Resource: e.resource()})
				known[e.name] = e.version
			}
		}
		for n := range known {
			if _, ok := versions[n]; !ok && n != markKey {
				removed = append(removed, n)
				delete(known, n)
			}
		}
		slices.Sort(removed)
	}
	if ts := s.sets[typ]; ts != nil && typ != resource.SecretType {
		known[markKey] = strconv.FormatUint(ts.link.id, 10)
	}
	// The first wildcard request must be answered even when empty, or Envoy never finishes initialising.
	first := sub.IsWildcard() && req.GetResponseNonce() == ""
	if len(changed) == 0 && len(removed) == 0 && !first {
		return nil
	}
	return &deltaResp{req: req, version: s.Version, resources: changed, removed: removed, returned: known}
}

// fullCompares counts the delta answers that compared every resource, and compared the resources delta
// answers looked at, for tests: an answer's cost follows what it looks at.
var fullCompares, compared atomic.Int64

// changedSinceMark returns the names a delta stream's answer must look at, when its version map is marked
// with a typeSet whose lineage meets the one served now: the names changed between the two, and those the
// request subscribes or unsubscribes (go-control-plane edits the map for the latter). Secrets are always
// compared in full: whether a stream may hold one depends on every listener and cluster (see servable).
func changedSinceMark(s *State, links *lineages, known map[string]string, req *cachev3.DeltaRequest) ([]string, bool) {
	typ := req.GetTypeUrl()
	ts := s.sets[typ]
	if ts == nil || typ == resource.SecretType || len(req.GetInitialResourceVersions()) > 0 {
		return nil, false
	}
	id, ok := markOf(known)
	if !ok {
		return nil, false
	}
	from := links.get(id)
	if from == nil {
		return nil, false
	}
	sub, unsub := req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe()
	if slices.Contains(sub, "*") || slices.Contains(unsub, "*") {
		return nil, false
	}
	names, ok := changedBetween(from, ts.link)
	if !ok {
		return nil, false
	}
	if len(sub)+len(unsub) > 0 {
		names = append(append(append([]string(nil), names...), sub...), unsub...)
		slices.Sort(names)
		names = slices.Compact(names)
	}
	return names, true
}

type sotwResp struct {
	req       *cachev3.Request
	version   string
	resources []*anypb.Any
	returned  map[string]string
}

func (r *sotwResp) GetDiscoveryResponse() (*discovery.DiscoveryResponse, error) {
	return &discovery.DiscoveryResponse{VersionInfo: r.version, Resources: r.resources, TypeUrl: r.req.GetTypeUrl()}, nil
}
func (r *sotwResp) GetRequest() *discovery.DiscoveryRequest { return r.req }
func (r *sotwResp) GetVersion() (string, error)             { return r.version, nil }
func (r *sotwResp) GetResponseVersion() string              { return r.version }
func (r *sotwResp) GetReturnedResources() map[string]string {
	return r.returned
}
func (r *sotwResp) GetContext() context.Context { return context.Background() }

type deltaResp struct {
	req       *cachev3.DeltaRequest
	version   string
	resources []*discovery.Resource
	removed   []string
	returned  map[string]string
}

func (r *deltaResp) GetDeltaDiscoveryResponse() (*discovery.DeltaDiscoveryResponse, error) {
	return &discovery.DeltaDiscoveryResponse{SystemVersionInfo: r.version, Resources: r.resources,
		RemovedResources: r.removed, TypeUrl: r.req.GetTypeUrl()}, nil
}
func (r *deltaResp) GetDeltaRequest() *discovery.DeltaDiscoveryRequest { return r.req }
func (r *deltaResp) GetSystemVersion() (string, error)                 { return r.version, nil }
func (r *deltaResp) GetResponseVersion() string                        { return r.version }
func (r *deltaResp) GetNextVersionMap() map[string]string              { return r.returned }
func (r *deltaResp) GetReturnedResources() map[string]string           { return r.returned }
func (r *deltaResp) GetContext() context.Context                       { return context.Background() }
