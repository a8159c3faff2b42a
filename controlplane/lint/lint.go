// Package lint finds valid settings that probably do not do what their author meant: the traps users of
// Envoy, Istio, nginx and HAProxy fall into. Findings are warnings; they never stop a policy.
package lint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// ExpectedConcurrencyAnnotation declares how many requests a policy's backends are expected to carry at
// once; circuit breakers below it are reported.
const ExpectedConcurrencyAnnotation = "lbplane.io/expected-concurrency"

// envoyDefaultPanicThreshold is Envoy's healthy_panic_threshold when none is set (lbplane sets none).
const envoyDefaultPanicThreshold = 50

// Rule names.
const (
	RuleFailoverWithoutOutlier = "zone-failover-without-outlier-detection"
	RuleHashWithWeightedSplit  = "hash-with-weighted-split"
	RulePanicHidesHealth       = "panic-threshold-hides-health-checks"
	RuleHealthCheckRouteHost   = "health-check-sends-route-host"
	RuleRetryWithoutBudget     = "retry-without-budget"
	RuleBreakerBelowLoad       = "circuit-breaker-below-expected-concurrency"
	RuleShadowedRoute          = "route-never-matches"
	RuleSessionSplit           = "session-split-without-across-backends"
)

// Rules lists every rule with what it catches, for lbctl lint --rules and the docs.
var Rules = []struct{ Name, Catches string }{
	{RuleFailoverWithoutOutlier, "loadBalancing.zoneFailover without healthCheck.passive: failover only moves traffic away from endpoints Envoy knows are unhealthy"},
	{RuleHashWithWeightedSplit, "RingHash or Maglev behind a weighted split of several backends: the backend is picked at random per request, so clients do not stick"},
	{RulePanicHidesHealth, "a panic threshold that one failing endpoint already crosses: Envoy then sends traffic to every endpoint, failing ones included"},
	{RuleHealthCheckRouteHost, "an HTTP health check whose host is one of the listener's hostnames: it probes the public virtual host (redirects, auth, caches) instead of the endpoint"},
	{RuleRetryWithoutBudget, "route retries without a retry budget on the backend: retries multiply load exactly when a backend is failing"},
	{RuleBreakerBelowLoad, "circuit breakers below the " + ExpectedConcurrencyAnnotation + " annotation: requests past them fail with 503 (x-envoy-overloaded)"},
	{RuleShadowedRoute, "a route after one that already matches all its requests (a catch-all before \"/api/\"): Envoy takes the first route that matches, so the later route never serves"},
	{RuleSessionSplit, "sessionPersistence on a route of several backends without acrossBackends: the backend is picked per request before the session is read, so sessions move between backends, and a backend set to weight 0 loses its sessions at once"},
}

// Finding is one warning.
type Finding struct {
	Rule    string
	Field   string
	Message string
}

func (f Finding) String() string { return fmt.Sprintf("%s: %s: %s", f.Rule, f.Field, f.Message) }

// Strings renders findings one line each.
func Strings(fs []Finding) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

// Check lints a policy that has been defaulted (v1alpha1.Default) and is valid.
func Check(p *v1alpha1.LoadBalancerPolicy) []Finding {
	var out []Finding
	add := func(rule, field, format string, args ...any) {
		out = append(out, Finding{Rule: rule, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	s := &p.Spec
	byName := map[string]int{}
	for i, b := range s.Backends {
		byName[b.Name] = i
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		bp := fmt.Sprintf("spec.backends[%d]", i)
		failover(add, bp, b)
		panicThreshold(add, bp, b)
		healthCheckHost(add, bp, b, s.Listener.Hostnames)
		backendFeatures(add, bp, b, s.Listener.Protocol)
		zones(add, bp, b)
		dnsBackend(add, bp, b)
		slowStartRamp(add, bp, b)
	}
	for _, split := range splits(s) {
		hashSplit(add, s, split, byName)
		sessionSplit(add, split)
		retryBudget(add, s, split, byName)
	}
	breakers(add, p)
	proxyProtocolSenders(add, s)
	retryPriorities(add, s)
	shadowedRoutes(add, s)
	return out
}

type addFunc func(rule, field, format string, args ...any)

func failover(add addFunc, bp string, b *v1alpha1.Backend) {
	if len(b.LoadBalancing.ZoneFailover) == 0 {
		return
	}
	hc := b.HealthCheck
	switch {
	case hc == nil || (hc.Passive == nil && hc.Active == nil):
		add(RuleFailoverWithoutOutlier, bp+".loadBalancing.zoneFailover",
			"only lbplane's default ejection of endpoints that refuse connections moves traffic to the next zone: endpoints that accept connections but fail requests, or hang, keep their zone's traffic; add healthCheck.passive (outlier detection) and healthCheck.active")
	case hc.Passive == nil:
		add(RuleFailoverWithoutOutlier, bp+".loadBalancing.zoneFailover",
			"without outlier detection only the active check moves traffic to the next zone: endpoints that pass the probe but answer requests with 5xx keep their zone's traffic; add healthCheck.passive")
	}
}

// endpointCount is the number of static endpoints that can serve, or 0 when unknown (a Service).
func endpointCount(b *v1alpha1.Backend) int {
	n := 0
	for _, e := range b.Endpoints {
		if e.State != v1alpha1.EndpointDraining {
			n++
		}
	}
	return n
}

func panicThreshold(add addFunc, bp string, b *v1alpha1.Backend) {
	hc := b.HealthCheck
	if hc == nil || (hc.Active == nil && hc.Passive == nil) {
		return
	}
	threshold, explicit := int32(envoyDefaultPanicThreshold), hc.PanicThreshold != nil
	if explicit {
		threshold = *hc.PanicThreshold
	}
	if threshold == 0 {
		return
	}
	field := bp + ".healthCheck.panicThreshold"
	n := endpointCount(b)
	switch {
	case b.Service != nil && explicit && threshold > 50:
		add(RulePanicHidesHealth, field, "%d%% is above half: once more than %d%% of the Service's endpoints fail, Envoy balances over all of them, failing ones included, as if there were no health checks; lower it, or 0 to turn panic mode off",
			threshold, 100-threshold)
	case n >= 2 && 100*(n-1) < int(threshold)*n:
		setting := fmt.Sprintf("%d%%", threshold)
		if !explicit {
			setting = fmt.Sprintf("Envoy's default of %d%%", threshold)
		}
		add(RulePanicHidesHealth, field, "with %d endpoints one failing endpoint leaves %d%% healthy, below %s: Envoy then balances over all endpoints, the failing one included, as if there were no health checks; set it below %d, or 0 to turn panic mode off",
			n, 100*(n-1)/n, setting, 100*(n-1)/n+1)
	}
}

func healthCheckHost(add addFunc, bp string, b *v1alpha1.Backend, hostnames []string) {
	hc := b.HealthCheck
	if hc == nil || hc.Active == nil || hc.Active.HTTP == nil || hc.Active.HTTP.Host == "" {
		return
	}
	host := strings.ToLower(hc.Active.HTTP.Host)
	for _, h := range hostnames {
		if matchHost(strings.ToLower(h), host) {
			add(RuleHealthCheckRouteHost, bp+".healthCheck.active.http.host",
				"%q is a hostname clients use (spec.listener.hostnames): the probe goes through the backend's public virtual host, where redirects to HTTPS, authentication or caching answer for the endpoint; leave host unset (the endpoint's own address) or use a name that only serves the health path", hc.Active.HTTP.Host)
			return
		}
	}
}

func matchHost(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return pattern == host
}

// split is one place traffic is divided between backends: a route, or the listener when there are none.
type split struct {
	field    string
	refs     []v1alpha1.BackendRef
	route    *v1alpha1.Route
	routeIdx int
}

func splits(s *v1alpha1.LoadBalancerPolicySpec) []split {
	if len(s.Routes) == 0 {
		var refs []v1alpha1.BackendRef
		one := int32(1)
		for _, b := range s.Backends {
			refs = append(refs, v1alpha1.BackendRef{Name: b.Name, Weight: &one})
		}
		return []split{{field: "spec.backends", refs: refs, routeIdx: -1}}
	}
	var out []split
	for i := range s.Routes {
		out = append(out, split{field: fmt.Sprintf("spec.routes[%d]", i), refs: s.Routes[i].Backends, route: &s.Routes[i], routeIdx: i})
	}
	return out
}

func hashSplit(add addFunc, s *v1alpha1.LoadBalancerPolicySpec, sp split, byName map[string]int) {
	var live, hashed []string
	for _, r := range sp.refs {
		if r.Weight != nil && *r.Weight == 0 {
			continue
		}
		live = append(live, r.Name)
		if i, ok := byName[r.Name]; ok {
			if a := s.Backends[i].LoadBalancing.Algorithm; a == v1alpha1.AlgorithmRingHash || a == v1alpha1.AlgorithmMaglev {
				hashed = append(hashed, r.Name)
			}
		}
	}
	if len(live) < 2 || len(hashed) == 0 {
		return
	}
	if sp.route != nil && sp.route.SessionPersistence != nil && sp.route.SessionPersistence.AcrossBackends {
		return
	}
	field := sp.field + ".backends"
	if sp.route == nil {
		field = sp.field
	}
	add(RuleHashWithWeightedSplit, field,
		"traffic is split over %d backends (%s) and the backend is chosen at random for every request; the hash of %s only picks the endpoint inside it, so a client moves between backends; route to one backend, or set sessionPersistence with acrossBackends: true",
		len(live), strings.Join(live, ", "), strings.Join(hashed, ", "))
}

// sessionSplit: a session names an endpoint of the cluster the router picked, and the router picks among a
// route's backends per request, so without acrossBackends a session holds only while the same backend is
// drawn; a backend at weight 0 is not drawn at all.
func sessionSplit(add addFunc, sp split) {
	r := sp.route
	if r == nil || r.SessionPersistence == nil || r.SessionPersistence.AcrossBackends || len(r.Backends) < 2 {
		return
	}
	names := make([]string, len(r.Backends))
	for i, b := range r.Backends {
		names[i] = b.Name
	}
	add(RuleSessionSplit, sp.field+".sessionPersistence",
		"the route has %d backends (%s) and Envoy picks one per request before it reads the session, so a client's session holds only while the same backend is picked, and a backend set to weight 0 loses its sessions at once; set acrossBackends: true to keep sessions across the backends (and through a switch to weight 0)",
		len(names), strings.Join(names, ", "))
}

func retryBudget(add addFunc, s *v1alpha1.LoadBalancerPolicySpec, sp split, byName map[string]int) {
	if sp.route == nil || sp.route.Retry == nil || sp.route.Retry.Attempts == nil || *sp.route.Retry.Attempts == 0 {
		return
	}
	var without []string
	for _, r := range sp.refs {
		i, ok := byName[r.Name]
		if !ok {
			continue
		}
		if cb := s.Backends[i].CircuitBreakers; cb == nil || cb.RetryBudget == nil {
			without = append(without, fmt.Sprintf("spec.backends[%d] (%s)", i, r.Name))
		}
	}
	if len(without) == 0 {
		return
	}
	slices.Sort(without)
	add(RuleRetryWithoutBudget, sp.field+".retry",
		"up to %d retries per request with no retry budget on %s: when a backend fails, each request becomes up to %d and the retries add load exactly when it is failing (only circuitBreakers.maxRetries, concurrent, limits them); set circuitBreakers.retryBudget there",
		*sp.route.Retry.Attempts, strings.Join(without, ", "), *sp.route.Retry.Attempts+1)
}

func breakers(add addFunc, p *v1alpha1.LoadBalancerPolicy) {
	raw, ok := p.Annotations[ExpectedConcurrencyAnnotation]
	if !ok {
		return
	}
	field := "metadata.annotations[" + ExpectedConcurrencyAnnotation + "]"
	want, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil || want < 1 {
		add(RuleBreakerBelowLoad, field, "must be a positive number of concurrent requests, got %q; circuit breakers are not checked", raw)
		return
	}
	for i := range p.Spec.Backends {
		b := &p.Spec.Backends[i]
		cb := b.CircuitBreakers
		if cb == nil {
			continue
		}
		bp := fmt.Sprintf("spec.backends[%d].circuitBreakers", i)
		for _, lim := range []struct {
			name string
			v    *int32
		}{{"maxRequests", cb.MaxRequests}, {"maxConnections", cb.MaxConnections}, {"maxPendingRequests", cb.MaxPendingRequests}} {
			if lim.v != nil && int(*lim.v) < want {
				add(RuleBreakerBelowLoad, bp+"."+lim.name, "%d is below the expected concurrency of %d: requests past it fail at once with 503 (x-envoy-overloaded)", *lim.v, want)
			}
		}
		if cb.MaxConnectionsPerEndpoint != nil {
			if n := endpointCount(b); n > 0 && int(*cb.MaxConnectionsPerEndpoint)*n < want {
				add(RuleBreakerBelowLoad, bp+".maxConnectionsPerEndpoint", "%d connections x %d endpoints = %d, below the expected concurrency of %d: HTTP/1 requests past it wait or fail",
					*cb.MaxConnectionsPerEndpoint, n, int(*cb.MaxConnectionsPerEndpoint)*n, want)
			}
		}
	}
}
