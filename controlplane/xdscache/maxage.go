package xdscache

import (
	"math/rand/v2"
	"time"
)

// A maximum stream age spreads clients over replicas again: an Envoy keeps its xDS connection for as long
// as it lives, so the replicas that were up when a fleet connected keep it, and a replica that restarts
// gets back only the clients that happen to reconnect. Istio closes each connection after 30 minutes with
// gRPC's MaxConnectionAge, which sends GOAWAY on a timer and cuts the stream a grace period later, whatever
// is in flight. Here the cache decides, since it knows what each stream was sent and has answered: past its
// age a stream is given nothing new (publishes leave it on the step it is on; a request is answered from that
// step, as Envoy asks for the endpoints of a cluster it was just sent and holds some answers until that
// cluster warms, and parked when it holds everything of it), and it is handed to OnRetire only once every
// response it was sent has been answered. It then holds exactly what
// it acknowledged, and its reconnection says so: a delta stream resumes from its initial_resource_versions
// (only what changed since is sent); a state-of-the-world stream names the version it runs, and is sent
// clusters and listeners only if they changed since (see resumes), endpoints and routes once (Envoy
// compares each resource's hash and applies none that it already runs). A client that never answers is never cut
// by age (TCP keepalive finds one that vanished).

// ageJitter is the spread of a stream's age: MaxAge ±10 %.
const ageJitter = 0.1

// jittered returns d moved by up to ±ageJitter of it, at random.
func jittered(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*ageJitter*float64(d))
}

// startAge arms a new stream's age timer; c.mu is held.
func (c *Cache) startAge(st *streamState) {
	if c.MaxAge <= 0 || c.OnRetire == nil {
		return
	}
	st.ageTimer = time.AfterFunc(jittered(c.MaxAge), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if st.closed {
			return
		}
		st.retiring = true
		c.retire(st)
		c.touch(st)
	})
}

// retire hands a stream past its age to OnRetire once it has answered everything it was sent (and the
// server has told which stream it is); c.mu is held.
func (c *Cache) retire(st *streamState) {
	if !st.retiring || st.retired || st.closed || !st.bound || st.waiting() {
		return
	}
	st.retired = true
	if st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	go func() {
		if c.OnRetire(st.id) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if st.closed {
			return
		}
		// Not ended: it must not stay without config. It is given what it missed, and a new age.
		st.retiring, st.retired = false, false
		c.startAge(st)
		c.replan(st.group, st)
	}()
}
