package pushapi

import (
	"runtime/debug"
	"sync"
	"time"
)

// A request refused for its size (over MaxBodyBytes, or more than manifest.MaxDocuments documents) has
// already been read: its body, up to 8 MiB, is garbage once it is answered. The runtime would keep that
// memory for later allocations, and lbplane's RSS would show the last bomb until then; instead it is given
// back to the system, in the background, at most once every releaseEvery (a forced collection costs a pass
// over the live heap: refusals must not become a way to make lbplane spend its CPU on them), and within
// releaseEvery of the last refusal.
const (
	releaseAbove = 1 << 20
	releaseEvery = 10 * time.Second
)

var release struct {
	sync.Mutex
	last    time.Time
	pending bool
}

// releaseRefused gives the memory of a refused request of n bytes back to the system.
func releaseRefused(n int) {
	if n < releaseAbove {
		return
	}
	release.Lock()
	defer release.Unlock()
	if release.pending {
		return // the release already planned comes after this request
	}
	release.pending = true
	time.AfterFunc(max(time.Until(release.last.Add(releaseEvery)), 0), func() {
		debug.FreeOSMemory()
		release.Lock()
		release.last, release.pending = time.Now(), false
		release.Unlock()
	})
}
