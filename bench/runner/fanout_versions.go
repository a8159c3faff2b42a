package main

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// The rows that push changes while clients come, go and move between replicas (-fanout-rebalance,
// -fanout-churn) follow every version each simulated client acknowledges. lbplane's versions are hashes of
// the content, not a sequence: the row numbers them by the changes it pushes (a change's version is read
// from the replica that took it, GET /v1/version, right after the push API answered), and a version no
// change made is a step between two (make-before-break) and is left out. A client has change k once it
// acknowledged the version of change k or of a later one.

// versionBook numbers the versions of a row's changes and reads, every collect, what each client
// acknowledged since: whether a client ever acknowledged an older change after a newer one (a version that
// went back), and for each change when every client that was connected when it was pushed had it.
//
// A book can also follow one policy's changes as the clients' clusters show them (policyBooks): its
// "versions" are then the policy's change numbers, read from the cluster each client acknowledged, so that
// changes of several policies can be pushed at once and each policy's are still in order.
type versionBook struct {
	// slot is the book's place in the swarm's books: each client's track for it is its tracks[slot].
	slot    int
	mu      sync.Mutex
	index   map[string]int // a version → the change that made it (0: the config before the first change)
	changes []changeRecord // [k]: change k; [0] the config the clients first got
	tracks  []*clientTrack // every client's, in the order they were made
	// grace: how long after it was acknowledged a version no change made is kept, in case its change's
	// version is not read yet; after that it is a step between two changes.
	grace time.Duration

	backwards   int // acknowledgements of an older change after a newer one, over every client
	backClients int // clients with at least one
	steps       int // acknowledgements of versions no change made
}

// changeRecord is one change as the book follows it.
type changeRecord struct {
	at int64 // unix ns the push was sent
	// failed: the push API refused it, or it made no new version (the config did not change): left out.
	failed bool
	// members: clients connected (with their first config) when it was pushed; done: those that had it;
	// leftWithout: those that left before they had it.
	members, done, leftWithout int
	slowest                    int64 // ns from at to the last member's having it
}

// clientTrack is one client's part of the book: what it acknowledged, and whether it left.
type clientTrack struct {
	mu   sync.Mutex
	log  []ackEntry // versions acknowledged since the last collect, each once when it differs from the last
	last string
	// left: the row ended it; exited: its goroutine is done (nothing more is logged).
	left, exited atomic.Bool

	// Under versionBook.mu: the first change it is a member of (0: none yet: it had no config when the
	// last change was pushed), and the first change it is not a member of again (0: it has not left).
	firstMember, leftMember int
	// collect's own: the newest change it had (-1: nothing read yet), the times it went back, whether its
	// departure is counted.
	has   int
	back  int
	final bool
}

type ackEntry struct {
	version string
	at      int64
}

func newVersionBook() *versionBook {
	return &versionBook{index: map[string]int{}, changes: make([]changeRecord, 1), grace: 10 * time.Second}
}

// acked logs a version the client is acknowledging.
func (t *clientTrack) acked(version string) {
	t.mu.Lock()
	if version != t.last {
		t.last = version
		t.log = append(t.log, ackEntry{version, time.Now().UnixNano()})
	}
	t.mu.Unlock()
}

func (b *versionBook) newTrack() *clientTrack {
	t := &clientTrack{has: -1}
	b.mu.Lock()
	b.tracks = append(b.tracks, t)
	b.mu.Unlock()
	return t
}

// member tells whether the client was connected, with its first config, when change k was pushed.
func (t *clientTrack) member(k int) bool {
	return t.firstMember != 0 && t.firstMember <= k && (t.leftMember == 0 || k < t.leftMember)
}

// initial names the version the clients' first config has (change 0).
func (b *versionBook) initial(version string) {
	b.mu.Lock()
	b.index[version] = 0
	b.mu.Unlock()
}

// begin opens change k, to be pushed now: every client ready since the last change is a member from k on,
// every client that left since is not.
func (b *versionBook) begin(states []*clientState) int {
	at := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	k := len(b.changes)
	members := 0
	for _, st := range states {
		t := b.trackOf(st)
		if t == nil {
			continue
		}
		if t.firstMember == 0 && st.ready.Load() {
			t.firstMember = k
		}
		if t.leftMember == 0 && t.left.Load() {
			t.leftMember = k
		}
		if t.member(k) {
			members++
		}
	}
	b.changes = append(b.changes, changeRecord{at: at, members: members})
	return k
}

// end closes the book's membership: the clients that left since the last change are members of no later
// one (what they never had of the earlier ones counts as left without it, not as missing).
func (b *versionBook) end(states []*clientState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := len(b.changes)
	for _, st := range states {
		if t := b.trackOf(st); t != nil && t.leftMember == 0 && t.left.Load() {
			t.leftMember = k
		}
	}
}

// trackOf is the client's track in this book (nil: it has none).
func (b *versionBook) trackOf(st *clientState) *clientTrack {
	if b.slot < len(st.tracks) {
		return st.tracks[b.slot]
	}
	return nil
}

// made records the version change k made; a version made before means the change changed nothing.
func (b *versionBook) made(k int, version string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.index[version]; ok || version == "" {
		b.changes[k].failed = true
		return
	}
	b.index[version] = k
}

// failed leaves change k out: the push was refused.
func (b *versionBook) failed(k int) {
	b.mu.Lock()
	b.changes[k].failed = true
	b.mu.Unlock()
}

// known is the change that made version, if the book knows it.
func (b *versionBook) known(version string) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.index[version]
	return k, ok
}

// collect reads what every client acknowledged since the last collect.
func (b *versionBook) collect() {
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.tracks {
		t.mu.Lock()
		log := t.log
		t.log = nil
		t.mu.Unlock()
		var rest []ackEntry
		for i, e := range log {
			k, ok := b.index[e.version]
			if !ok {
				if now-e.at < int64(b.grace) {
					rest = log[i:] // its change's version may not be read yet: next time
					break
				}
				b.steps++
				continue
			}
			b.had(t, k, e.at)
		}
		if len(rest) > 0 {
			t.mu.Lock()
			t.log = append(rest, t.log...)
			t.mu.Unlock()
			continue
		}
		// A client that left is counted, once everything it acknowledged is read, against the changes it was a
		// member of and never had.
		if !t.final && t.exited.Load() && t.leftMember != 0 {
			t.mu.Lock()
			drained := len(t.log) == 0
			t.mu.Unlock()
			if drained {
				t.final = true
				for j := max(t.has+1, 1); j < t.leftMember; j++ {
					if t.member(j) {
						b.changes[j].leftWithout++
					}
				}
			}
		}
	}
}

// had records that the client acknowledged change k's version at ns at.
func (b *versionBook) had(t *clientTrack, k int, at int64) {
	if t.has < 0 {
		// What it first had: it was a member of no change before its first config.
		if t.firstMember == 0 || t.firstMember > k {
			t.has = k
			return
		}
		t.has = t.firstMember - 1
	}
	switch {
	case k < t.has:
		if t.back == 0 {
			b.backClients++
		}
		t.back++
		b.backwards++
	default:
		for j := t.has + 1; j <= k; j++ {
			if t.member(j) {
				c := &b.changes[j]
				c.done++
				c.slowest = max(c.slowest, at-c.at)
			}
		}
		t.has = k
	}
}

// run collects every interval until ctx ends.
func (b *versionBook) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.collect()
		}
	}
}

// lastMade is the newest change not left out (0: none); call it once no push is under way.
func (b *versionBook) lastMade() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := len(b.changes) - 1; k > 0; k-- {
		if !b.changes[k].failed {
			return k
		}
	}
	return 0
}

// pushedAt is when change k was pushed.
func (b *versionBook) pushedAt(k int) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Unix(0, b.changes[k].at)
}

// complete tells whether every member of change k has it or has left.
func (b *versionBook) complete(k int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.changes[k]
	return c.done+c.leftWithout >= c.members
}

// bookResult is what the book read over a row.
type bookResult struct {
	// latencies: for each change every member had (or left without), ms from its push to the last member's
	// having it.
	latencies []float64
	pushed    []time.Time // when each of latencies' changes was pushed
	changes   int         // changes pushed and not left out
	failed    int         // left out: refused, or no new version
	// incomplete: changes some member never had (and did not leave); missing: those members, summed.
	incomplete, missing int
	members             int // members, summed over the changes
	leftWithout         int
	backwards           int
	backClients         int
	steps               int
}

func (b *versionBook) result() bookResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := bookResult{backwards: b.backwards, backClients: b.backClients, steps: b.steps}
	for _, c := range b.changes[1:] {
		if c.failed {
			r.failed++
			continue
		}
		r.changes++
		r.members += c.members
		r.leftWithout += c.leftWithout
		if miss := c.members - c.done - c.leftWithout; miss > 0 {
			r.incomplete++
			r.missing += miss
			continue
		}
		r.latencies = append(r.latencies, float64(c.slowest)/1e6)
		r.pushed = append(r.pushed, time.Unix(0, c.at))
	}
	return r
}

// between is the latencies of the changes pushed from from until to (zero: no bound).
func (r bookResult) between(from, to time.Time) []float64 {
	var out []float64
	for i, at := range r.pushed {
		if (from.IsZero() || !at.Before(from)) && (to.IsZero() || at.Before(to)) {
			out = append(out, r.latencies[i])
		}
	}
	return out
}

// trackerCheck reads, from the replicas' ACK trackers (GET /v1/proxies of each), the version each node's
// streams acknowledged, and tells whether a node ever acknowledged an older change than it had before: on
// one stream from one reading to the next, or on a stream that opened after another of the same node had
// acknowledged a newer one (a client's connections follow one another: everything acknowledged on an older
// stream was acknowledged before a newer stream opened).
type trackerCheck struct {
	nodes    map[string][]streamSeen
	readings int
}

type streamSeen struct {
	replica   int
	connected int64
	min, last int
	max       int
	decreases int
}

func (tc *trackerCheck) add(replica int, ps []apiwire.ProxyStatus, known func(string) (int, bool)) {
	if tc.nodes == nil {
		tc.nodes = map[string][]streamSeen{}
	}
	tc.readings++
	for _, p := range ps {
		k, ok := known(p.Version)
		if !ok {
			continue
		}
		c := p.ConnectedAt.UnixNano()
		ss := tc.nodes[p.NodeID]
		i := slices.IndexFunc(ss, func(s streamSeen) bool { return s.replica == replica && s.connected == c })
		if i < 0 {
			tc.nodes[p.NodeID] = append(ss, streamSeen{replica: replica, connected: c, min: k, last: k, max: k})
			continue
		}
		s := &ss[i]
		if k < s.last {
			s.decreases++
		}
		s.last, s.min, s.max = k, min(s.min, k), max(s.max, k)
	}
}

// backwards counts the streams that acknowledged an older change than their node had before, and the
// nodes with such a stream.
func (tc *trackerCheck) backwards() (streams, nodes int) {
	for _, ss := range tc.nodes {
		ss = slices.Clone(ss)
		slices.SortFunc(ss, func(a, b streamSeen) int { return cmp.Compare(a.connected, b.connected) })
		before, bad := -1, false
		for _, s := range ss {
			if s.decreases > 0 || s.min < before {
				streams++
				bad = true
			}
			before = max(before, s.max)
		}
		if bad {
			nodes++
		}
	}
	return streams, nodes
}

// streams is how many streams the readings saw, over every node.
func (tc *trackerCheck) streams() int {
	n := 0
	for _, ss := range tc.nodes {
		n += len(ss)
	}
	return n
}

// policyBooks follow the changes of several policies pushed at once, one book each (book p: policy p, whose
// cluster is clusters[p]). Their versions are the policies' change numbers, as the clients' clusters show
// them (a client's swarm tells its track p the connect timeout, in seconds, of each cluster p it
// acknowledges: change c of a policy sets it to c). lbplane's config versions cannot number such changes:
// of two pushes made at once, either may be stored first.
type policyBooks struct {
	books    []*versionBook
	clusters []string
}

// newPolicyBooks begins a book for each policy named, each at change 1 (connect timeout 1 s).
func newPolicyBooks(names []string) *policyBooks {
	pb := &policyBooks{}
	for p, name := range names {
		b := newVersionBook()
		b.slot = p
		b.initial("1")
		pb.books = append(pb.books, b)
		pb.clusters = append(pb.clusters, "default/"+name+"/app")
	}
	return pb
}

// finish closes every book's membership and waits, at most wait, until every book's last change is
// everywhere; it returns how long after its push the last of them was everywhere (-1: not within wait).
func (pb *policyBooks) finish(states []*clientState, wait time.Duration) float64 {
	var pushed time.Time
	for _, b := range pb.books {
		b.end(states)
		if last := b.lastMade(); last > 0 && b.pushedAt(last).After(pushed) {
			pushed = b.pushedAt(last)
		}
	}
	complete := func() bool {
		for _, b := range pb.books {
			b.collect()
			if last := b.lastMade(); last > 0 && !b.complete(last) {
				return false
			}
		}
		return true
	}
	took := -1.0
	if pollFor(wait, 100*time.Millisecond, complete) && !pushed.IsZero() {
		took = time.Since(pushed).Seconds()
	}
	for _, b := range pb.books {
		b.collect()
	}
	return took
}

// result is every book's, together: the changes of all policies, in the order of their books. A client
// that went back on two policies counts twice in backClients.
func (pb *policyBooks) result() bookResult {
	var r bookResult
	for _, b := range pb.books {
		x := b.result()
		r.latencies = append(r.latencies, x.latencies...)
		r.pushed = append(r.pushed, x.pushed...)
		r.changes += x.changes
		r.failed += x.failed
		r.incomplete += x.incomplete
		r.missing += x.missing
		r.members += x.members
		r.leftWithout += x.leftWithout
		r.backwards += x.backwards
		r.backClients += x.backClients
		r.steps += x.steps
	}
	return r
}
