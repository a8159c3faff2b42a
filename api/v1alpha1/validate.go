package v1alpha1

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits keep one policy from producing an Envoy config that is too large to push or too slow to apply.
const (
	MaxRoutes         = 1000
	MaxBackends       = 100
	MaxEndpoints      = 10000
	MaxHostnames      = 100
	MaxHeaderMatches  = 32
	MaxRouteBackends  = 100
	MaxWeight         = 100000
	MaxChoiceCount    = 100
	maxNameLength     = 253
	maxStringLength   = 4096
	maxTimeoutSeconds = 24 * 3600
)

var (
	supportedProtocols  = []Protocol{ProtocolHTTP, ProtocolTCP}
	supportedAlgorithms = []Algorithm{AlgorithmRoundRobin, AlgorithmLeastRequest, AlgorithmRandom, AlgorithmRingHash, AlgorithmMaglev}
	supportedPathTypes  = []PathMatchType{PathMatchPrefix, PathMatchExact}
	supportedHeaderType = []HeaderMatchType{HeaderMatchExact, HeaderMatchPrefix, HeaderMatchPresent, HeaderMatchRegex}

	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	hostnameRe   = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// RFC 7230 token characters.
	headerNameRe = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
)

func oneOf[T ~string](v T, allowed []T) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

func unsupported[T ~string](v T, allowed []T) string {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Sprintf("unsupported value %q; supported: %s", string(v), strings.Join(names, ", "))
}

// Validate returns every problem in the policy, each with its field path. It expects a defaulted policy
// (see Default) and checks the policy alone; conflicts between policies are found by translation.
func Validate(p *LoadBalancerPolicy) FieldErrors {
	v := &validator{}
	v.meta(p)
	spec := path("spec")
	s := &p.Spec
	if !dnsSubdomain.MatchString(s.ProxyGroup) || len(s.ProxyGroup) > maxNameLength {
		v.add(spec.child("proxyGroup"), "must be lowercase letters, digits, '-' and '.', at most 253 characters, got %q", s.ProxyGroup)
	}
	v.listener(spec.child("listener"), &s.Listener)
	backends := v.backends(spec.child("backends"), s.Backends)
	v.routes(spec.child("routes"), s, backends)
	return v.errs
}

type validator struct{ errs FieldErrors }

func (v *validator) add(p path, format string, args ...any) {
	v.errs = append(v.errs, FieldError{Path: string(p), Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) meta(p *LoadBalancerPolicy) {
	if p.APIVersion != APIVersion {
		v.add("apiVersion", "must be %q, got %q", APIVersion, p.APIVersion)
	}
	if p.Kind != Kind {
		v.add("kind", "must be %q, got %q", Kind, p.Kind)
	}
	switch {
	case p.Name == "":
		v.add("metadata.name", "required")
	case len(p.Name) > maxNameLength || !dnsSubdomain.MatchString(p.Name):
		v.add("metadata.name", "must be lowercase letters, digits, '-' and '.', at most 253 characters, got %q", clip(p.Name))
	}
	if len(p.Namespace) > 63 || !dnsLabel.MatchString(p.Namespace) {
		v.add("metadata.namespace", "must be a DNS label (lowercase letters, digits, '-'), got %q", clip(p.Namespace))
	}
}

func (v *validator) listener(p path, l *Listener) {
	if ip := net.ParseIP(l.Address); ip == nil {
		v.add(p.child("address"), "must be an IP address, got %q", clip(l.Address))
	}
	if l.Port < 1 || l.Port > 65535 {
		v.add(p.child("port"), "must be between 1 and 65535, got %d", l.Port)
	}
	switch {
	case l.Protocol == "":
		v.add(p.child("protocol"), "required; supported: HTTP, TCP")
	case l.Protocol == ProtocolHTTPS:
		v.add(p.child("protocol"), "HTTPS needs listener TLS settings, which this version does not support yet; supported: HTTP, TCP")
	case !oneOf(l.Protocol, supportedProtocols):
		v.add(p.child("protocol"), "%s", unsupported(l.Protocol, supportedProtocols))
	}
	if len(l.Hostnames) > 0 && l.Protocol == ProtocolTCP {
		v.add(p.child("hostnames"), "not allowed on a TCP listener: TCP carries no Host header")
	}
	if len(l.Hostnames) > MaxHostnames {
		v.add(p.child("hostnames"), "at most %d hostnames, got %d", MaxHostnames, len(l.Hostnames))
		return
	}
	seen := map[string]bool{}
	for i, h := range l.Hostnames {
		hp := p.child("hostnames").index(i)
		if !hostnameRe.MatchString(h) || len(h) > maxNameLength {
			v.add(hp, "must be a lowercase DNS name, optionally starting with \"*.\", got %q", clip(h))
			continue
		}
		if seen[h] {
			v.add(hp, "duplicate hostname %q", h)
		}
		seen[h] = true
	}
}

// backends validates the backends and returns the set of valid names for route references.
func (v *validator) backends(p path, bs []Backend) map[string]bool {
	names := map[string]bool{}
	if len(bs) == 0 {
		v.add(p, "at least one backend is required")
		return names
	}
	if len(bs) > MaxBackends {
		v.add(p, "at most %d backends, got %d", MaxBackends, len(bs))
		return names
	}
	for i := range bs {
		b := &bs[i]
		bp := p.index(i)
		switch {
		case b.Name == "":
			v.add(bp.child("name"), "required")
		case len(b.Name) > 63 || !dnsLabel.MatchString(b.Name):
			v.add(bp.child("name"), "must be a DNS label (lowercase letters, digits, '-', at most 63), got %q", clip(b.Name))
		case names[b.Name]:
			v.add(bp.child("name"), "duplicate backend name %q", b.Name)
		default:
			names[b.Name] = true
		}
		switch {
		case len(b.Endpoints) > 0 && b.Service != nil:
			v.add(bp, "set either endpoints or service, not both")
		case len(b.Endpoints) == 0 && b.Service == nil:
			v.add(bp, "set endpoints or service")
		}
		v.endpoints(bp.child("endpoints"), b.Endpoints)
		if b.Service != nil {
			v.service(bp.child("service"), b.Service)
		}
		v.loadBalancing(bp.child("loadBalancing"), &b.LoadBalancing)
		v.duration(bp.child("connectTimeout"), b.ConnectTimeout.Duration, false)
		v.circuitBreakers(bp.child("circuitBreakers"), b.CircuitBreakers)
	}
	return names
}

func (v *validator) endpoints(p path, es []Endpoint) {
	if len(es) > MaxEndpoints {
		v.add(p, "at most %d endpoints, got %d", MaxEndpoints, len(es))
		return
	}
	seen := map[string]int{}
	for i, e := range es {
		ep := p.index(i)
		if net.ParseIP(e.Address) == nil {
			v.add(ep.child("address"), "must be an IP address, got %q", clip(e.Address))
		}
		if e.Port < 1 || e.Port > 65535 {
			v.add(ep.child("port"), "must be between 1 and 65535, got %d", e.Port)
		}
		if w := *e.Weight; w < 1 || w > MaxWeight {
			v.add(ep.child("weight"), "must be between 1 and %d, got %d", MaxWeight, w)
		}
		key := net.JoinHostPort(e.Address, fmt.Sprint(e.Port))
		if j, dup := seen[key]; dup {
			v.add(ep, "duplicate endpoint %s (also at index %d)", key, j)
		} else {
			seen[key] = i
		}
	}
}

func (v *validator) service(p path, s *ServiceRef) {
	if s.Name == "" || len(s.Name) > 63 || !dnsLabel.MatchString(s.Name) {
		v.add(p.child("name"), "must be a Service name (DNS label), got %q", clip(s.Name))
	}
	if s.Namespace != "" && (len(s.Namespace) > 63 || !dnsLabel.MatchString(s.Namespace)) {
		v.add(p.child("namespace"), "must be a DNS label, got %q", clip(s.Namespace))
	}
	switch {
	case s.Port == 0 && s.PortName == "":
		v.add(p, "set port or portName")
	case s.Port != 0 && s.PortName != "":
		v.add(p, "set port or portName, not both")
	case s.Port < 0 || s.Port > 65535:
		v.add(p.child("port"), "must be between 1 and 65535, got %d", s.Port)
	}
}

func (v *validator) loadBalancing(p path, lb *LoadBalancing) {
	if !oneOf(lb.Algorithm, supportedAlgorithms) {
		v.add(p.child("algorithm"), "%s", unsupported(lb.Algorithm, supportedAlgorithms))
	}
	if lb.LeastRequest != nil {
		if lb.Algorithm != AlgorithmLeastRequest {
			v.add(p.child("leastRequest"), "only allowed with algorithm LeastRequest, got %q", lb.Algorithm)
		} else if c := *lb.LeastRequest.ChoiceCount; c < 2 || c > MaxChoiceCount {
			v.add(p.child("leastRequest").child("choiceCount"), "must be between 2 and %d, got %d", MaxChoiceCount, c)
		}
	}
}

func (v *validator) circuitBreakers(p path, cb *CircuitBreakers) {
	for name, val := range map[string]*int32{
		"maxConnections": cb.MaxConnections, "maxPendingRequests": cb.MaxPendingRequests,
		"maxRequests": cb.MaxRequests, "maxRetries": cb.MaxRetries,
	} {
		if *val < 1 {
			v.add(p.child(name), "must be at least 1, got %d", *val)
		}
	}
}

func (v *validator) duration(p path, d time.Duration, zeroAllowed bool) {
	switch {
	case d < 0:
		v.add(p, "must not be negative, got %s", d)
	case d == 0 && !zeroAllowed:
		v.add(p, "must be greater than zero")
	case d > maxTimeoutSeconds*time.Second:
		v.add(p, "must be at most 24h, got %s", d)
	case d%time.Millisecond != 0:
		v.add(p, "must be a whole number of milliseconds, got %s", d)
	}
}

func (v *validator) routes(p path, s *LoadBalancerPolicySpec, backends map[string]bool) {
	if len(s.Routes) == 0 {
		return
	}
	if s.Listener.Protocol == ProtocolTCP {
		v.add(p, "not allowed on a TCP listener: connections go to the backends, equally weighted")
		return
	}
	if len(s.Routes) > MaxRoutes {
		v.add(p, "at most %d routes, got %d", MaxRoutes, len(s.Routes))
		return
	}
	names := map[string]bool{}
	for i := range s.Routes {
		r := &s.Routes[i]
		rp := p.index(i)
		switch {
		case len(r.Name) > 63 || !dnsLabel.MatchString(r.Name):
			v.add(rp.child("name"), "must be a DNS label (lowercase letters, digits, '-', at most 63), got %q", clip(r.Name))
		case names[r.Name]:
			v.add(rp.child("name"), "duplicate route name %q", r.Name)
		}
		names[r.Name] = true
		v.match(rp.child("match"), &r.Match)
		v.duration(rp.child("timeout"), r.Timeout.Duration, true)
		v.routeBackends(rp.child("backends"), r.Backends, backends)
	}
}

func (v *validator) match(p path, m *RouteMatch) {
	if m.Path != nil {
		pp := p.child("path")
		if !oneOf(m.Path.Type, supportedPathTypes) {
			v.add(pp.child("type"), "%s", unsupported(m.Path.Type, supportedPathTypes))
		}
		switch {
		case !strings.HasPrefix(m.Path.Value, "/"):
			v.add(pp.child("value"), "must start with \"/\", got %q", clip(m.Path.Value))
		case len(m.Path.Value) > maxStringLength:
			v.add(pp.child("value"), "at most %d characters, got %d", maxStringLength, len(m.Path.Value))
		case strings.ContainsAny(m.Path.Value, "?# \t\r\n"):
			v.add(pp.child("value"), "must not contain '?', '#' or white space, got %q", clip(m.Path.Value))
		}
	}
	if len(m.Headers) > MaxHeaderMatches {
		v.add(p.child("headers"), "at most %d header matches, got %d", MaxHeaderMatches, len(m.Headers))
		return
	}
	for i, h := range m.Headers {
		hp := p.child("headers").index(i)
		if len(h.Name) > 256 || !headerNameRe.MatchString(h.Name) {
			v.add(hp.child("name"), "must be an HTTP header name (token characters, at most 256), got %q", clip(h.Name))
		}
		if !oneOf(h.Type, supportedHeaderType) {
			v.add(hp.child("type"), "%s", unsupported(h.Type, supportedHeaderType))
			continue
		}
		switch {
		case h.Type == HeaderMatchPresent && h.Value != "":
			v.add(hp.child("value"), "not allowed with type Present")
		case h.Type != HeaderMatchPresent && h.Value == "":
			v.add(hp.child("value"), "required with type %s", h.Type)
		case len(h.Value) > maxStringLength:
			v.add(hp.child("value"), "at most %d characters, got %d", maxStringLength, len(h.Value))
		case !utf8.ValidString(h.Value):
			v.add(hp.child("value"), "must be valid UTF-8")
		case h.Type == HeaderMatchRegex:
			if _, err := regexp.Compile(h.Value); err != nil {
				v.add(hp.child("value"), "invalid regular expression: %v", err)
			}
		}
	}
}

func (v *validator) routeBackends(p path, refs []BackendRef, backends map[string]bool) {
	if len(refs) == 0 {
		v.add(p, "at least one backend is required")
		return
	}
	if len(refs) > MaxRouteBackends {
		v.add(p, "at most %d backends, got %d", MaxRouteBackends, len(refs))
		return
	}
	seen := map[string]bool{}
	total := 0
	for i, ref := range refs {
		bp := p.index(i)
		switch {
		case !backends[ref.Name]:
			v.add(bp.child("name"), "no backend named %q in spec.backends", clip(ref.Name))
		case seen[ref.Name]:
			v.add(bp.child("name"), "backend %q listed twice", ref.Name)
		}
		seen[ref.Name] = true
		if w := *ref.Weight; w < 0 || w > MaxWeight {
			v.add(bp.child("weight"), "must be between 0 and %d, got %d", MaxWeight, w)
		} else {
			total += int(w)
		}
	}
	if total == 0 {
		v.add(p, "the weights add up to 0: at least one backend needs a positive weight")
	}
}

// clip keeps a huge bad value from turning into a huge error message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
