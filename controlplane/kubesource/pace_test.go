package kubesource

import (
	"testing"
	"time"
)

// The gap after a resync follows what it cost, so that a change no longer waits 100 ms behind a resync
// of 2 ms, while a costly resync still gathers what comes during the next gap.
func TestResyncGapFollowsTheCostOfTheLastResync(t *testing.T) {
	most := 100 * time.Millisecond
	for _, c := range []struct{ took, want time.Duration }{
		{0, minResyncGap},
		{100 * time.Microsecond, minResyncGap},
		{2 * time.Millisecond, 20 * time.Millisecond},
		{5 * time.Millisecond, 50 * time.Millisecond},
		{30 * time.Millisecond, most},
		{2 * time.Second, most}, // the first resync of 10,000 policies
	} {
		if got := resyncGap(c.took, most); got != c.want {
			t.Errorf("after a resync of %v: gap %v, want %v", c.took, got, c.want)
		}
	}
	if got := resyncGap(0, time.Millisecond); got != time.Millisecond {
		t.Errorf("a Debounce below the floor: gap %v, want the Debounce (1ms)", got)
	}
}
