package main

import "testing"

// A receipt tells which change it carries only if no two changes of a row (6,000 at 100/s for 60 s) and
// no first address share an address.
func TestChurnAddressesAreDistinct(t *testing.T) {
	seen := map[string]int{}
	for i := range 1000 {
		seen[churnFirstAddr(i)]++
	}
	for k := range 60000 {
		seen[churnAddr(k)]++
	}
	for a, n := range seen {
		if n > 1 {
			t.Fatalf("address %s used %d times", a, n)
		}
	}
}

func TestIncrementalRowsNeedOnlyEnvoy(t *testing.T) {
	for only, want := range map[string]bool{"churn": true, "coldstart,fanout": true, "controlplane,churn": true, "": false, "churn,dataplane": false} {
		if got := incrementalOnly(only); got != want {
			t.Errorf("incrementalOnly(%q) = %v, want %v", only, got, want)
		}
	}
}
