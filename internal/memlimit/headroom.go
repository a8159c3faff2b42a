package memlimit

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Go's collector lets the heap grow to twice what was live at the last collection (GOGC=100) before the
// next one. That suits a heap of short-lived garbage; lbplane's large heaps are the other kind: at 100,000
// policies 540 MB (push API) or more (Kubernetes) is live and stays live, the policies, their translation and
// the bytes served, while a change leaves a few megabytes of garbage. Doubling it made the process 1.1 to
// 1.9 GiB to hold a few megabytes of garbage between collections.
//
// Pace bounds that headroom instead: after each collection the next is set for when the heap has grown by
// headroom bytes, or by MinPercent (a fifth) of the live heap when that is more (a collection costs CPU in
// proportion to the live heap, so a huge heap keeps a share of it), and never later than Go's default. A
// heap smaller than headroom is paced as Go paces it. The price is CPU: at 100,000 policies from the push
// API, 9.0 ms per change against 4.2 at Go's pace, for 878 MiB of RSS against 1,280
// (bench/results/2026-11-30-vm-fleet).
const (
	// MinPercent is the least headroom, as a share of the live heap, that Pace leaves.
	MinPercent = 20
	// DefaultHeadroom is lbplane serve's --gc-headroom-mib.
	DefaultHeadroom = 128 << 20
)

// percent is the GOGC that gives a live heap of live bytes headroom bytes to grow by.
func percent(live, headroom uint64) int {
	if live == 0 {
		return 100
	}
	return int(max(MinPercent, min(100, headroom*100/live)))
}

// pacing is the percent last set, so that an unchanged one is not set again.
var pacing atomic.Int64

// Pace starts pacing the collector with headroom bytes (see above), unless headroom is 0 or GOGC says
// otherwise (the operator's setting wins). It runs once per collection, after it, on the finalizer
// goroutine, for the life of the process.
func Pace(headroom uint64, log *slog.Logger) {
	if headroom == 0 || os.Getenv("GOGC") != "" {
		return
	}
	pacing.Store(100)
	log.Info("collector paced: the next collection once the heap has grown by the headroom, or a fifth of the live heap when that is more (GOGC overrides)",
		"headroom_bytes", headroom)
	arm(headroom)
}

// sentinel is garbage at once; its finalizer runs after the collection that finds it.
type sentinel struct{ _ *int }

func arm(headroom uint64) {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		if p := percent(s[0].Value.Uint64(), headroom); int64(p) != pacing.Load() {
			pacing.Store(int64(p))
			debug.SetGCPercent(p)
		}
		arm(headroom)
	})
}
