package translate

import (
	"testing"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// TestDefaultEjectionCap: with backups, every primary can be ejected under Envoy's cluster-wide count
// (ejected, the new one included, x 100 / endpoints <= cap), and the last endpoint never is.
func TestDefaultEjectionCap(t *testing.T) {
	for _, c := range []struct{ primaries, backups int }{{1, 0}, {2, 0}, {5, 0}, {1, 1}, {2, 1}, {3, 1}, {1, 2}, {2, 3}, {7, 2}, {99, 1}, {150, 1}} {
		var eps []ir.Endpoint
		for i := 0; i < c.primaries+c.backups; i++ {
			eps = append(eps, ir.Endpoint{Backup: i >= c.primaries})
		}
		got := defaultEjectionCap(eps)
		n := len(eps)
		ejectable := func(k int) bool { return float64(100*k)/float64(n) <= float64(got) }
		if c.backups == 0 {
			if got != 50 {
				t.Errorf("%+v: cap %d, want 50 without backups", c, got)
			}
			continue
		}
		if got < 50 || got > 99 {
			t.Errorf("%+v: cap %d outside 50..99", c, got)
		}
		if n <= 100 && (!ejectable(c.primaries) || ejectable(n)) {
			t.Errorf("%+v: cap %d: all %d primaries ejectable %v, all %d endpoints ejectable %v; want true, false",
				c, got, c.primaries, ejectable(c.primaries), n, ejectable(n))
		}
	}
}
