package kubesource

import "time"

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
