package explain

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/tools"
)

// apiLeaves lists, by reflection over t, every field a policy can set, as explain's walk of a policy meets
// it: by JSON name, with index 0 for lists of objects. It descends into structs of t's own package and of
// the API's (and into embedded inline structs), and stops at scalars, lists of scalars, other packages'
// types (a duration) and structs without fields (a hash key's host: {}).
func apiLeaves(t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	own := func(s reflect.Type) bool {
		return s.Kind() == reflect.Struct && s.NumField() > 0 &&
			(s.PkgPath() == reflect.TypeFor[v1alpha1.Listener]().PkgPath() || s.PkgPath() == t.PkgPath())
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case name == "" && f.Anonymous:
			apiLeaves(f.Type, path, out)
			continue
		case name == "":
			name = f.Name
		}
		p := path + "." + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice {
			el := ft.Elem()
			for el.Kind() == reflect.Pointer {
				el = el.Elem()
			}
			if !own(el) {
				*out = append(*out, p)
				continue
			}
			ft, p = el, p+"[0]"
		}
		if !own(ft) {
			*out = append(*out, p)
			continue
		}
		apiLeaves(ft, p, out)
	}
}

// unmapped lists the fields under spec (a LoadBalancerPolicySpec, or a type that embeds it) that no rule
// maps, neither to an Envoy field nor explicitly to none.
func unmapped(spec reflect.Type) (all, missing []string) {
	apiLeaves(spec, "spec", &all)
	for _, l := range all {
		if k, _ := fieldKey(l); ruleIndex(k) < 0 {
			missing = append(missing, l)
		}
	}
	return all, missing
}

// Every field of the API has a rule: where it goes in Envoy, or why it goes nowhere. A field added to the
// API without one fails here (and its reference row would have no Envoy line).
func TestEveryAPIFieldHasAMapping(t *testing.T) {
	all, missing := unmapped(reflect.TypeFor[v1alpha1.LoadBalancerPolicySpec]())
	if len(all) < 150 {
		t.Fatalf("the walk found only %d fields: %v", len(all), all)
	}
	for _, m := range missing {
		t.Errorf("%s has no rule in controlplane/explain/fields*.go: add where it goes in Envoy (r, opt) or why it goes nowhere (none)", m)
	}
	for _, want := range []string{"spec.backends[0].endpoints[0].weight", "spec.routes[0].match.headers[0].invert",
		"spec.backends[0].loadBalancing.hashKeys[0].host", "spec.listener.tls.certificates[0].hostnames", "spec.rollout.stages[0].percent"} {
		if !slices.Contains(all, want) {
			t.Errorf("the walk missed %s", want)
		}
	}
}

// specWithANewField is the API with one field more, as a change to api/v1alpha1 would add it.
type specWithANewField struct {
	v1alpha1.LoadBalancerPolicySpec `json:",inline"`
	NewKnob                         *int32 `json:"newKnob,omitempty"`
}

// The check of TestEveryAPIFieldHasAMapping finds a field that has no rule, and only that one.
func TestAFieldWithoutAMappingIsFound(t *testing.T) {
	_, missing := unmapped(reflect.TypeFor[specWithANewField]())
	if !slices.Equal(missing, []string{"spec.newKnob"}) {
		t.Errorf("unmapped fields %v, want [spec.newKnob]", missing)
	}
}

// Every rule resolves on a built resource: each is met by a policy that sets its field, translated and built
// for real (translate, xdsbuild), and explain finds the Envoy field set there. A rule no fixture reaches
// fails, as does a field of any fixture or example whose Envoy field is not where its rule says.
func TestEveryMappingResolves(t *testing.T) {
	fixtures := []struct{ area, path string }{
		{"listener", "controlplane/explain/testdata/fieldmap/listener.yaml"},
		{"routes", "controlplane/explain/testdata/fieldmap/routes.yaml"},
		{"backends", "controlplane/explain/testdata/fieldmap/backends.yaml"},
		{"health", "controlplane/explain/testdata/fieldmap/health.yaml"},
		{"load balancing", "controlplane/explain/testdata/fieldmap/loadbalancing.yaml"},
		{"TLS", "controlplane/explain/testdata/fieldmap/tls.yaml"},
		{"DNS", "controlplane/explain/testdata/fieldmap/dns.yaml"},
		{"examples", "examples"},
		{"translation goldens", "controlplane/translate/testdata/in/hashing-and-limits.yaml"},
	}
	resolved := make([]bool, len(rules))
	for _, fx := range fixtures {
		t.Run(fx.area, func(t *testing.T) {
			es := explainDir(t, filepath.Join(tools.RepoRoot(), fx.path))
			if len(es) == 0 {
				t.Fatalf("no policies in %s", fx.path)
			}
			for _, e := range es {
				if !e.Accepted {
					t.Errorf("%s: %s is not accepted: %s", fx.path, e.Policy, e.Message)
					continue
				}
				if len(e.Resources) < 3 || len(e.IR.Clusters) == 0 || e.IR.Listener == nil {
					t.Errorf("%s: resources %v, IR %+v", e.Policy, e.Resources, e.IR)
				}
				for _, f := range e.Fields {
					k, _ := fieldKey(f.Policy)
					i := ruleIndex(k)
					// Of a field's rules, the one of the resource type it was found in.
					for j, ru := range rules {
						if i >= 0 && f.Resource != nil && ru.field == rules[i].field && ru.typ == f.Resource.Type {
							i = j
							break
						}
					}
					switch {
					case i < 0:
						t.Errorf("%s: %s has no rule", e.Policy, f.Policy)
					case rules[i].none != "":
						resolved[i] = true
					case f.Resource == nil:
						// lbplane resolves the names (a DNS setting of an EDS backend): not Envoy's field.
					case f.EnvoyValue == "(not found)":
						t.Errorf("%s: %s = %s: %s %s has no %s", e.Policy, f.Policy, f.Value, f.Resource.Type, f.Resource.Name, f.Envoy)
					case rules[i].off && f.Value == "true":
						// Resolved when Envoy's field is indeed left out.
						if f.EnvoyValue != "(left out: "+f.Policy+" is true)" {
							t.Errorf("%s: %s = true, yet %s %s has %s = %s", e.Policy, f.Policy, f.Resource.Type, f.Resource.Name, f.Envoy, f.EnvoyValue)
						}
						resolved[i] = true
					case strings.HasPrefix(f.EnvoyValue, "(left out: "), f.EnvoyValue == "(unset: Envoy's default)":
					default:
						resolved[i] = true
					}
				}
			}
		})
	}
	for i, ru := range rules {
		if !resolved[i] && ru.none == "" {
			t.Errorf("no fixture sets %s to a value Envoy shows (%s %s): add one to controlplane/explain/testdata/fieldmap", ru.field, ru.typ, ru.path)
		}
	}
}
