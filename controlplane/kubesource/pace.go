package kubesource

import (
	"context"
	"time"
)

// Resyncs are spaced in proportion to what they cost. A fixed least gap (100 ms) was chosen when a resync
// re-read and re-translated every policy; an incremental resync costs 1–3 ms, and at 100 EndpointSlice
// writes a second the fixed gap made each change wait up to 100 ms for the next resync (most of the churn
// lag the benchmark measured). Spacing by cost keeps the share of a core the resync loop may take bounded
// whatever the rate of events, and still gathers a burst: the more a resync costs, the more the next one
// gathers.
const (
	// resyncGapFactor bounds the resync loop to about 1/(resyncGapFactor+1) of a core under a constant
	// stream of events.
	resyncGapFactor = 10
	// minResyncGap gathers the events of one write (an EndpointSlice and its Service, a policy and the
	// Secret it names) that arrive a few milliseconds apart, and bounds the rate of resyncs that cost
	// almost nothing.
	minResyncGap = 5 * time.Millisecond
)

// resyncGap is the least time between the end of a resync that lasted took and the start of the next:
// resyncGapFactor times took, within [minResyncGap, most]. most (Source.Debounce) is the longest a change
// may wait behind the previous resync.
func resyncGap(took, most time.Duration) time.Duration {
	gap := resyncGapFactor * took
	if gap > most {
		gap = most
	}
	if gap < minResyncGap {
		gap = min(minResyncGap, most)
	}
	return gap
}

// DefaultEndpointInterval is Source.EndpointInterval's default: at most 20 versions a second under a storm
// of endpoint changes.
const DefaultEndpointInterval = 50 * time.Millisecond

// pace waits before a resync whose trigger came: a lone change goes out at once, a burst is gathered into
// resyncs spaced by what they cost (see resyncGap), and changes of endpoints alone wait until
// EndpointInterval after the last resync. (A fixed wait before every resync made each single kubectl apply
// take that long more to reach Envoy: 100 ms of the 104 ms the benchmark measured.) A change of another
// kind that comes during the longer wait ends it. took is what the last resync took, last when it ended;
// false when ctx ended.
func (s *Source) pace(ctx context.Context, took time.Duration, last time.Time) bool {
	for {
		wait := resyncGap(took, s.Debounce) - time.Since(last)
		if s.EndpointInterval > 0 && s.known.endpointsOnly() {
			wait = max(wait, s.EndpointInterval-time.Since(last))
		}
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
			// What came meanwhile is taken by this resync.
			select {
			case <-s.trigger:
			default:
			}
			return true
		case <-s.trigger:
			t.Stop() // a change came: look again, it may not wait as long
		}
	}
}
