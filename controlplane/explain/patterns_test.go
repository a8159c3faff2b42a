package explain

import (
	"slices"
	"strings"
	"testing"
)

// Every rule names a policy field in the form fieldKey gives, and a field path finds its rule with the
// indexes it names.
func TestRuleFieldsAndKeys(t *testing.T) {
	if len(rules) < 100 {
		t.Fatalf("%d rules", len(rules))
	}
	for _, ru := range rules {
		if !strings.HasPrefix(ru.field, "spec.") || strings.ContainsAny(ru.field, `\()?+`) {
			t.Errorf("rule %q is not a field path", ru.field)
		}
	}
	key, idx := fieldKey("spec.backends[2].endpoints[5].weight")
	if key != "spec.backends[b].endpoints[e].weight" || idx["b"] != 2 || idx["e"] != 5 {
		t.Errorf("endpoint field: %q %v", key, idx)
	}
	key, idx = fieldKey("spec.routes[1].backends[3].weight")
	if key != "spec.routes[r].backends[].weight" || idx["r"] != 1 || len(idx) != 1 {
		t.Errorf("route backend field: %q %v", key, idx)
	}
	for path, want := range map[string]string{
		"spec.backends[0].loadBalancing.hashKeys[1].header.name": "spec.backends[b].loadBalancing.hashKeys*",
		"spec.routes[0].match.path.value":                        "spec.routes[r].match.path.*",
		"spec.listener.tls.certificates[0].certFile":             "spec.listener.tls.certificates[].*",
		"spec.backends[1].endpoints[0].port":                     "spec.backends[b].endpoints[e].port",
	} {
		k, _ := fieldKey(path)
		i := -1
		for j, ru := range rules {
			if ru.matches(k) {
				i = j
				break
			}
		}
		if i < 0 || rules[i].field != want {
			t.Errorf("%s: rule %d, want %q", path, i, want)
		}
	}
	if k, _ := fieldKey("spec.backends[0].nosuchfield"); slices.ContainsFunc(rules, func(ru rule) bool { return ru.matches(k) }) {
		t.Error("an unknown field found a rule")
	}
}
