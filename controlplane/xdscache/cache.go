package xdscache

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
//
// A publish takes every stream of the group from the state it holds to the new one make-before-break (see
// plan), each stream on its own: a stream moves to its next step when it has answered (ACK or NACK) every
// response of the step it is on, or when StepTimeout has passed, so one slow Envoy delays only itself (see
// steps.go). The server must report its streams with Callbacks, so that the cache can tell streams apart,
// match answers to responses and forget closed streams.
type Cache struct {
	// StepTimeout bounds how long one stream stays on a step of a make-before-break change without
	// answering it before it is given the next. Zero applies every publish in one step.
	StepTimeout time.Duration
	// MaxAge, when positive, retires each stream about this long after its first request (MaxAge ±10 %,
	// at random, so that streams opened together do not all end together): from then on it is given
	// nothing new, and once it has answered (ACK or NACK) every response it was sent, OnRetire is called
	// for it. A stream is never ended in the middle of a change (see maxage.go).
	MaxAge time.Duration
	// OnRetire, called on its own goroutine, ends a retired stream (the server closes its connection) and
	// says whether it could; a stream it could not end is served again, and retired again a MaxAge later.
	// Without it, streams are not retired.
	OnRetire func(StreamID) bool

	mu      sync.Mutex
	nextID  int64
	groups  map[string]*group
	streams map[any]*streamState // by the stream's response channel
	byID    map[StreamID]*streamState
	// bind maps a request the server reported (Callbacks) to its stream until CreateWatch takes it; last is
	// each stream's newest such request, so that a request the server skips does not stay in bind.
	bind map[any]StreamID
	last map[StreamID]any
	// waiters are the Lagging calls under way.
	waiters map[*waiter]struct{}
	// targetsGen counts the changes of any group's target, baseline or views (TargetsGeneration).
	targetsGen atomic.Uint64

	// OnGRPCClient, when set, is called (on its own goroutine) when the first gRPC client of a group
	// connects and the group's gRPC profile has never been published: profiles are built only for groups
	// that have gRPC clients.
	OnGRPCClient func(group string)
}

type group struct {
	name   string
	target *State // what the last publish asked for
	// baseline, when set, is what the streams of nodes not in views are served instead of target, and views
	// what each of the nodes in it is served: staged rollouts (see PublishSplit).
	baseline *State
	views    map[string]*State
	// plans holds the last publish's steps by the versions of the state a stream held and of its target.
	plans   map[string][]*State
	links   lineages // of the typeSets served lately, for delta answers
	streams map[*streamState]struct{}
	// published is set once a publish (or, for a gRPC profile, a request for one) was made.
	published bool
}

type sotwWatch struct {
	id  int64
	req *cachev3.Request
	sub cachev3.Subscription
	ch  chan cachev3.Response
}

type deltaWatch struct {
	id  int64
	req *cachev3.DeltaRequest
	sub cachev3.Subscription
	ch  chan cachev3.DeltaResponse
}

var _ cachev3.Cache = (*Cache)(nil)

// New returns an empty cache.
func New() *Cache {
	return &Cache{groups: map[string]*group{}, streams: map[any]*streamState{}, byID: map[StreamID]*streamState{},
		bind: map[any]StreamID{}, last: map[StreamID]any{}, waiters: map[*waiter]struct{}{}}
}

var emptyState, _ = NewState(nil)

func (c *Cache) group(name string) *group {
	g, ok := c.groups[name]
	if !ok {
		g = &group{name: name, target: emptyState, streams: map[*streamState]struct{}{}}
		g.remember(emptyState)
		c.groups[name] = g
	}
	return g
}

// Publish makes s the config of a group, for every stream (it ends a split: see PublishSplit). Every stream
// of the group is given the first step towards it before Publish returns, and the later steps as it
// answers the earlier ones (see steps.go). A newer Publish takes each stream from wherever it stands to the
// newer state.
func (c *Cache) Publish(groupName string, s *State) {
	c.PublishSplit(groupName, s, nil, nil)
}

// planFrom returns the steps from a state a stream holds to the state it is to be served (see
// group.targetFor), shared by the streams that hold the same state; c.mu is held.
func (c *Cache) planFrom(g *group, from, to *State) []*State {
	if from == nil || c.StepTimeout <= 0 || from.Version == to.Version {
		return []*State{to}
	}
	key := from.Version + ">" + to.Version
	if p, ok := g.plans[key]; ok {
		return p
	}
	p := plan(from, to)
	for _, s := range p {
		g.remember(s)
	}
	g.plans[key] = p
	return p
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

// State returns what the group's streams furthest behind are served now (the target when none is behind)
// and what the last publish asked for.
func (c *Cache) State(groupName string) (current, target *State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(groupName)
	current = g.target
	behind := -1
	for st := range g.streams {
		if st.at < len(st.plan)-1 && (behind < 0 || st.at < behind) {
			behind, current = st.at, st.plan[st.at]
		}
	}
	return current, g.target
}

// Target returns what the last publish asked a group to serve.
func (c *Cache) Target(groupName string) *State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.groups[groupName]; ok {
		return g.target
	}
	return emptyState
}

// Targets returns the version each group was last asked to serve.
func (c *Cache) Targets() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.groups))
	for n, g := range c.groups {
		out[n] = g.target.Version
	}
	return out
}

// CreateWatch answers a state-of-the-world request now if the stream lacks something, or parks it.
func (c *Cache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, ch chan cachev3.Response) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stream(req, ch, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce())
	typ := slices.Index(Types, req.GetTypeUrl())
	// Past its age, a stream is answered from the step it is on, never moved on (see maxage.go): what it asks
	// of what it holds (the endpoints of a cluster it was sent, which Envoy warms before it answers some
	// responses) is sent; a request it holds everything of is parked until it ends.
	if !resumes(st.served(), req, sub) {
		if resp := sotwResponse(st.served(), req, sub, req.GetResponseNonce() == ""); resp != nil {
			ch <- resp
			st.sent(typ)
			c.step(st)
			return func() {}, nil
		}
	}
	if typ < 0 {
		return func() {}, nil // a type lbplane does not serve never changes
	}
	c.nextID++
	w := &sotwWatch{id: c.nextID, req: req, sub: sub, ch: ch}
	st.sotw[typ] = w
	c.step(st)
	return func() {
		c.mu.Lock()
		if st.sotw[typ] == w {
			st.sotw[typ] = nil
		}
		c.mu.Unlock()
	}, nil
}

// CreateDeltaWatch answers a delta request now if anything differs from what the stream holds, or parks it.
func (c *Cache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stream(req, ch, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce())
	typ := slices.Index(Types, req.GetTypeUrl())
	// As in CreateWatch, past its age too.
	if resp := deltaResponse(st.served(), &st.group.links, req, sub); resp != nil {
		ch <- resp
		st.sent(typ)
		c.step(st)
		return func() {}, nil
	}
	if typ < 0 {
		return func() {}, nil
	}
	c.nextID++
	w := &deltaWatch{id: c.nextID, req: req, sub: sub, ch: ch}
	st.delta[typ] = w
	c.step(st)
	return func() {
		c.mu.Lock()
		if st.delta[typ] == w {
			st.delta[typ] = nil
		}
		c.mu.Unlock()
	}, nil
}

// Fetch (REST xDS) is not offered: Envoys use ADS.
func (c *Cache) Fetch(context.Context, *cachev3.Request) (cachev3.Response, error) {
	return nil, errors.New("lbplane serves xDS over ADS only")
}

// resumes tells whether a state-of-the-world stream's first request of a type says its client already
// runs exactly what s holds of it, so that nothing need be sent: a client that reconnects (at its maximum
// age, or to another replica, which builds the same versions) names the version it last accepted. Only
// for clusters and listeners asked for by wildcard: their version covers every resource of the type. An
// Envoy's endpoints or routes of that version may lack a name it subscribed to since (the response that
// added it may not have arrived), so those are sent again.
func resumes(s *State, req *cachev3.Request, sub cachev3.Subscription) bool {
	return req.GetResponseNonce() == "" && req.GetVersionInfo() != "" && req.GetVersionInfo() == s.Version &&
		sub.IsWildcard() && cachev3.ResourceRequiresFullStateInSotw(req.GetTypeUrl())
}

// sotwResponse returns the response a state-of-the-world stream needs, or nil when it holds everything
// already. Clusters and listeners are sent whole (the protocol treats a missing one as removed); endpoints
// and routes only when one the stream asked for changed. A NACK leaves the stream's versions as they were
// sent, so it gets no response until the config changes.
func sotwResponse(s *State, req *cachev3.Request, sub cachev3.Subscription, first bool) cachev3.Response {
	typ := req.GetTypeUrl()
	entries, versions := s.pick(typ, sub.IsWildcard(), sub.SubscribedResources())
	entries, versions = servable(typ, s.secretRefs(), entries, versions)
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
func deltaResponse(s *State, links *lineages, req *cachev3.DeltaRequest, sub cachev3.Subscription) cachev3.DeltaResponse {
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
		entries, versions = servable(typ, s.secretRefs(), entries, versions)
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
