package lint

import (
	"fmt"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// RulePrioritiesWithoutZones: retries told to avoid priorities there are none of.
const RulePrioritiesWithoutZones = "retry-priorities-without-zones"

func init() {
	Rules = append(Rules,
		struct{ Name, Catches string }{RulePrioritiesWithoutZones, "retry.avoidPreviousPriorities on a route none of whose backends has loadBalancing.zoneFailover: there is one priority, so retries stay where they failed"},
	)
}

// retryPriorities reports a route whose retries avoid previous priorities while its backends have one
// priority only.
func retryPriorities(add addFunc, s *v1alpha1.LoadBalancerPolicySpec) {
	zoned := map[string]bool{}
	for _, b := range s.Backends {
		zoned[b.Name] = len(b.LoadBalancing.ZoneFailover) > 0
	}
	for i, r := range s.Routes {
		if r.Retry == nil || !r.Retry.AvoidPreviousPriorities {
			continue
		}
		any := false
		for _, ref := range r.Backends {
			any = any || zoned[ref.Name]
		}
		if !any {
			add(RulePrioritiesWithoutZones, fmt.Sprintf("spec.routes[%d].retry.avoidPreviousPriorities", i),
				"none of the route's backends has loadBalancing.zoneFailover, so all endpoints are one priority and retries cannot move to another; set zoneFailover or drop the field")
		}
	}
}

// shadowedRoutes reports routes that can never match: Envoy tries a virtual host's routes in order and takes
// the first that matches, so a route every one of whose requests an earlier route of the same policy already
// matches is dead (a catch-all before "/api/" sends /api/x to the catch-all's backends and settings).
func shadowedRoutes(add addFunc, s *v1alpha1.LoadBalancerPolicySpec) {
	for j := range s.Routes {
		for i := range j {
			if covers(&s.Routes[i].Match, &s.Routes[j].Match) {
				add(RuleShadowedRoute, fmt.Sprintf("spec.routes[%d]", j),
					"route %q can never match: every request it matches is taken first by route %q (spec.routes[%d]), since Envoy takes the first route that matches; move it above that route or narrow the earlier match",
					s.Routes[j].Name, s.Routes[i].Name, i)
				break
			}
		}
	}
}

// covers reports whether every request that later matches also matches earlier.
func covers(earlier, later *v1alpha1.RouteMatch) bool {
	if !pathCovers(earlier.Path, later.Path) {
		return false
	}
	for _, h := range earlier.Headers {
		if !headerImplied(h, later.Headers) {
			return false
		}
	}
	return true
}

// pathCovers: no path matches every path (prefix "/"); prefixes compare as Envoy does, byte for byte and
// case-sensitively.
func pathCovers(earlier, later *v1alpha1.PathMatch) bool {
	if earlier == nil {
		return true
	}
	if later == nil {
		return earlier.Type == v1alpha1.PathMatchPrefix && earlier.Value == "/"
	}
	switch earlier.Type {
	case v1alpha1.PathMatchPrefix:
		return strings.HasPrefix(later.Value, earlier.Value)
	case v1alpha1.PathMatchExact:
		return later.Type == v1alpha1.PathMatchExact && later.Value == earlier.Value
	}
	return false
}

// headerImplied reports whether every request that matches all of later also matches h. Only what is sure
// counts: the same match, presence implied by any match of the header, a prefix implied by a longer exact
// value or prefix. Regular expressions are compared as text.
func headerImplied(h v1alpha1.HeaderMatch, later []v1alpha1.HeaderMatch) bool {
	for _, l := range later {
		if !strings.EqualFold(h.Name, l.Name) || h.Invert != l.Invert {
			continue
		}
		if h.Type == l.Type && h.Value == l.Value {
			return true
		}
		if h.Invert {
			continue
		}
		switch h.Type {
		case v1alpha1.HeaderMatchPresent:
			return true
		case v1alpha1.HeaderMatchPrefix:
			if (l.Type == v1alpha1.HeaderMatchExact || l.Type == v1alpha1.HeaderMatchPrefix) && strings.HasPrefix(l.Value, h.Value) {
				return true
			}
		case v1alpha1.HeaderMatchExact:
			// Only the same exact value, handled above.
		}
	}
	return false
}
