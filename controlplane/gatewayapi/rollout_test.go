package gatewayapi

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// An HTTPRoute's rollout annotation becomes the spec.rollout of the policies of the host names its rules
// are served on: staged with its settings, or the defaults; a host name shared with a route that asks for
// nothing is staged too, and one whose routes ask for immediate says so; a value that is not one is named
// in the route's Accepted message, and its rules are staged with the defaults.
func TestRouteRolloutAnnotation(t *testing.T) {
	g := gw("apps", "gw", httpListener("http", 80, ""))
	be := []gwv1.HTTPBackendRef{toService("", "web", 80)}
	rule := func(p string) gwv1.HTTPRouteRule {
		return gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefix(p)}, BackendRefs: be}
	}
	g.UID = "gw-uid"
	annotated := func(r *gwv1.HTTPRoute, v string) *gwv1.HTTPRoute {
		r.Annotations = map[string]string{AnnotationRollout: v}
		return r
	}
	settings := annotated(route("apps", "settings", 1, "apps/gw", []string{"a.example.com"}, rule("/")),
		"{stages: [{envoys: 2}, {percent: 100}], bakeTime: 3s, analysis: {minRequests: 20}}")
	plain := route("apps", "plain", 2, "apps/gw", []string{"a.example.com", "b.example.com"}, rule("/plain"))
	staged := annotated(route("apps", "staged", 3, "apps/gw", []string{"c.example.com"}, rule("/")), "staged")
	immediate := annotated(route("apps", "immediate", 4, "apps/gw", []string{"d.example.com"}, rule("/")), " immediate ")
	bad := annotated(route("apps", "bad", 5, "apps/gw", []string{"e.example.com"}, rule("/")), "{bakeTime: 3s, stages: [{percent: 150}]}")
	shift := annotated(route("apps", "shift", 6, "apps/gw", []string{"f.example.com"}, rule("/")), "{trafficShift: {backend: web}}")
	typo := annotated(route("apps", "typo", 7, "apps/gw", []string{"g.example.com"}, rule("/")), "{bakeTme: 3s}")
	for _, r := range []*gwv1.HTTPRoute{settings, plain, staged, immediate, bad, shift, typo} {
		r.UID = types.UID(r.Name + "-uid") // an object's identity: a policy whose inputs did not change is handed on
	}
	out := Translate(input([]*gwv1.Gateway{g}, settings, plain, staged, immediate, bad, shift, typo))
	valid(t, out)

	a := policyFor(t, out, "a.example.com").Spec.Rollout
	if a == nil || len(a.Stages) != 2 || a.BakeTime == nil || a.BakeTime.Duration != 3*time.Second || a.Analysis == nil || a.Analysis.MinRequests == nil || *a.Analysis.MinRequests != 20 {
		t.Errorf("a.example.com (the annotated route's and another's): rollout %+v, want the annotation's settings", a)
	}
	if r := policyFor(t, out, "b.example.com"); r.Spec.Rollout != nil || r.Annotations[AnnotationRollout] != "" {
		t.Errorf("b.example.com (a route without the annotation alone): rollout %+v, annotation %q; want neither", r.Spec.Rollout, r.Annotations[AnnotationRollout])
	}
	if r := policyFor(t, out, "c.example.com").Spec.Rollout; r == nil || len(r.Stages) != 0 || r.BakeTime != nil {
		t.Errorf("c.example.com (staged): rollout %+v, want one with the defaults", r)
	}
	if r := policyFor(t, out, "d.example.com"); r.Spec.Rollout != nil || r.Annotations[AnnotationRollout] != RolloutImmediate {
		t.Errorf("d.example.com (immediate): rollout %+v, annotation %q", r.Spec.Rollout, r.Annotations[AnnotationRollout])
	}
	for route, want := range map[string]string{
		"apps/bad":   "metadata.annotations[gateway.lbplane.io/rollout].stages[0]",
		"apps/shift": "metadata.annotations[gateway.lbplane.io/rollout].trafficShift: not supported",
		"apps/typo":  `unknown field "bakeTme"`,
	} {
		c := parentCond(t, out, route, string(gwv1.RouteConditionAccepted))
		if c.Status != "True" || !strings.Contains(c.Message, want) || !strings.HasSuffix(c.Message, "its changes are staged with the default settings") {
			t.Errorf("%s: Accepted %s %q, want True naming %q", route, c.Status, c.Message, want)
		}
	}
	for _, host := range []string{"e.example.com", "f.example.com", "g.example.com"} {
		if r := policyFor(t, out, host).Spec.Rollout; r == nil || len(r.Stages) != 0 || r.TrafficShift != nil {
			t.Errorf("%s (an invalid value): rollout %+v, want the defaults", host, r)
		}
	}
	if c := parentCond(t, out, "apps/settings", string(gwv1.RouteConditionAccepted)); c.Message != "route accepted" {
		t.Errorf("a valid annotation: Accepted %q", c.Message)
	}

	// A new value of the annotation makes the policy anew (metadata.generation does not move with it).
	in := input([]*gwv1.Gateway{g}, settings, plain, staged, immediate, bad, shift, typo)
	in.Previous = out
	changed := settings.DeepCopy()
	changed.Annotations[AnnotationRollout] = "staged"
	in.Routes[0] = changed
	again := Translate(in)
	if r := policyFor(t, again, "a.example.com").Spec.Rollout; r == nil || len(r.Stages) != 0 {
		t.Errorf("after the annotation changed: rollout %+v, want the defaults", r)
	}
	if policyFor(t, again, "c.example.com") != policyFor(t, out, "c.example.com") {
		t.Errorf("a policy none of whose inputs changed was made anew")
	}
}
