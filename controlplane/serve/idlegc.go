package serve

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"time"
)

// The collection between changes. With thousands of Envoys connected a replica's live heap is over a
// hundred megabytes (130 MB with 3,333), and a garbage collection of it takes 0.2-0.5 s of CPU. A change to
// every Envoy allocates about a tenth of the headroom the collector leaves, so about one change in ten met
// a collection, and on a small machine that change reached the last Envoy twice as late (measured: three
// replicas sharing a core, 10,000 clients, up to 1.1 s against 0.5 s). Collecting once the change has been
// answered, when the heap has used half its headroom, moves that cost to the quiet time between changes.
// Nothing is collected early without a change: idle work (stats reads) keeps the runtime's pace.
const (
	// idleGCQuiet is how long no change must have been made before collecting.
	idleGCQuiet = 500 * time.Millisecond
	// idleGCShare is the share of the headroom (goal - live) that must be garbage for a collection, and
	// idleGCMin the least garbage worth one: a small heap collects quickly wherever it falls.
	idleGCShare = 0.5
	idleGCMin   = 32 << 20
	// idleGCTick is how often the quiet and the heap are looked at.
	idleGCTick = 100 * time.Millisecond
)

// collectNow tells, from the runtime's heap goal, the live heap at the last collection and the heap now,
// whether enough garbage has piled up for the next change to likely meet a collection.
func collectNow(goal, live, heap uint64) bool {
	if goal <= live || heap <= live {
		return false
	}
	garbage := heap - live
	return garbage >= idleGCMin && float64(garbage) >= idleGCShare*float64(goal-live)
}

// heapState is what idleGC reads of the runtime: the heap goal, the live heap at the last collection and
// the heap now, garbage included.
type heapState struct{ goal, live, heap uint64 }

func readHeap() heapState {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return heapState{s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()}
}

// idleGC collects garbage between changes (see collectNow) until ctx ends. busy tells whether a change is
// being made (a push API request answered, or config on its way to an Envoy). After each change, once
// busy has been false for idleGCQuiet, it collects as soon as collectNow says so: at most once per change,
// whatever the runtime collected by itself meanwhile.
func idleGC(ctx context.Context, busy func() bool, log *slog.Logger) {
	t := time.NewTicker(idleGCTick)
	defer t.Stop()
	var c idleCollector
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
		if h, ok := c.tick(now, busy(), readHeap); ok {
			start := time.Now()
			runtime.GC()
			log.Debug("collected garbage between changes", "garbage MiB", (h.heap-h.live)>>20, "headroom MiB", (h.goal-h.live)>>20, "took", time.Since(start))
		}
	}
}

// idleCollector decides, tick by tick, when idleGC collects.
type idleCollector struct {
	armed bool      // a change was made since the last collection
	quiet time.Time // when a change was last seen
}

// tick looks at busy and, once quiet has lasted, the heap (read): it says whether to collect now, and
// what the heap was.
func (c *idleCollector) tick(now time.Time, busy bool, read func() heapState) (heapState, bool) {
	if busy {
		c.armed, c.quiet = true, now
		return heapState{}, false
	}
	if !c.armed || now.Sub(c.quiet) < idleGCQuiet {
		return heapState{}, false
	}
	h := read()
	if !collectNow(h.goal, h.live, h.heap) {
		return h, false
	}
	c.armed = false
	return h, true
}
