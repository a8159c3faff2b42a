package serve

import (
	"fmt"
	"testing"
	"time"
)

func TestCollectNowWhenMostOfTheHeadroomIsGarbage(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		name             string
		goal, live, heap uint64
		want             bool
	}{
		{"fresh after a collection", 400 * M, 200 * M, 200 * M, false},
		{"a fifth of the headroom", 400 * M, 200 * M, 240 * M, false},
		{"more than half of the headroom", 400 * M, 200 * M, 310 * M, true},
		{"a small heap: its collection is quick wherever it falls", 40 * M, 20 * M, 35 * M, false},
		{"nothing known yet", 0, 0, 0, false},
	} {
		if got := collectNow(tc.goal, tc.live, tc.heap); got != tc.want {
			t.Errorf("%s: collectNow(%d, %d, %d MiB) = %v, want %v", tc.name, tc.goal/M, tc.live/M, tc.heap/M, got, tc.want)
		}
	}
}

// A collection comes once after a change, when the quiet has lasted and the garbage is over the share;
// never without a change, nor when the runtime's own collection left too little garbage.
func TestIdleGCCollectsOnceAfterAChange(t *testing.T) {
	const M = 1 << 20
	h := heapState{goal: 400 * M, live: 200 * M, heap: 350 * M}
	var c idleCollector
	clock := time.Unix(1000, 0)
	collections := 0
	tick := func(busy bool) {
		clock = clock.Add(idleGCTick)
		if _, ok := c.tick(clock, busy, func() heapState { return h }); ok {
			collections++
			h.heap = h.live
		}
	}
	collected := func(want int, why string) {
		t.Helper()
		if collections != want {
			t.Fatalf("%s: %d collections, want %d", why, collections, want)
		}
	}

	// No change: garbage over the share is left to the runtime.
	for range 10 {
		tick(false)
	}
	collected(0, "no change")
	// A change, then quiet: one collection, once idleGCQuiet has passed since the change was last seen.
	tick(true)
	changeSeen := clock
	for clock.Add(idleGCTick).Sub(changeSeen) < idleGCQuiet {
		tick(false)
		collected(0, fmt.Sprintf("%s after the change", clock.Sub(changeSeen)))
	}
	tick(false)
	collected(1, fmt.Sprintf("%s after the change", clock.Sub(changeSeen)))
	// Garbage again without a change since: nothing.
	h.heap = 350 * M
	for range 10 {
		tick(false)
	}
	collected(1, "garbage without a new change")
	// A change after which the runtime collected by itself: too little garbage is left.
	tick(true)
	h.heap = h.live + 20*M
	for range 10 {
		tick(false)
	}
	collected(1, "a change after which the runtime's own collection left too little garbage")
	// More garbage, still after that change: collected.
	h.heap = 350 * M
	tick(false)
	collected(2, "garbage over the share after the last change")
}
