package tenancy

import (
	"slices"
	"strings"
	"testing"
)

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		p, n string
		want bool
	}{
		{"*", "a.example.com", true},
		{"*", "*.example.com", true},
		{"*", "*", true},
		{"", "a.example.com", true}, // a certificate for every server name
		{"a.example.com", "a.example.com", true},
		{"a.example.com", "b.example.com", false},
		{"a.example.com", "*", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "a.b.example.com", true}, // Envoy's suffix match: any number of labels
		{"*.example.com", "example.com", false},
		{"*.example.com", "*.b.example.com", true},
		{"*.b.example.com", "*.example.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "xexample.com", false},
		{"*.example.com", "*", false},
		{"a.example.com", "*.example.com", false},
	} {
		if got := Covers(c.p, c.n); got != c.want {
			t.Errorf("Covers(%q, %q) = %t, want %t", c.p, c.n, got, c.want)
		}
	}
	if !Overlap("a.example.com", "*.example.com") || !Overlap("*.example.com", "a.example.com") || Overlap("a.example.com", "*.other.com") {
		t.Error("Overlap is not Covers either way")
	}
}

func TestWildcards(t *testing.T) {
	for n, want := range map[string][]string{
		"a.b.example.com": {"*.b.example.com", "*.example.com", "*.com", "*"},
		"*.b.example.com": {"*.example.com", "*.com", "*"},
		"localhost":       {"*"},
		"*":               nil,
		"":                nil,
	} {
		got := Wildcards(n)
		if !slices.Equal(got, want) {
			t.Errorf("Wildcards(%q) = %q, want %q", n, got, want)
		}
		for _, w := range got {
			if !Covers(w, n) || w == n {
				t.Errorf("Wildcards(%q) lists %q, which does not strictly cover it", n, w)
			}
		}
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	for doc, want := range map[string]string{
		"undelegated: Maybe":                                           `undelegated: "Maybe" is not Allow or Deny`,
		"delegations: [{namespace: Team-A}]":                           `delegations[0].namespace: "Team-A"`,
		"delegations: [{namespace: a, ports: [0]}]":                    `delegations[0].ports[0]: 0 is not a port (1-65535)`,
		"delegations: [{namespace: a, hostnames: ['*a.example.com']}]": `delegations[0].hostnames[0]: "*a.example.com" is not a lowercase DNS name`,
		"delegations: [{namespace: a, hostname: [x]}]":                 `unknown field "hostname"`,
	} {
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", doc, err, want)
		}
	}
	r, err := Parse([]byte(""))
	if err != nil || !r.Empty() || r.Key() != "" {
		t.Errorf("an empty file: %+v, %v; want the zero rules", r, err)
	}
}

func TestCheck(t *testing.T) {
	r, err := Parse([]byte(`
undelegated: Deny
delegations:
  - {namespace: team-a, ports: [10080], hostnames: ["*.team-a.example.com"]}
  - {namespace: team-a, ports: [10443]}
  - {namespace: team-db, ports: [5432]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns        string
		port      int32
		name      string
		allowed   bool
		delegated bool
		why       string
	}{
		{"team-a", 10080, "app.team-a.example.com", true, true, ""},
		{"team-a", 10080, "*.team-a.example.com", true, true, ""},
		{"team-a", 10080, "app.example.com", false, false, `namespace team-a may use only *.team-a.example.com on port 10080 (undelegated: Deny); host name "app.example.com" is not among them`},
		{"team-a", 10080, "*", false, false, `every host name ("*", no hostnames)`},
		{"team-a", 10443, "*", true, true, ""},
		{"team-a", 8080, "app.team-a.example.com", false, false, "port 8080 is not delegated to namespace team-a (it may use ports 10080, 10443; undelegated: Deny)"},
		// Names and ports delegated to one namespace are refused to every other.
		{"default", 10080, "app.team-a.example.com", false, false, `host name "app.team-a.example.com" on port 10080 is delegated to namespace team-a`},
		{"default", 5432, "*", false, false, "is delegated to namespace team-db"},
		// With Deny, nothing undelegated; a broader name than a delegation is not covered by it.
		{"default", 10080, "*", false, false, "nothing is delegated to namespace default"},
		{"default", 10080, "app.example.com", false, false, "nothing is delegated to namespace default"},
	} {
		v := r.Check(c.ns, c.port, c.name)
		if v.Allowed != c.allowed || v.Delegated != c.delegated || !strings.Contains(v.Why, c.why) || (c.allowed && v.Why != "") {
			t.Errorf("Check(%s, %d, %q) = %+v; want allowed %t, delegated %t, why with %q", c.ns, c.port, c.name, v, c.allowed, c.delegated, c.why)
		}
	}
	// With Allow (the default), what no delegation covers is anyone's to claim first, a broader name than a
	// delegation included; delegated names stay their namespace's.
	allow, err := Parse([]byte("delegations: [{namespace: team-a, ports: [80], hostnames: ['*.team-a.example.com']}]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns, name string
		port     int32
	}{{"default", "*", 80}, {"default", "*.example.com", 80}, {"team-a", "app.example.com", 80}, {"team-a", "x.team-a.example.com", 81}} {
		if v := allow.Check(c.ns, c.port, c.name); !v.Allowed || v.Delegated {
			t.Errorf("Allow: Check(%s, %d, %q) = %+v, want allowed, not delegated", c.ns, c.port, c.name, v)
		}
	}
	if v := allow.Check("default", 80, "x.team-a.example.com"); v.Allowed {
		t.Errorf("Allow gives another namespace a delegated name: %+v", v)
	}
	// Nested delegations: the narrowest pattern covering a name decides.
	nested, err := Parse([]byte("delegations: [{namespace: ops, ports: [80]}, {namespace: team-a, hostnames: ['*.team-a.example.com']}]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns, name string
		allowed  bool
	}{{"ops", "*", true}, {"ops", "www.example.com", true}, {"ops", "x.team-a.example.com", false}, {"team-a", "x.team-a.example.com", true},
		{"team-a", "www.example.com", false}, {"default", "www.example.com", false}} {
		if v := nested.Check(c.ns, 80, c.name); v.Allowed != c.allowed {
			t.Errorf("nested: Check(%s, 80, %q) = %+v, want allowed %t", c.ns, c.name, v, c.allowed)
		}
	}
	if r.Key() == "" || r.Key() == allow.Key() {
		t.Errorf("keys %q and %q: rules must be told apart by content", r.Key(), allow.Key())
	}
}
