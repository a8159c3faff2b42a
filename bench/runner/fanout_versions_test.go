package main

import (
	"slices"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// The book numbers versions by the changes that made them: a client that has a newer change and then
// acknowledges an older one went back; a change is everywhere once every client connected when it was
// pushed has it or a later one; a client that leaves first is left out of it; a version no change made is
// a step and left out.
func TestVersionBook(t *testing.T) {
	b := newVersionBook()
	b.grace = -time.Hour // the entries below are stamped after now: none waits for its change's version
	b.initial("v0")
	states := make([]*clientState, 3)
	for i := range states {
		states[i] = &clientState{tracks: []*clientTrack{b.newTrack()}}
		states[i].ready.Store(true)
	}
	for _, st := range states {
		st.tracks[0].acked("v0")
	}
	b.collect()
	k1 := b.begin(states)
	b.made(k1, "v1")
	k2 := b.begin(states)
	b.made(k2, "v2")
	at := func(st *clientState, version string, ms int64) {
		st.tracks[0].log = append(st.tracks[0].log, ackEntry{version, b.changes[k1].at + ms*1e6})
	}
	at(states[0], "step", 5)
	at(states[0], "v1", 10)
	at(states[0], "v2", 30)
	at(states[1], "v2", 50) // straight to the newer one: it has both
	at(states[1], "v1", 60) // and back
	states[2].tracks[0].left.Store(true)
	states[2].tracks[0].exited.Store(true)
	k3 := b.begin(states) // client 2 is not a member of change 3
	b.made(k3, "v3")
	for _, st := range states[:2] {
		at(st, "v3", 100)
	}
	b.collect()
	r := b.result()
	if r.changes != 3 || r.incomplete != 0 {
		t.Fatalf("%d changes, %d not everywhere; want 3 and 0: %+v", r.changes, r.incomplete, r)
	}
	if r.backwards != 1 || r.backClients != 1 {
		t.Errorf("went back %d times by %d clients; want once by one", r.backwards, r.backClients)
	}
	if r.steps != 1 {
		t.Errorf("%d step versions; want 1", r.steps)
	}
	if r.leftWithout != 2 {
		t.Errorf("%d left without a change; want 2 (client 2 had neither change 1 nor 2)", r.leftWithout)
	}
	// Change 1: client 0 at 10 ms, client 1 at 50 ms; change 3: both at 100 ms after change 1's push.
	want := []float64{50, 50 - float64(b.changes[k2].at-b.changes[k1].at)/1e6, 100 - float64(b.changes[k3].at-b.changes[k1].at)/1e6}
	for i := range want {
		if d := r.latencies[i] - want[i]; d > 1e-6 || d < -1e-6 {
			t.Errorf("change %d everywhere after %.3f ms; want %.3f", i+1, r.latencies[i], want[i])
		}
	}
	// A change some member never has is not everywhere.
	k4 := b.begin(states)
	b.made(k4, "v4")
	at(states[0], "v4", 200)
	b.collect()
	if r := b.result(); r.incomplete != 1 || r.missing != 1 {
		t.Errorf("%d changes not everywhere, %d clients short; want 1 and 1", r.incomplete, r.missing)
	}
}

// A client that leaves after the last change was pushed counts against the changes it never had as one
// that left, not as one they never reached, once the book is closed.
func TestVersionBookEnd(t *testing.T) {
	b := newVersionBook()
	b.grace = -time.Hour
	b.initial("v0")
	states := []*clientState{{tracks: []*clientTrack{b.newTrack()}}, {tracks: []*clientTrack{b.newTrack()}}}
	for _, st := range states {
		st.ready.Store(true)
		st.tracks[0].acked("v0")
	}
	b.collect()
	k := b.begin(states)
	b.made(k, "v1")
	states[0].tracks[0].acked("v1")
	states[1].tracks[0].left.Store(true)
	states[1].tracks[0].exited.Store(true)
	if b.collect(); b.complete(k) {
		t.Fatal("change 1 complete before the book knows client 1 left")
	}
	b.end(states)
	if b.collect(); !b.complete(k) {
		t.Fatal("change 1 not complete once client 1's leaving is counted")
	}
	if r := b.result(); r.incomplete != 0 || r.leftWithout != 1 || b.lastMade() != k {
		t.Errorf("%+v, last made %d; want every change complete, one client left without it, and change %d the last", r, b.lastMade(), k)
	}
}

// The ACK trackers' readings: a stream that acknowledges an older change than one its node had on an
// earlier stream went back; one that only moves forward, or a node's older stream still listed beside its
// newer one, did not.
func TestTrackerCheck(t *testing.T) {
	versions := map[string]int{"v1": 1, "v2": 2, "v3": 3}
	known := func(v string) (int, bool) { k, ok := versions[v]; return k, ok }
	t0 := time.Unix(1000, 0)
	var tc trackerCheck
	reading := func(replica int, ps ...[3]any) {
		var list []apiwire.ProxyStatus
		for _, p := range ps {
			list = append(list, apiwire.ProxyStatus{NodeID: p[0].(string), ConnectedAt: t0.Add(time.Duration(p[1].(int)) * time.Second), Version: p[2].(string)})
		}
		tc.add(replica, list, known)
	}
	reading(0, [3]any{"a", 0, "v1"}, [3]any{"b", 0, "v2"})
	reading(0, [3]any{"a", 0, "v2"}, [3]any{"b", 0, "v2"})
	reading(1, [3]any{"a", 5, "v2"}, [3]any{"b", 5, "v1"}) // b's new stream has an older change than b had
	reading(0, [3]any{"a", 0, "v2"})                       // a's old stream, still listed
	reading(1, [3]any{"a", 5, "v3"}, [3]any{"b", 5, "unknown"})
	streams, nodes := tc.backwards()
	if streams != 1 || nodes != 1 {
		t.Fatalf("%d streams of %d nodes went back; want 1 of 1", streams, nodes)
	}
	if n := tc.streams(); n != 4 {
		t.Errorf("%d streams seen; want 4", n)
	}
}

// Two policies changed at once: each book follows its policy's change numbers from the clusters the
// clients acknowledge, whichever policy's change was stored first; a client that has a newer change of one
// policy and an older of the other went back in neither. A cluster number going down is going back.
func TestPolicyBooks(t *testing.T) {
	pb := newPolicyBooks([]string{"probe", "probe-1"})
	if want := []string{"default/probe/app", "default/probe-1/app"}; !slices.Equal(pb.clusters, want) {
		t.Fatalf("clusters %v; want %v", pb.clusters, want)
	}
	for _, b := range pb.books {
		b.grace = -time.Hour
	}
	states := make([]*clientState, 2)
	for i := range states {
		states[i] = &clientState{}
		for _, b := range pb.books {
			states[i].tracks = append(states[i].tracks, b.newTrack())
		}
		states[i].ready.Store(true)
		for _, tr := range states[i].tracks {
			tr.acked("1")
		}
	}
	for _, b := range pb.books {
		b.collect()
	}
	a, b := pb.books[0], pb.books[1]
	ka := a.begin(states)
	a.made(ka, "2")
	kb := b.begin(states)
	b.made(kb, "2")
	at := func(st *clientState, p int, n string, ms int64) {
		st.tracks[p].log = append(st.tracks[p].log, ackEntry{n, pb.books[0].changes[ka].at + ms*1e6})
	}
	// Client 0 gets policy 1's change first, client 1 policy 0's: neither goes back.
	at(states[0], 1, "2", 10)
	at(states[0], 0, "2", 20)
	at(states[1], 0, "2", 30)
	at(states[1], 1, "2", 40)
	if took := pb.finish(states, time.Second); took < 0 {
		t.Fatal("the last change never everywhere")
	}
	r := pb.result()
	if r.changes != 2 || r.incomplete != 0 || r.backwards != 0 {
		t.Fatalf("%+v; want 2 changes, each everywhere, none back", r)
	}
	if d := r.latencies[0] - 30; d > 1e-6 || d < -1e-6 {
		t.Errorf("policy 0's change everywhere after %.3f ms; want 30", r.latencies[0])
	}
	// Policy 1's cluster going back to change 1 at a client is going back.
	at(states[0], 1, "1", 50)
	b.collect()
	if r := pb.result(); r.backwards != 1 || r.backClients != 1 {
		t.Errorf("went back %d times by %d clients; want once by one", r.backwards, r.backClients)
	}
}
