package xdscache

import (
	"testing"
	"time"
)

// Streams opened together (a fleet after a replica's restart) end spread over MaxAge ±10 %, never outside.
func TestStreamAgesAreSpreadTenPercentEitherWay(t *testing.T) {
	const d = 30 * time.Minute
	lo, hi := d, d
	for range 2000 {
		j := jittered(d)
		if j < d-d/10 || j > d+d/10 {
			t.Fatalf("jittered(%s) = %s, outside ±10 %%", d, j)
		}
		lo, hi = min(lo, j), max(hi, j)
	}
	// 2,000 draws from a uniform spread cover most of it; all in one minute would be no spread at all.
	if lo > d-d/20 || hi < d+d/20 {
		t.Fatalf("2,000 ages spread over [%s, %s] only; want most of [%s, %s]", lo, hi, d-d/10, d+d/10)
	}
}
