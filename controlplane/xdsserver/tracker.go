// Package xdsserver serves the cache over ADS (state of the world and delta) and records, per connected
// Envoy, what it was sent and what it acknowledged or rejected.
package xdsserver

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Sync states of a proxy.
const (
	Synced = apiwire.Synced // acknowledged everything it was sent, and was sent the current config
	Stale  = apiwire.Stale  // has not acknowledged the current config yet
	Nacked = apiwire.Nacked // rejected the last response of some type
)

// TypeStatus is what one stream knows of one resource type; ProxyStatus describes one connected Envoy (one
// ADS stream). Both are push API answers, so they live in apiwire.
type (
	TypeStatus  = apiwire.TypeStatus
	ProxyStatus = apiwire.ProxyStatus
)

// typeState is a TypeStatus with what the tracker needs to match answers to responses.
type typeState struct {
	TypeStatus
	sentNonce string
	sentAt    time.Time
	// sent is what the last response carried and acked (state of the world only) what the last
	// acknowledged one did: a NACK is put on the difference (see rejected).
	sent, acked sentResources
	// sure is true when NackedResources are exactly what Envoy rejected (see rejected).
	sure bool
}

// typeStates are what a stream knows of each resource type: known[i] of xdscache.Types[i], other of any
// other type URL its client asks for (nil until one does). An array, not a map: every response and every
// ACK of thousands of streams looks its type up, and a map of its own per stream was a cache miss each time
// (3 % of a replica's CPU with 3,000 delta clients taking 5 changes a second).
type typeStates struct {
	known [xdscache.NumTypes]*typeState
	other map[string]*typeState
}

// get is the type's state, nil before any response or request of it.
func (ts *typeStates) get(typeURL string) *typeState {
	if i := slices.Index(xdscache.Types, typeURL); i >= 0 {
		return ts.known[i]
	}
	return ts.other[typeURL]
}

// make is the type's state, made when it is new.
func (ts *typeStates) make(typeURL string) *typeState {
	if t := ts.get(typeURL); t != nil {
		return t
	}
	t := &typeState{TypeStatus: TypeStatus{TypeURL: typeURL}}
	if i := slices.Index(xdscache.Types, typeURL); i >= 0 {
		ts.known[i] = t
		return t
	}
	if ts.other == nil {
		ts.other = map[string]*typeState{}
	}
	ts.other[typeURL] = t
	return t
}

// all are the types the stream knows of, those of xdscache.Types first.
func (ts *typeStates) all() iter.Seq[*typeState] {
	return func(yield func(*typeState) bool) {
		for _, t := range ts.known {
			if t != nil && !yield(t) {
				return
			}
		}
		for _, t := range ts.other {
			if !yield(t) {
				return
			}
		}
	}
}

// count is how many types the stream knows of.
func (ts *typeStates) count() int {
	n := len(ts.other)
	for _, t := range ts.known {
		if t != nil {
			n++
		}
	}
	return n
}

type stream struct {
	// identity, when the stream came over mTLS, is what its client certificate allows.
	identity *Identity
	// address is the client's IP address, peer its address and port (its connection's key).
	address     string
	peer        string
	api         string
	node        *corev3.Node
	connectedAt time.Time
	types       typeStates
	lastAcked   string
	ackedAt     time.Time
	responses   int64
	// push is the config version being sent to this Envoy, for one log line once it has answered every type.
	push struct {
		version string
		start   time.Time
		types   []string
		logged  bool
	}
}

// streamKey names a stream. go-control-plane numbers state-of-the-world and delta streams separately, both
// from 1, so the number alone would let a delta stream be taken for the SotW stream with the same number
// (and inherit its client certificate identity, its status and its stats target).
type streamKey struct {
	api string // apiSotW or apiDelta
	id  int64
}

const (
	apiSotW  = "sotw"
	apiDelta = "delta"
)

// Tracker implements go-control-plane's server callbacks.
type Tracker struct {
	cache *xdscache.Cache
	log   *slog.Logger
	// Metrics, when set, counts pushes, ACKs and NACKs.
	Metrics *metrics.Metrics
	// RequireIdentity refuses any stream without a verified client certificate (set whenever xDS runs over
	// mTLS; the TLS handshake already enforces it, this keeps a misconfigured listener from serving anyone).
	RequireIdentity bool
	// AckTimeout is how long a response may go unanswered before its stream stops counting for settle
	// waits (DefaultAckTimeout when 0).
	AckTimeout time.Duration
	// Owners, when set, names the policies a NACK's resources came from, for TypeStatus.NackedPolicies;
	// message is Envoy's. It is called without the tracker's lock held.
	Owners func(group, typeURL string, resources []string, message string) []apiwire.PolicyRef

	mu      sync.Mutex
	streams map[streamKey]*stream
	// byNode are the streams of each node id, for Busy.
	byNode map[string]map[streamKey]struct{}
	// changed is closed whenever any stream's state changes, for waiters; nil while none waits (an event
	// then costs no channel: thousands of streams answer every change).
	changed chan struct{}
	// gen counts the changes of any stream's state (Generation), read without the lock.
	gen atomic.Uint64
	// pending counts the responses not yet answered, and lastSent is when the last was sent (unix
	// nanoseconds), for Sending, read without the lock.
	pending, lastSent atomic.Int64
	// conns are the connections Listener accepted, for closing those whose stream reached its maximum age.
	conns connections
}

var _ serverv3.Callbacks = (*Tracker)(nil)

// DefaultAckTimeout bounds how long one proxy that does not answer can hold up a change: Envoy answers in
// milliseconds, and a config too big to apply in 5s is better pushed on than waited for.
const DefaultAckTimeout = 5 * time.Second

func (t *Tracker) ackTimeout() time.Duration {
	if t.AckTimeout > 0 {
		return t.AckTimeout
	}
	return DefaultAckTimeout
}

// NewTracker returns a tracker that compares proxies with what cache serves.
func NewTracker(cache *xdscache.Cache, log *slog.Logger) *Tracker {
	return &Tracker{cache: cache, log: log, streams: map[streamKey]*stream{}, byNode: map[string]map[streamKey]struct{}{}}
}

// notify tells waiters that stream id changed; t.mu is held.
func (t *Tracker) notify(id streamKey) {
	t.gen.Add(1)
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

func (t *Tracker) open(ctx context.Context, id streamKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &stream{api: id.api, connectedAt: time.Now()}
	if ident, ok := identityOf(ctx); ok {
		s.identity = &ident
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		s.peer = p.Addr.String()
		if host, _, err := net.SplitHostPort(s.peer); err == nil {
			s.address = host
		}
	}
	t.streams[id] = s
	t.notify(id)
}

func (t *Tracker) closed(id streamKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.streams[id]; s != nil {
		for ts := range s.types.all() {
			if ts.Pending {
				t.pending.Add(-1)
			}
		}
	}
	if s := t.streams[id]; s != nil && s.node != nil {
		t.log.Info("proxy disconnected", "node", s.node.GetId(), "group", xdscache.GroupOf(s.node), "api", id.api, "stream", id.id)
		if ks := t.byNode[s.node.GetId()]; ks != nil {
			delete(ks, id)
			if len(ks) == 0 {
				delete(t.byNode, s.node.GetId())
			}
		}
	}
	delete(t.streams, id)
	t.notify(id)
}

// request records an ACK or NACK, after checking that an mTLS client is the node it claims to be. Requests
// whose nonce is not the last one sent are stale: the server ignores them and so do we.
func (t *Tracker) request(id streamKey, node *corev3.Node, typeURL, nonce string, errDetail string, hasErr bool) error {
	var n nack
	if hasErr {
		n = t.nackOwners(id, typeURL, nonce, errDetail)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.record(id, node, typeURL, nonce, errDetail, hasErr, n)
}

// nack is what a NACK is put on.
type nack struct {
	resources []string
	policies  []apiwire.PolicyRef
	sure      bool
}

// nackOwners returns the resources a NACK is put on and the policies they came from. The owners are looked
// up without the lock (they read the engine's result) and before the NACK is recorded, so that no status
// ever sees the NACK without them.
func (t *Tracker) nackOwners(id streamKey, typeURL, nonce, msg string) nack {
	t.mu.Lock()
	s := t.streams[id]
	var ts *typeState
	if s != nil {
		ts = s.types.get(typeURL)
	}
	if s == nil || s.node == nil || ts == nil || ts.sentNonce != nonce {
		t.mu.Unlock()
		return nack{}
	}
	group := xdscache.GroupOf(s.node)
	var n nack
	n.resources, n.sure = rejected(ts.sent, ts.acked, msg)
	t.mu.Unlock()
	if t.Owners != nil && len(n.resources) > 0 {
		n.policies = t.Owners(group, typeURL, n.resources, msg)
	}
	if len(n.policies) > MaxNackedPolicies {
		// A listener shared by thousands of policies: listing them in every proxy's status and report
		// would cost more than it tells. Unattributed, the NACK counts against every policy of the group.
		return nack{}
	}
	return n
}

// MaxNackedPolicies bounds the policies a NACK is put on (see nackOwners).
const MaxNackedPolicies = 1024

// record does request's work under t.mu; n is what nackOwners found.
func (t *Tracker) record(id streamKey, node *corev3.Node, typeURL, nonce string, errDetail string, hasErr bool, n nack) error {
	s := t.streams[id]
	if s == nil {
		return nil
	}
	if s.identity == nil && t.RequireIdentity {
		err := status.Error(codes.Unauthenticated, "a client certificate is required")
		t.log.Warn("refused a node", "api", id.api, "stream", id.id, "address", s.address, "error", err)
		return err
	}
	if s.identity != nil {
		claimed := node
		if claimed == nil {
			claimed = s.node
		}
		// Without a node the stream would be served the default group: an mTLS client must say who it is.
		err := status.Error(codes.PermissionDenied, "the first request must carry the node")
		if claimed != nil {
			err = s.identity.authorize(claimed.GetId(), xdscache.GroupOf(claimed))
		}
		if err != nil {
			t.log.Warn("refused a node", "api", id.api, "stream", id.id, "address", s.address, "error", err)
			return err
		}
	}
	if s.node == nil && node != nil {
		s.node = node
		if t.byNode[node.GetId()] == nil {
			t.byNode[node.GetId()] = map[streamKey]struct{}{}
		}
		t.byNode[node.GetId()][id] = struct{}{}
		t.log.Info("proxy connected", "node", node.GetId(), "group", xdscache.GroupOf(node), "api", s.api, "stream", id.id)
		t.Metrics.Group(xdscache.GroupOf(node))
	}
	ts := s.types.make(typeURL)
	if nonce == "" || nonce != ts.sentNonce || !ts.Pending {
		return nil
	}
	ts.Pending = false
	t.pending.Add(-1)
	t.Metrics.Answer(xdscache.GroupOf(s.node), shortType(typeURL), hasErr, ts.sentAt)
	if hasErr {
		if s.api == apiDelta && ts.Nacked && ts.sure && n.sure {
			// Still rejected from an earlier response (see clearNack), and rejected now.
			n.resources = union(ts.stillRejected(), n.resources)
			n.policies = unionFunc(ts.NackedPolicies, n.policies, apiwire.ComparePolicyRefs)
		}
		ts.Nacked, ts.NackMessage, ts.NackedAt = true, errDetail, time.Now()
		ts.NackedResources, ts.NackedPolicies, ts.sure = n.resources, n.policies, n.sure
		t.log.Warn("proxy rejected config", "node", s.node.GetId(), "group", xdscache.GroupOf(s.node),
			"type", shortType(typeURL), "version", ts.SentVersion, "resources", ts.NackedResources, "error", errDetail)
	} else {
		t.clearNack(s, ts)
		ts.AckedVersion = ts.SentVersion
		s.lastAcked, s.ackedAt = ts.SentVersion, time.Now()
		// A delta response's successor carries only what changed after it: nothing to compare with.
		if s.api == apiSotW {
			ts.acked = ts.sent
		}
	}
	t.logPush(s)
	t.notify(id)
	return nil
}

// clearNack forgets a type's NACK on an ACK. A state-of-the-world response carries every resource, so its
// ACK means the proxy took them all. A delta response carries only what changed: a resource Envoy rejected
// stays rejected until a response sends it again or removes it, and the proxy stays NACKED meanwhile
// (the policies are kept as they were: one of several resources may have been fixed).
func (t *Tracker) clearNack(s *stream, ts *typeState) {
	if s.api == apiDelta && ts.Nacked && ts.sure {
		left := ts.stillRejected()
		if len(left) > 0 {
			ts.NackedResources = left
			return
		}
	}
	ts.Nacked, ts.NackMessage, ts.NackedResources, ts.NackedPolicies, ts.sure = false, "", nil, nil, false
}

// stillRejected is what of the type's NACKed resources the last (delta) response neither sent again nor
// removed.
func (ts *typeState) stillRejected() []string {
	return slices.DeleteFunc(slices.Clone(ts.NackedResources), ts.sent.replaces)
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func unionFunc[T comparable](a, b []T, cmp func(T, T) int) []T {
	out := slices.Concat(a, b)
	slices.SortFunc(out, cmp)
	return slices.Compact(out)
}

// logPush writes one debug line per config version an Envoy has answered for every type it was sent.
func (t *Tracker) logPush(s *stream) {
	if s.push.logged || s.push.version == "" {
		return
	}
	nacked := false
	for ts := range s.types.all() {
		if ts.Pending {
			return
		}
		nacked = nacked || (ts.Nacked && ts.SentVersion == s.push.version)
	}
	s.push.logged = true
	// Its arguments cost more than the check, for every stream and change.
	if !t.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	t.log.Debug("push", "node", s.node.GetId(), "group", xdscache.GroupOf(s.node), "api", s.api, "version", s.push.version,
		"types", strings.Join(s.push.types, ","), "duration", time.Since(s.push.start), "nacked", nacked)
}

func (t *Tracker) response(id streamKey, typeURL, nonce, version string, sent sentResources) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[id]
	if s == nil {
		return
	}
	ts := s.types.make(typeURL)
	if !ts.Pending {
		t.pending.Add(1)
	}
	ts.sentNonce, ts.SentVersion, ts.Pending, ts.sentAt, ts.sent = nonce, version, true, time.Now(), sent
	t.lastSent.Store(ts.sentAt.UnixNano())
	s.responses++
	if s.push.version != version {
		// The types' list is used again: a new one for each stream and change was garbage.
		s.push.version, s.push.start, s.push.types, s.push.logged = version, ts.sentAt, s.push.types[:0], false
	}
	if short := shortType(typeURL); !slices.Contains(s.push.types, short) {
		s.push.types = append(s.push.types, short)
	}
	t.Metrics.Push(shortType(typeURL))
	t.notify(id)
}

// resumed records the version a state-of-the-world client says, in its first request of a type on a new
// stream, that it runs (after a reconnection): the cache sends clusters and listeners of that version
// again only when they changed (xdscache resumes), so this is what the stream holds of the type until then.
func (t *Tracker) resumed(id streamKey, typeURL, version string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[id]
	if s == nil {
		return
	}
	ts := s.types.get(typeURL)
	if ts == nil || ts.SentVersion != "" {
		return
	}
	ts.SentVersion, ts.AckedVersion = version, version
	if s.lastAcked == "" {
		s.lastAcked, s.ackedAt = version, time.Now()
	}
	t.notify(id)
}

// StatsPortKey is the node metadata field lbctl bootstrap sets to the Envoy's stats port.
const StatsPortKey = "lbplane.io/stats-port"

// StatsPortOf returns the node's stats port, or 0.
func StatsPortOf(n *corev3.Node) int {
	v := n.GetMetadata().GetFields()[StatsPortKey].GetNumberValue()
	if v < 1 || v > 65535 || v != float64(int(v)) {
		return 0
	}
	return int(v)
}

// userAgent is a node's user agent name and version ("gRPC Go 1.85.0").
func userAgent(n *corev3.Node) string {
	v := n.GetUserAgentVersion()
	if bv := n.GetUserAgentBuildVersion().GetVersion(); v == "" && bv != nil {
		v = fmt.Sprintf("%d.%d.%d", bv.GetMajorNumber(), bv.GetMinorNumber(), bv.GetPatch())
	}
	return strings.TrimSpace(n.GetUserAgentName() + " " + v)
}

func shortType(u string) string { return u[strings.LastIndex(u, ".")+1:] }

// ShortTypes are the short names ("Cluster") of type URLs, as the xDS metrics label them.
func ShortTypes(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = shortType(u)
	}
	return out
}

// CountByGroup counts the connected Envoys of each proxy group.
func (t *Tracker) CountByGroup() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for _, s := range t.streams {
		if s.node != nil {
			out[xdscache.GroupOf(s.node)]++
		}
	}
	return out
}

// Generation changes whenever what Proxies reports may have changed: a stream opened, closed, asked or was
// answered, or a group was given a new target. Between two equal readings Proxies reports the same, but for
// how long an unanswered response has waited (its Message; the State is Stale either way), so a reader
// that publishes it need not build it again.
func (t *Tracker) Generation() uint64 { return t.gen.Load() + t.cache.TargetsGeneration() }

// Proxies returns the status of every connected Envoy, sorted by node id.
func (t *Tracker) Proxies() []ProxyStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.proxies()
}

// Host is where one connected proxy runs: the address it connects from and the stats port it declares.
type Host struct {
	Address   string
	StatsPort int
}

// Hosts lists where the connected proxies run. It is what Proxies says of their hosts without working out
// each one's sync state, under the lock every acknowledgement takes: read every second, with 1,000 clients
// that work stood in the way of the acknowledgements it delayed.
func (t *Tracker) Hosts() []Host {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Host, 0, len(t.streams))
	for _, s := range t.streams {
		if s.node != nil {
			out = append(out, Host{Address: s.address, StatsPort: StatsPortOf(s.node)})
		}
	}
	return out
}

func (t *Tracker) proxies() []ProxyStatus {
	out := make([]ProxyStatus, 0, len(t.streams))
	now := time.Now()
	for _, s := range t.streams {
		if s.node == nil {
			continue
		}
		g := xdscache.GroupOf(s.node)
		current := t.cache.TargetFor(xdscache.ServedKey(s.node), s.node.GetId())
		p := ProxyStatus{NodeID: s.node.GetId(), Group: g, API: s.api, ConnectedAt: s.connectedAt,
			Client: xdscache.ClientOf(s.node), UserAgent: userAgent(s.node),
			Version: s.lastAcked, AckedAt: s.ackedAt, Current: current.Version, State: Synced, Responses: s.responses,
			Address: s.address, StatsPort: StatsPortOf(s.node), Zone: s.node.GetLocality().GetZone(), Authenticated: s.identity != nil,
			Types: make([]TypeStatus, 0, s.types.count())}
		latestSent := ""
		for ts := range s.types.all() {
			if ts.Pending && now.Sub(ts.sentAt) > t.ackTimeout() && !p.Unresponsive {
				p.Unresponsive = true
				p.Message = fmt.Sprintf("%s: no answer for %s; left out of settle waits until it answers", shortType(ts.TypeURL), now.Sub(ts.sentAt).Round(time.Second))
			}
			p.Types = append(p.Types, ts.TypeStatus)
			if ts.SentVersion == current.Version {
				latestSent = current.Version
			}
			switch {
			case ts.Nacked:
				p.State = Nacked
				if !p.Unresponsive {
					p.Message = shortType(ts.TypeURL) + ": " + ts.NackMessage
				}
			case ts.Pending && p.State == Synced:
				p.State = Stale
			}
		}
		// An Envoy subscribes to every listener and cluster, so each new version is sent to it; a gRPC client
		// names the few it uses, and a version that changes none of them is not sent (the cache answers a
		// publish at once, under its lock): it runs the current config when it answered all it was sent.
		grpcClient := p.Client == xdscache.ClientGRPC
		if (p.State == Synced && latestSent != current.Version && !grpcClient) || p.Unresponsive {
			p.State = Stale
		}
		slices.SortFunc(p.Types, func(a, b TypeStatus) int { return strings.Compare(a.TypeURL, b.TypeURL) })
		out = append(out, p)
	}
	// By node id, then API; compared in place: with thousands of Envoys, joining the two for every
	// comparison was most of this function's garbage.
	slices.SortFunc(out, func(a, b ProxyStatus) int {
		return cmp.Or(strings.Compare(a.NodeID, b.NodeID), strings.Compare(a.API, b.API))
	})
	return out
}

// Wait blocks until cond holds for the current proxies or ctx ends; it returns whether cond held.
func (t *Tracker) Wait(ctx context.Context, cond func([]ProxyStatus) bool) bool {
	for {
		t.mu.Lock()
		ok := cond(t.proxies())
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		case <-time.After(200 * time.Millisecond): // the cache may change without any stream event
		}
	}
}

// go-control-plane callbacks.

func (t *Tracker) OnStreamOpen(ctx context.Context, id int64, _ string) error {
	t.open(ctx, streamKey{apiSotW, id})
	return nil
}
func (t *Tracker) OnStreamClosed(id int64, _ *corev3.Node) { t.closed(streamKey{apiSotW, id}) }
func (t *Tracker) OnStreamRequest(id int64, r *discovery.DiscoveryRequest) error {
	if err := t.request(streamKey{apiSotW, id}, r.GetNode(), r.GetTypeUrl(), r.GetResponseNonce(), r.GetErrorDetail().GetMessage(), r.GetErrorDetail() != nil); err != nil {
		return err
	}
	if r.GetResponseNonce() == "" && r.GetVersionInfo() != "" {
		t.resumed(streamKey{apiSotW, id}, r.GetTypeUrl(), r.GetVersionInfo())
	}
	return nil
}
func (t *Tracker) OnStreamResponse(_ context.Context, id int64, _ *discovery.DiscoveryRequest, r *discovery.DiscoveryResponse) {
	t.response(streamKey{apiSotW, id}, r.GetTypeUrl(), r.GetNonce(), r.GetVersionInfo(), sentResources{sotw: r.GetResources()})
}
func (t *Tracker) OnDeltaStreamOpen(ctx context.Context, id int64, _ string) error {
	t.open(ctx, streamKey{apiDelta, id})
	return nil
}
func (t *Tracker) OnDeltaStreamClosed(id int64, _ *corev3.Node) { t.closed(streamKey{apiDelta, id}) }
func (t *Tracker) OnStreamDeltaRequest(id int64, r *discovery.DeltaDiscoveryRequest) error {
	t.traceDeltaRequest(id, r)
	return t.request(streamKey{apiDelta, id}, r.GetNode(), r.GetTypeUrl(), r.GetResponseNonce(), r.GetErrorDetail().GetMessage(), r.GetErrorDetail() != nil)
}
func (t *Tracker) OnStreamDeltaResponse(id int64, _ *discovery.DeltaDiscoveryRequest, r *discovery.DeltaDiscoveryResponse) {
	t.traceDeltaResponse(id, r)
	t.response(streamKey{apiDelta, id}, r.GetTypeUrl(), r.GetNonce(), r.GetSystemVersionInfo(), sentResources{delta: r.GetResources(), removed: r.GetRemovedResources()})
}
func (t *Tracker) OnFetchRequest(context.Context, *discovery.DiscoveryRequest) error         { return nil }
func (t *Tracker) OnFetchResponse(*discovery.DiscoveryRequest, *discovery.DiscoveryResponse) {}

// Busy tells whether config is on its way to a node (a response it has not answered, unless it has been
// unanswered for AckTimeout) or was sent to it within quiet: reading its stats then would hold the Envoy's
// main thread while it applies the config.
func (t *Tracker) Busy(node string, quiet time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for id := range t.byNode[node] {
		s := t.streams[id]
		if s == nil {
			continue
		}
		for ts := range s.types.all() {
			since := now.Sub(ts.sentAt)
			if since < quiet || (ts.Pending && since < t.ackTimeout()) {
				return true
			}
		}
	}
	return false
}

// Sending tells whether config is on its way to any Envoy: a response it has not answered yet, while the
// last was sent within AckTimeout (an Envoy that never answers does not keep it true). Cheap enough to ask
// often: work that can wait (summing up stats) steps aside for a change with it.
func (t *Tracker) Sending() bool {
	return t.pending.Load() > 0 && time.Since(time.Unix(0, t.lastSent.Load())) < t.ackTimeout()
}

// TargetVersion is the version a node is to be served under a cache key (xdscache.KeyFor: its group, or its
// group's gRPC profile): the key's target, or its side of a split.
func (t *Tracker) TargetVersion(key, node string) string {
	return t.cache.TargetFor(key, node).Version
}

// Targets returns the version each proxy group was last asked to serve.
func (t *Tracker) Targets() map[string]string { return t.cache.Targets() }

// Lagging waits, at most wait, until every Envoy of the groups has been given its group's config and has
// answered it, and returns the node ids of those that had not. Envoys that have left a response unanswered
// longer than AckTimeout are named without being waited for.
func (t *Tracker) Lagging(ctx context.Context, groups []string, wait time.Duration) []string {
	return t.cache.Lagging(ctx, groups, wait, t.ackTimeout())
}
