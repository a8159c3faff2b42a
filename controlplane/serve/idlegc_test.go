package serve

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
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

// The loop collects once after a change, when the quiet has lasted and the garbage is over the share; never
// without a change, nor when the runtime's own collection left too little garbage.
func TestIdleGCCollectsOnceAfterAChange(t *testing.T) {
	const M = 1 << 20
	var mu sync.Mutex
	h := heapState{goal: 400 * M, live: 200 * M, heap: 350 * M}
	var busy atomic.Bool
	collected := make(chan time.Time, 10)
	read := func() heapState { mu.Lock(); defer mu.Unlock(); return h }
	collect := func() {
		mu.Lock()
		h.heap = h.live
		mu.Unlock()
		collected <- time.Now()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go runIdleGC(ctx, busy.Load, read, collect, slog.New(slog.NewTextHandler(io.Discard, nil)))
	none := func(why string) {
		t.Helper()
		select {
		case <-collected:
			t.Fatal(why)
		case <-time.After(idleGCQuiet + 3*idleGCTick):
		}
	}

	// No change: garbage over the share is left to the runtime.
	none("collected without a change")
	// A change, then quiet: one collection, not before idleGCQuiet.
	busy.Store(true)
	time.Sleep(3 * idleGCTick)
	busy.Store(false)
	quietFrom := time.Now()
	select {
	case at := <-collected:
		if at.Sub(quietFrom) < idleGCQuiet-idleGCTick {
			t.Errorf("collected %s after the change ended, before the quiet (%s)", at.Sub(quietFrom), idleGCQuiet)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no collection after a change")
	}
	mu.Lock()
	h.heap = 350 * M // garbage again, without a change since
	mu.Unlock()
	none("collected twice for one change")
	// A change during which the runtime collected by itself: too little garbage is left.
	busy.Store(true)
	time.Sleep(3 * idleGCTick)
	mu.Lock()
	h.heap = h.live + 20*M
	mu.Unlock()
	busy.Store(false)
	none("collected although the runtime's own collection left too little garbage")
}
