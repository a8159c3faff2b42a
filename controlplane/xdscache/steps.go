package xdscache

import (
	"context"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Make-before-break, stream by stream. A publish gives each stream of the group the steps from the state it
// holds to the new one (see plan): clusters and endpoints first, then listeners and routes, removals last.
// A stream is given its next step once it has answered every response of the one it is on, or once
// StepTimeout has passed; it never waits for another stream. (The steps used to be the group's, each waiting
// for every Envoy of the group to acknowledge the last: one client that acknowledged late paced every Envoy
// of its group.) Streams that hold the same state share one plan, so a publish still costs one plan for a
// fleet that is in step.

// StreamID names an xDS stream as the server's callbacks number it: go-control-plane numbers
// state-of-the-world and delta streams separately, both from 1.
type StreamID struct {
	Delta bool
	ID    int64
}

// NumTypes is len(Types): arrays indexed by a type's place in Types.
const NumTypes = 6

func init() {
	if len(Types) != NumTypes {
		panic("xdscache: NumTypes must be len(Types)")
	}
}

// streamState is one stream: where it stands in its steps, its open watches and its unanswered responses.
type streamState struct {
	key   any // the stream's response channel: the server gives every watch of a stream the same one
	id    StreamID
	bound bool // id is known (the server reported the stream through Callbacks)
	group *group
	// plan are the steps towards the group's target, at the one the stream is served; seq counts the steps
	// given, so that a step timer knows whether it still applies.
	plan []*State
	at   int
	seq  uint64
	// since is when the step was given; timer gives the next one after StepTimeout.
	since time.Time
	timer *time.Timer
	sotw  [NumTypes]*sotwWatch
	delta [NumTypes]*deltaWatch
	// outstanding are the types with a response not answered yet; nonces the nonce the server last sent
	// each type with ("" when the server did not say: then any request of the type answers it).
	outstanding [NumTypes]bool
	sentAt      [NumTypes]time.Time
	nonces      [NumTypes]string
	// node is the node id of the stream's first request.
	node   string
	closed bool
	// retiring is set once the stream is past its maximum age (Cache.MaxAge): it is given nothing new;
	// retired once it was handed to Cache.OnRetire. ageTimer sets retiring.
	retiring, retired bool
	ageTimer          *time.Timer
}

// served is the state the stream is given now.
func (st *streamState) served() *State { return st.plan[st.at] }

func (st *streamState) sent(typ int) {
	if typ >= 0 {
		st.outstanding[typ], st.sentAt[typ] = true, time.Now()
	}
}

func (st *streamState) waiting() bool {
	return slices.Contains(st.outstanding[:], true)
}

// stream returns the stream a request came on, made when it is new (it starts at the group's target: it
// holds nothing of this stream yet), and records what the request answers; c.mu is held.
func (c *Cache) stream(req any, ch any, node *corev3.Node, typeURL, nonce string) *streamState {
	g := c.group(ServedKey(node))
	st := c.streams[ch]
	if st == nil && !g.published && c.OnGRPCClient != nil {
		if group, ok := profileGroup(g.name); ok {
			g.published = true // asked for once; the publish that answers sets it again
			go c.OnGRPCClient(group)
		}
	}
	switch {
	case st == nil:
		st = &streamState{key: ch, group: g, plan: []*State{g.targetFor(node.GetId())}, node: node.GetId()}
		c.streams[ch] = st
		g.streams[st] = struct{}{}
		c.startAge(st)
	case st.group != g:
		// A node cannot change its group on a stream it authenticated for; without mTLS it may, and then
		// it starts over in the new group.
		delete(st.group.streams, st)
		st.group, st.plan, st.at = g, []*State{g.targetFor(st.node)}, 0
		st.seq++
		g.streams[st] = struct{}{}
	}
	if id, ok := c.bind[req]; ok {
		delete(c.bind, req)
		delete(c.last, id)
		if !st.bound {
			st.id, st.bound = id, true
			c.byID[id] = st
		}
	}
	if typ := slices.Index(Types, typeURL); typ >= 0 && st.outstanding[typ] && (st.nonces[typ] == "" || st.nonces[typ] == nonce) {
		st.outstanding[typ] = false
	}
	c.touch(st)
	return st
}

// replan gives a stream the steps of its group's newest publish, from the state it is served; c.mu is held.
// A stream past its age stays on the step it is on (see maxage.go): what it asks is answered from that step.
func (c *Cache) replan(g *group, st *streamState) {
	if st.retiring {
		return
	}
	st.plan, st.at = c.planFrom(g, st.served(), g.targetFor(st.node)), 0
	c.serve(st)
	c.step(st)
}

// step gives a stream its next steps while it has answered everything of the one it is on, and keeps a
// timer for the one it waits on; c.mu is held.
func (c *Cache) step(st *streamState) {
	defer c.touch(st)
	if st.retiring {
		c.retire(st)
		return
	}
	for st.at < len(st.plan)-1 && !st.waiting() {
		st.at++
		c.serve(st)
	}
	if st.at == len(st.plan)-1 {
		if st.at > 0 {
			// Done: the earlier steps need not stay alive.
			st.plan, st.at = st.plan[st.at:], 0
		}
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
		return
	}
	if st.timer != nil {
		st.timer.Stop()
	}
	seq := st.seq
	st.timer = time.AfterFunc(time.Until(st.since.Add(c.StepTimeout)), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if st.closed || st.retiring || st.seq != seq || st.at >= len(st.plan)-1 {
			return
		}
		// It has not answered in time: go on without it, as one that is stuck must not keep its own
		// config back forever. What it has not answered is answered from the newest step once it asks.
		st.at++
		c.serve(st)
		c.step(st)
	})
}

// serve answers a stream's open watches from the step it is now on, in Types order: the server sends
// them together, and gRPC writes them to the connection in one system call (see
// bench/results/2026-11-23-vm-incremental section 5.6). The server's channels hold one response per type,
// so sending under the lock never blocks. c.mu is held.
func (c *Cache) serve(st *streamState) {
	if st.retiring {
		return
	}
	s := st.served()
	st.seq++
	st.since = time.Now()
	for typ := range NumTypes {
		if w := st.sotw[typ]; w != nil {
			if resp := sotwResponse(s, w.req, w.sub, false); resp != nil {
				w.ch <- resp
				st.sotw[typ] = nil
				st.sent(typ)
			}
		}
		if w := st.delta[typ]; w != nil {
			if resp := deltaResponse(s, &st.group.links, w.req, w.sub); resp != nil {
				w.ch <- resp
				st.delta[typ] = nil
				st.sent(typ)
			}
		}
	}
}

// BindRequest records which stream a request came on, for CreateWatch; only the stream's newest request
// is kept (the server skips some requests without a watch).
func (c *Cache) BindRequest(id StreamID, req any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.last[id]; ok {
		delete(c.bind, old)
	}
	c.bind[req], c.last[id] = id, req
}

// responded records the nonce a stream was sent a type's response with.
func (c *Cache) Responded(id StreamID, typeURL, nonce string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.byID[id]; st != nil {
		if typ := slices.Index(Types, typeURL); typ >= 0 {
			st.nonces[typ] = nonce
		}
	}
}

// CloseStream forgets a stream.
func (c *Cache) CloseStream(id StreamID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req, ok := c.last[id]; ok {
		delete(c.bind, req)
		delete(c.last, id)
	}
	st := c.byID[id]
	if st == nil {
		return
	}
	delete(c.byID, id)
	delete(c.streams, st.key)
	delete(st.group.streams, st)
	st.closed = true
	if st.timer != nil {
		st.timer.Stop()
	}
	if st.ageTimer != nil {
		st.ageTimer.Stop()
	}
	c.touch(st)
}

// Lagging waits, at most wait, until every stream of the groups has been given its group's target and has
// answered (ACK or NACK) every response it was sent, and returns the node ids of the streams that had not,
// sorted. A stream that has left a response unanswered longer than unresponsive is not waited for (it is
// named): one client that does not answer must not hold back the reply to a push. It looks at every stream
// of the groups once, then only at the streams that changed.
func (c *Cache) Lagging(ctx context.Context, groups []string, wait, unresponsive time.Duration) []string {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// A group's gRPC clients are served its gRPC profile, published with it.
	for _, name := range slices.Clone(groups) {
		groups = append(groups, GRPCKey(name))
	}
	w := &waiter{dirty: map[*streamState]struct{}{}, wake: make(chan struct{}, 1)}
	behind := map[*streamState]bool{} // true: waited for
	var next time.Time                // the earliest a waited-for stream turns unresponsive
	check := func(st *streamState, now time.Time) {
		if st.closed || !slices.Contains(groups, st.group.name) || st.given() {
			delete(behind, st)
			return
		}
		oldest := st.oldestOutstanding()
		waitFor := oldest.IsZero() || now.Sub(oldest) < unresponsive
		behind[st] = waitFor
		if waitFor && !oldest.IsZero() {
			if until := oldest.Add(unresponsive); next.IsZero() || until.Before(next) {
				next = until
			}
		}
	}
	c.mu.Lock()
	now := time.Now()
	for _, name := range groups {
		if g, ok := c.groups[name]; ok {
			for st := range g.streams {
				check(st, now)
			}
		}
	}
	c.waiters[w] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, w)
		c.mu.Unlock()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		waiting := false
		for _, waitFor := range behind {
			waiting = waiting || waitFor
		}
		if !waiting {
			break
		}
		timer.Reset(time.Hour)
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
		case <-w.wake:
			c.mu.Lock()
			now := time.Now()
			for st := range w.dirty {
				check(st, now)
			}
			clear(w.dirty)
			c.mu.Unlock()
			continue
		case <-timer.C:
			c.mu.Lock()
			now, next = time.Now(), time.Time{}
			for st := range behind {
				check(st, now)
			}
			c.mu.Unlock()
			continue
		}
		break
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for st := range behind {
		// Looked at again: a stream may have answered while the wait ended.
		if !st.closed && !st.given() {
			out = append(out, st.node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// waiter is one Lagging call: the streams changed since it last looked, and its wake-up.
type waiter struct {
	dirty map[*streamState]struct{}
	wake  chan struct{}
}

// touch tells the waiters that a stream changed; c.mu is held.
func (c *Cache) touch(st *streamState) {
	for w := range c.waiters {
		w.dirty[st] = struct{}{}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// given tells whether the stream has its target (its group's, or its side of a split) and has answered
// everything it was sent. Versions are compared, not states: a plan's last step may be a union with the
// same content as the target (a change that removes nothing), which is the target all the same.
func (st *streamState) given() bool {
	return st.served().Version == st.group.targetFor(st.node).Version && !st.waiting()
}

// oldestOutstanding is when the oldest unanswered response was sent; zero when none is.
func (st *streamState) oldestOutstanding() time.Time {
	var t time.Time
	for typ, out := range st.outstanding {
		if out && (t.IsZero() || st.sentAt[typ].Before(t)) {
			t = st.sentAt[typ]
		}
	}
	return t
}
