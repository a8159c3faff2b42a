package proxystats

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
)

// The /clusters filters cover every cluster once, each at most max clusters, whatever the names share.
func TestPrefixFiltersCoverEveryNameOnceInSlices(t *testing.T) {
	cases := map[string][]string{
		"one policy":                   {"default/p/app"},
		"none":                         nil,
		"a name is a prefix of others": {"a/b/c", "a/b/c2", "a/b/c20", "a/b/c3"},
		"metacharacters":               {"ns/a.b/x", "ns/a+b/x", "ns/a[b]/x", "ns/a(b)/x", "ns/a|b/x", "ns/a*b/x"},
	}
	var fill []string
	for i := range 2345 {
		fill = append(fill, fmt.Sprintf("default/f-%d/app", i))
	}
	for i := range 300 {
		fill = append(fill, fmt.Sprintf("team-%d/api/v%d", i%7, i))
	}
	cases["a fill of 2,645 policies"] = fill
	for name, names := range cases {
		t.Run(name, func(t *testing.T) {
			names = slices.Clone(names)
			slices.Sort(names)
			const max = 100
			filters := prefixFilters(names, max)
			if len(names) > 0 && len(filters) < (len(names)+max-1)/max {
				t.Errorf("%d filters for %d names, want at least %d", len(filters), len(names), (len(names)+max-1)/max)
			}
			matched := map[string]int{}
			for _, f := range filters {
				re, err := regexp.Compile(f)
				if err != nil {
					t.Fatalf("filter %q: %v", f, err)
				}
				n := 0
				for _, name := range names {
					if re.MatchString(name) {
						matched[name]++
						n++
					}
				}
				if n > max {
					t.Errorf("filter %q matches %d names, want at most %d", f, n, max)
				}
				for _, other := range []string{"xds_cluster", "lbplane_admin", ""} {
					if re.MatchString(other) && len(names) > 0 {
						t.Errorf("filter %q matches %q, which is not lbplane's", f, other)
					}
				}
			}
			for _, name := range names {
				if matched[name] != 1 {
					t.Errorf("%q matched by %d filters, want 1", name, matched[name])
				}
			}
			if len(names) > 0 && len(filters) > 3*len(names)/max+3 {
				t.Errorf("%d filters for %d names: slices far below the size asked for", len(filters), len(names))
			}
		})
	}
}
