package explain

import "testing"

// The patterns compile on the first explain, not at start: a bad one must still fail a test, not a request.
func TestEveryRulePatternCompiles(t *testing.T) {
	ps := patterns()
	if len(ps) != len(rules) || len(rules) == 0 {
		t.Fatalf("%d patterns for %d rules", len(ps), len(rules))
	}
	for i, re := range ps {
		if re.String() != rules[i].src {
			t.Errorf("pattern %d is %q, rule says %q", i, re, rules[i].src)
		}
	}
}
