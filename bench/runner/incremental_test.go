package main

import (
	"fmt"
	"strings"
	"testing"
)

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
	for only, want := range map[string]bool{"churn": true, "coldstart,fanout": true, "fanout-replicas": true, "controlplane,churn": true, "gateway-routes": true, "": false, "churn,dataplane": false} {
		if got := incrementalOnly(only); got != want {
			t.Errorf("incrementalOnly(%q) = %v, want %v", only, got, want)
		}
	}
}

func TestFillersSpreadOverProxyGroups(t *testing.T) {
	old := *cpGroups
	t.Cleanup(func() { *cpGroups = old })
	*cpGroups = 3
	docs := string(fillers(0, 7, "8080"))
	for i, want := range []string{"", "g-1", "g-2", "", "g-1", "g-2", ""} {
		name := fmt.Sprintf("metadata: {name: f-%d}\nspec:\n", i)
		at := strings.Index(docs, name)
		if at < 0 {
			t.Fatalf("filler f-%d missing from:\n%s", i, docs)
		}
		rest := docs[at+len(name):]
		got := ""
		if strings.HasPrefix(rest, "  proxyGroup: ") {
			got = strings.TrimSpace(strings.SplitN(strings.TrimPrefix(rest, "  proxyGroup: "), "\n", 2)[0])
		}
		if got != want {
			t.Errorf("f-%d: proxyGroup %q, want %q", i, got, want)
		}
	}
	// The default group holds fillers 0, 3 and 6 of 7, and 0 and 3 of 5.
	if got := lastServed(7); got != 6 {
		t.Errorf("lastServed(7) = %d, want 6", got)
	}
	if got := lastServed(5); got != 3 {
		t.Errorf("lastServed(5) = %d, want 3", got)
	}
	*cpGroups = 1
	if got := lastServed(7); got != 6 {
		t.Errorf("one group: lastServed(7) = %d, want 6", got)
	}
	if strings.Contains(string(fillers(0, 7, "8080")), "proxyGroup") {
		t.Error("one group: a filler names a proxy group")
	}
	// The cold-start row's Envoy is g-0's: every policy names its group.
	cold := string(coldFillers(0, 3, 2))
	for i, want := range []string{"g-0", "g-1", "g-0"} {
		if s := fmt.Sprintf("metadata: {name: c-%d}\nspec:\n  proxyGroup: %s\n", i, want); !strings.Contains(cold, s) {
			t.Errorf("cold filler c-%d is not in %s:\n%s", i, want, cold)
		}
	}
	if strings.Contains(string(coldFillers(0, 3, 1)), "proxyGroup") {
		t.Error("cold, one group: a policy names a proxy group")
	}
}
