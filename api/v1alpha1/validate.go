package v1alpha1

import (
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	MaxHashKeys       = 8
	MaxZones          = 16
	MaxCertificates   = 100
	maxNameLength     = 253
	maxStringLength   = 4096
	maxTimeoutSeconds = 24 * 3600
)

var (
	supportedProtocols  = []Protocol{ProtocolHTTP, ProtocolHTTPS, ProtocolTCP}
	supportedAlgorithms = []Algorithm{AlgorithmRoundRobin, AlgorithmLeastRequest, AlgorithmRandom, AlgorithmRingHash, AlgorithmMaglev, AlgorithmBackendUtilization}
	supportedPathTypes  = []PathMatchType{PathMatchPrefix, PathMatchSegmentPrefix, PathMatchExact, PathMatchRegex}
	supportedHeaderType = []HeaderMatchType{HeaderMatchExact, HeaderMatchPrefix, HeaderMatchPresent, HeaderMatchRegex}

	supportedEndpointStates    = []EndpointState{EndpointActive, EndpointDraining}
	supportedSameSite          = []SameSite{SameSiteStrict, SameSiteLax, SameSiteNone}
	supportedHealthTypes       = []HealthCheckType{HealthCheckHTTP, HealthCheckTCP, HealthCheckGRPC}
	supportedHealthMethods     = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH"}
	supportedUpstreamProtocols = []UpstreamProtocol{UpstreamHTTP1, UpstreamHTTP2}
	supportedTLSVersions       = []TLSVersion{TLSv12, TLSv13}
	supportedRetryOn           = []RetryOn{RetryOnConnectFailure, RetryOnReset, RetryOn5xx, RetryOnGatewayError, RetryOnRetriableStatus, RetryOnRefusedStream}
	supportedSessionTypes      = []SessionPersistenceType{SessionCookie, SessionHeader}
	supportedDrainingSessions  = []DrainingSessions{DrainingSessionsKeep, DrainingSessionsMove}
	// The TLS 1.2 suites BoringSSL (Envoy's TLS library) implements, by OpenSSL name.
	supportedCiphers = []string{
		"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
		"ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
		"ECDHE-ECDSA-AES128-SHA", "ECDHE-RSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA", "ECDHE-RSA-AES256-SHA",
		"AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-SHA", "AES256-SHA",
	}

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
	spec := newPath("spec")
	s := &p.Spec
	if !isDNSSubdomain(s.ProxyGroup) {
		v.add(spec.child("proxyGroup"), "must be lowercase letters, digits, '-' and '.', at most 253 characters, got %q", s.ProxyGroup)
	}
	v.listener(spec.child("listener"), &s.Listener)
	v.answersAll = answersAll(s.Routes)
	backends := v.backends(spec.child("backends"), s.Backends)
	v.routes(spec.child("routes"), s, backends)
	v.debugHeaders(spec.child("debugHeaders"), s)
	v.listenerLimits(spec, s)
	v.routeLimitsAndMirrors(spec, s, backends)
	v.backendConnections(spec, s)
	v.specFeatures(spec, s)
	v.rollout(spec.child("rollout"), s.Rollout, s, backends)
	return fromErrorList(v.errs)
}

type validator struct {
	errs field.ErrorList
	// answersAll: the policy has routes and every one answers by itself (redirect, directResponse), so it
	// needs no backend.
	answersAll bool
}

// SupportedAlgorithms lists the algorithms a backend may name, in a fixed order.
func SupportedAlgorithms() []Algorithm { return slices.Clone(supportedAlgorithms) }

func (v *validator) add(p path, format string, args ...any) {
	v.errs = append(v.errs, &field.Error{Type: field.ErrorTypeInvalid, Field: p.String(), BadValue: field.OmitValueType{}, Detail: fmt.Sprintf(format, args...)})
}

func (v *validator) meta(p *LoadBalancerPolicy) {
	if p.APIVersion != APIVersion {
		v.add(newPath("apiVersion"), "must be %q, got %q", APIVersion, p.APIVersion)
	}
	if p.Kind != Kind {
		v.add(newPath("kind"), "must be %q, got %q", Kind, p.Kind)
	}
	switch {
	case p.Name == "":
		v.add(newPath("metadata").child("name"), "required")
	case !isDNSSubdomain(p.Name):
		v.add(newPath("metadata").child("name"), "must be lowercase letters, digits, '-' and '.', at most 253 characters, got %q", clip(p.Name))
	}
	if !isDNSLabel(p.Namespace) {
		v.add(newPath("metadata").child("namespace"), "must be a DNS label (lowercase letters, digits, '-'), got %q", clip(p.Namespace))
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
		v.add(p.child("protocol"), "required; supported: HTTP, HTTPS, TCP")
	case !oneOf(l.Protocol, supportedProtocols):
		v.add(p.child("protocol"), "%s", unsupported(l.Protocol, supportedProtocols))
	}
	switch {
	case l.Protocol == ProtocolHTTPS && l.TLS == nil:
		v.add(p.child("tls"), "required with protocol HTTPS")
	case l.Protocol != ProtocolHTTPS && l.TLS != nil:
		v.add(p.child("tls"), "only allowed with protocol HTTPS, got %q", l.Protocol)
	case l.TLS != nil:
		v.listenerTLS(p.child("tls"), l.TLS)
		v.certificateNames(p.child("tls").child("certificates"), l.TLS)
	}
	if len(l.Hostnames) > 0 && l.Protocol == ProtocolTCP {
		v.add(p.child("hostnames"), "not allowed on a TCP listener: TCP carries no Host header")
	}
	v.listenerEdge(p, l)
	if len(l.Hostnames) > MaxHostnames {
		v.add(p.child("hostnames"), "at most %d hostnames, got %d", MaxHostnames, len(l.Hostnames))
		return
	}
	seen := map[string]bool{}
	for i, h := range l.Hostnames {
		hp := p.child("hostnames").index(i)
		if !isHostname(h) {
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
		if !v.answersAll {
			v.add(p, "at least one backend is required (unless every route has redirect or directResponse)")
		}
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
		case !isDNSLabel(b.Name):
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
		v.healthCheck(bp.child("healthCheck"), b.HealthCheck)
		if hc := b.HealthCheck; hc != nil && hc.Active != nil && hc.Active.Type == HealthCheckGRPC &&
			(b.Connection == nil || b.Connection.Protocol != UpstreamHTTP2) {
			v.add(bp.child("healthCheck").child("active").child("type"), "GRPC needs connection.protocol: HTTP2 (gRPC runs over HTTP/2)")
		}
		v.connection(bp.child("connection"), b.Connection)
		v.backendTLS(bp.child("tls"), b.TLS)
		if b.Service != nil {
			v.service(bp.child("service"), b.Service)
		}
		v.loadBalancing(bp.child("loadBalancing"), &b.LoadBalancing)
		if !oneOf(b.DrainingSessions, supportedDrainingSessions) {
			v.add(bp.child("drainingSessions"), "%s", unsupported(b.DrainingSessions, supportedDrainingSessions))
		}
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
		if net.ParseIP(e.Address) == nil && !isDNSSubdomain(e.Address) {
			v.add(ep.child("address"), "must be an IP address or a lowercase DNS name, got %q", clip(e.Address))
		}
		if e.Port < 1 || e.Port > 65535 {
			v.add(ep.child("port"), "must be between 1 and 65535, got %d", e.Port)
		}
		if w := *e.Weight; w < 1 || w > MaxWeight {
			v.add(ep.child("weight"), "must be between 1 and %d, got %d", MaxWeight, w)
		}
		if !oneOf(e.State, supportedEndpointStates) {
			v.add(ep.child("state"), "%s", unsupported(e.State, supportedEndpointStates))
		}
		if e.Zone != "" {
			v.zone(ep.child("zone"), e.Zone)
		}
		key := net.JoinHostPort(e.Address, fmt.Sprint(e.Port))
		if j, dup := seen[key]; dup {
			v.add(ep, "duplicate endpoint %s (also at index %d)", key, j)
		} else {
			seen[key] = i
		}
	}
}

func (v *validator) zone(p path, z string) {
	if !IsZoneName(z) {
		v.add(p, "must be a zone name (letters, digits, '-', '_', '.'; at most 63), got %q", clip(z))
	}
}

func (v *validator) service(p path, s *ServiceRef) {
	if !isDNSLabel(s.Name) {
		v.add(p.child("name"), "must be a Service name (DNS label), got %q", clip(s.Name))
	}
	if s.Namespace != "" && !isDNSLabel(s.Namespace) {
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
	hashing := lb.Algorithm == AlgorithmRingHash || lb.Algorithm == AlgorithmMaglev
	if rh := lb.RingHash; rh != nil {
		if lb.Algorithm != AlgorithmRingHash {
			v.add(p.child("ringHash"), "only allowed with algorithm RingHash, got %q", lb.Algorithm)
		} else {
			v.intRange(p.child("ringHash").child("minimumRingSize"), *rh.MinimumRingSize, 1, DefaultMaxRingSize)
			v.intRange(p.child("ringHash").child("maximumRingSize"), *rh.MaximumRingSize, *rh.MinimumRingSize, DefaultMaxRingSize)
		}
	}
	if mg := lb.Maglev; mg != nil {
		if lb.Algorithm != AlgorithmMaglev {
			v.add(p.child("maglev"), "only allowed with algorithm Maglev, got %q", lb.Algorithm)
		} else if t := *mg.TableSize; t < 1 || t > 5000011 || !isPrime(t) {
			v.add(p.child("maglev").child("tableSize"), "must be a prime number up to 5000011, got %d", t)
		}
	}
	if len(lb.HashKeys) > 0 && !hashing {
		v.add(p.child("hashKeys"), "only allowed with algorithm RingHash or Maglev, got %q: other algorithms ignore hash keys", lb.Algorithm)
	}
	if len(lb.HashKeys) > MaxHashKeys {
		v.add(p.child("hashKeys"), "at most %d hash keys, got %d", MaxHashKeys, len(lb.HashKeys))
		return
	}
	for i, k := range lb.HashKeys {
		v.hashKey(p.child("hashKeys").index(i), k)
	}
	if len(lb.ZoneFailover) > MaxZones {
		v.add(p.child("zoneFailover"), "at most %d zones, got %d", MaxZones, len(lb.ZoneFailover))
	} else {
		seen := map[string]int{}
		for i, z := range lb.ZoneFailover {
			v.zone(p.child("zoneFailover").index(i), z)
			if j, dup := seen[z]; dup {
				v.add(p.child("zoneFailover").index(i), "duplicate zone %q (also at index %d)", clip(z), j)
			}
			seen[z] = i
		}
	}
	if ss := lb.SlowStart; ss != nil {
		sp := p.child("slowStart")
		if lb.Algorithm != AlgorithmRoundRobin && lb.Algorithm != AlgorithmLeastRequest {
			v.add(sp, "only allowed with algorithm RoundRobin or LeastRequest, got %q", lb.Algorithm)
		}
		v.duration(sp.child("window"), ss.Window.Duration, false)
		v.decimal(sp.child("aggression"), ss.Aggression)
		v.intRange(sp.child("minWeightPercent"), int64(*ss.MinWeightPercent), 0, 100)
	}
}

func (v *validator) hashKey(p path, k HashKey) {
	n := 0
	for _, set := range []bool{k.Header != nil, k.Cookie != nil, k.SourceIP != nil, k.QueryParameter != nil, k.Path != nil, k.Host != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		v.add(p, "set exactly one of header, cookie, sourceIP, queryParameter, path and host, got %d", n)
		return
	}
	switch {
	case k.Header != nil:
		v.token(p.child("header").child("name"), k.Header.Name, "an HTTP header name")
	case k.QueryParameter != nil:
		if k.QueryParameter.Name == "" || len(k.QueryParameter.Name) > 256 || strings.ContainsAny(k.QueryParameter.Name, "&=# ") {
			v.add(p.child("queryParameter").child("name"), "must be a query parameter name (no '&', '=', '#' or spaces, at most 256), got %q", clip(k.QueryParameter.Name))
		}
	case k.Cookie != nil:
		cp := p.child("cookie")
		v.token(cp.child("name"), k.Cookie.Name, "a cookie name")
		if g := k.Cookie.Generate; g != nil {
			gp := cp.child("generate")
			v.duration(gp.child("ttl"), g.TTL.Duration, true)
			v.cookiePath(gp.child("path"), g.Path)
			if !oneOf(g.SameSite, supportedSameSite) {
				v.add(gp.child("sameSite"), "%s", unsupported(g.SameSite, supportedSameSite))
			} else if g.SameSite == SameSiteNone && !g.Secure {
				v.add(gp.child("sameSite"), "None requires secure: true (browsers drop SameSite=None cookies that are not Secure)")
			}
		}
	}
}

func (v *validator) token(p path, s, what string) {
	if len(s) > 256 || !headerNameRe.MatchString(s) {
		v.add(p, "must be %s (token characters, at most 256), got %q", what, clip(s))
	}
}

func (v *validator) cookiePath(p path, s string) {
	if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "; \t\r\n") || len(s) > 1024 {
		v.add(p, "must start with \"/\" and contain no ';' or white space, got %q", clip(s))
	}
}

func (v *validator) intRange(p path, got, lo, hi int64) {
	if got < lo || got > hi {
		v.add(p, "must be between %d and %d, got %d", lo, hi, got)
	}
}

func (v *validator) decimal(p path, s string) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1000 || math.IsNaN(f) {
		v.add(p, "must be a decimal number greater than 0 and at most 1000, such as \"1.5\", got %q", clip(s))
	}
}

func isPrime(n int64) bool {
	if n < 2 {
		return false
	}
	for d := int64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

func (v *validator) healthCheck(p path, hc *HealthCheck) {
	if hc == nil {
		return
	}
	if hc.Active == nil && hc.Passive == nil && hc.PanicThreshold == nil {
		v.add(p, "set active, passive or panicThreshold")
	}
	if hc.PanicThreshold != nil {
		v.intRange(p.child("panicThreshold"), int64(*hc.PanicThreshold), 0, 100)
	}
	if a := hc.Active; a != nil {
		ap := p.child("active")
		if !oneOf(a.Type, supportedHealthTypes) {
			v.add(ap.child("type"), "%s", unsupported(a.Type, supportedHealthTypes))
		}
		v.duration(ap.child("interval"), a.Interval.Duration, false)
		v.duration(ap.child("timeout"), a.Timeout.Duration, false)
		v.duration(ap.child("jitter"), a.Jitter.Duration, true)
		v.intRange(ap.child("healthyThreshold"), int64(*a.HealthyThreshold), 1, 100)
		v.intRange(ap.child("unhealthyThreshold"), int64(*a.UnhealthyThreshold), 1, 100)
		if a.Port != nil {
			v.intRange(ap.child("port"), int64(*a.Port), 1, 65535)
		}
		for _, f := range []struct {
			typ HealthCheckType
			set bool
		}{{HealthCheckHTTP, a.HTTP != nil}, {HealthCheckTCP, a.TCP != nil}, {HealthCheckGRPC, a.GRPC != nil}} {
			if f.set && a.Type != f.typ {
				v.add(ap.child(strings.ToLower(string(f.typ))), "only allowed with type %s, got %q", f.typ, a.Type)
			}
		}
		if h := a.HTTP; h != nil && a.Type == HealthCheckHTTP {
			hp := ap.child("http")
			if !strings.HasPrefix(h.Path, "/") || strings.ContainsAny(h.Path, " \t\r\n") || len(h.Path) > maxStringLength {
				v.add(hp.child("path"), "must start with \"/\" and contain no white space, got %q", clip(h.Path))
			}
			if !oneOf(h.Method, supportedHealthMethods) {
				v.add(hp.child("method"), "%s", unsupported(h.Method, supportedHealthMethods))
			}
			if h.Host != "" && (len(h.Host) > maxNameLength || strings.ContainsAny(h.Host, " \t\r\n/")) {
				v.add(hp.child("host"), "must be a host name, optionally with a port, got %q", clip(h.Host))
			}
			for i, r := range h.ExpectedStatuses {
				rp := hp.child("expectedStatuses").index(i)
				if r.Start < 100 || r.Start > 599 || r.End < r.Start || r.End > 599 {
					v.add(rp, "must be an inclusive range within 100-599 with start <= end, got %d-%d", r.Start, r.End)
				}
			}
			if len(h.ExpectedBody) > 1024 {
				v.add(hp.child("expectedBody"), "at most 1024 bytes, got %d", len(h.ExpectedBody))
			}
		}
		if t := a.TCP; t != nil && a.Type == HealthCheckTCP {
			if len(t.Send) > 1024 || len(t.Receive) > 1024 {
				v.add(ap.child("tcp"), "send and receive are at most 1024 bytes each")
			}
		}
		if g := a.GRPC; g != nil && len(g.ServiceName) > maxNameLength {
			v.add(ap.child("grpc").child("serviceName"), "at most %d characters", maxNameLength)
		}
	}
	if ps := hc.Passive; ps != nil && !ps.Disabled {
		pp := p.child("passive")
		for _, f := range []struct {
			name string
			val  *int32
		}{{"consecutive5xx", ps.Consecutive5xx}, {"consecutiveGatewayErrors", ps.ConsecutiveGatewayErrors},
			{"consecutiveLocalOriginFailures", ps.ConsecutiveLocalOriginFailures}} {
			if f.val != nil {
				v.intRange(pp.child(f.name), int64(*f.val), 1, 1000)
			}
		}
		if ps.Consecutive5xx == nil && ps.ConsecutiveGatewayErrors == nil && ps.ConsecutiveLocalOriginFailures == nil &&
			ps.SuccessRate == nil && ps.FailurePercentage == nil {
			v.add(pp, "set at least one detector: consecutive5xx, consecutiveGatewayErrors, consecutiveLocalOriginFailures, successRate or failurePercentage")
		}
		if sr := ps.SuccessRate; sr != nil {
			sp := pp.child("successRate")
			v.decimal(sp.child("stdevFactor"), sr.StdevFactor)
			v.intRange(sp.child("minimumHosts"), int64(*sr.MinimumHosts), 1, 10000)
			v.intRange(sp.child("requestVolume"), int64(*sr.RequestVolume), 1, 1000000)
		}
		if fp := ps.FailurePercentage; fp != nil {
			fpp := pp.child("failurePercentage")
			v.intRange(fpp.child("threshold"), int64(*fp.Threshold), 0, 100)
			v.intRange(fpp.child("minimumHosts"), int64(*fp.MinimumHosts), 1, 10000)
			v.intRange(fpp.child("requestVolume"), int64(*fp.RequestVolume), 1, 1000000)
		}
		v.duration(pp.child("interval"), ps.Interval.Duration, false)
		v.duration(pp.child("baseEjectionTime"), ps.BaseEjectionTime.Duration, false)
		v.intRange(pp.child("maxEjectionPercent"), int64(*ps.MaxEjectionPercent), 0, 100)
	}
}

func (v *validator) connection(p path, c *Connection) {
	if c == nil {
		return
	}
	if !oneOf(c.Protocol, supportedUpstreamProtocols) {
		v.add(p.child("protocol"), "%s", unsupported(c.Protocol, supportedUpstreamProtocols))
	}
	if c.MaxRequestsPerConnection != nil {
		v.intRange(p.child("maxRequestsPerConnection"), int64(*c.MaxRequestsPerConnection), 1, 1<<30)
	}
	if c.IdleTimeout != nil {
		v.duration(p.child("idleTimeout"), c.IdleTimeout.Duration, false)
	}
	if c.BufferBytes != nil {
		v.intRange(p.child("bufferBytes"), int64(*c.BufferBytes), 1024, 16<<20)
	}
	if k := c.TCPKeepalive; k != nil {
		kp := p.child("tcpKeepalive")
		for _, f := range []struct {
			name string
			d    *metav1.Duration
		}{{"time", k.Time}, {"interval", k.Interval}} {
			if f.d != nil && (f.d.Duration < time.Second || f.d.Duration%time.Second != 0 || f.d.Duration > 24*time.Hour) {
				v.add(kp.child(f.name), "must be a whole number of seconds between 1s and 24h, got %s", f.d.Duration)
			}
		}
		if k.Probes != nil {
			v.intRange(kp.child("probes"), int64(*k.Probes), 1, 100)
		}
	}
}

func (v *validator) backendTLS(p path, t *BackendTLS) {
	if t == nil {
		return
	}
	switch {
	case t.InsecureSkipVerify && t.CAFile != "":
		v.add(p, "set caFile or insecureSkipVerify, not both")
	case !t.InsecureSkipVerify && t.CAFile == "":
		v.add(p.child("caFile"), "required: without it any certificate would be accepted (set insecureSkipVerify to mean that)")
	case !t.InsecureSkipVerify && t.SNI == "" && !t.AutoSNI:
		v.add(p.child("sni"), "required to verify the endpoints' certificates")
	}
	if t.SNI != "" && !isDNSSubdomain(t.SNI) {
		v.add(p.child("sni"), "must be a lowercase DNS name, got %q", clip(t.SNI))
	}
	v.filePath(p.child("caFile"), t.CAFile)
}

// certificateNames rejects what Envoy would: two filter chains for one SNI name.
func (v *validator) certificateNames(p path, t *ListenerTLS) {
	nameless := -1
	owner := map[string]int{}
	for i, c := range t.Certificates {
		if len(c.Hostnames) == 0 {
			if nameless >= 0 {
				v.add(p.index(i).child("hostnames"), "required: certificates[%d] already has none, and only one certificate can serve the names no other lists", nameless)
			}
			nameless = i
			continue
		}
		for _, h := range c.Hostnames {
			if j, dup := owner[h]; dup {
				v.add(p.index(i).child("hostnames"), "%q is already served by certificates[%d]", h, j)
			} else {
				owner[h] = i
			}
		}
	}
}

func (v *validator) filePath(p path, f string) {
	if f != "" && (len(f) > maxStringLength || strings.ContainsRune(f, 0)) {
		v.add(p, "must be a file path, got %q", clip(f))
	}
}

func (v *validator) listenerTLS(p path, t *ListenerTLS) {
	if len(t.Certificates) == 0 {
		v.add(p.child("certificates"), "at least one certificate is required")
	}
	if len(t.Certificates) > MaxCertificates {
		v.add(p.child("certificates"), "at most %d certificates, got %d", MaxCertificates, len(t.Certificates))
		return
	}
	for i, c := range t.Certificates {
		cp := p.child("certificates").index(i)
		v.keyPairSource(cp, c.CertificateFile, c.PrivateKeyFile, c.SecretName)
		switch {
		case c.SecretNamespace != "" && c.SecretName == "":
			v.add(cp.child("secretNamespace"), "goes with secretName")
		case c.SecretNamespace != "" && !isDNSLabel(c.SecretNamespace):
			v.add(cp.child("secretNamespace"), "must be a namespace name (DNS label), got %q", clip(c.SecretNamespace))
		}
		for j, h := range c.Hostnames {
			if !isHostname(h) {
				v.add(cp.child("hostnames").index(j), "must be a lowercase DNS name, optionally starting with \"*.\", got %q", clip(h))
			}
		}
	}
	if !oneOf(t.MinVersion, supportedTLSVersions) {
		v.add(p.child("minVersion"), "%s", unsupported(t.MinVersion, supportedTLSVersions))
	}
	if !oneOf(t.MaxVersion, supportedTLSVersions) {
		v.add(p.child("maxVersion"), "%s", unsupported(t.MaxVersion, supportedTLSVersions))
	}
	if t.MinVersion == TLSv13 && t.MaxVersion == TLSv12 {
		v.add(p.child("maxVersion"), "must not be lower than minVersion")
	}
	for i, c := range t.CipherSuites {
		if !oneOf(c, supportedCiphers) {
			v.add(p.child("cipherSuites").index(i), "%s", unsupported(c, supportedCiphers))
		}
	}
	if len(t.CipherSuites) > 0 && t.MinVersion == TLSv13 {
		v.add(p.child("cipherSuites"), "not allowed with minVersion TLSv1.3: TLS 1.3 suites are not configurable")
	}
}

func (v *validator) circuitBreakers(p path, cb *CircuitBreakers) {
	for _, f := range []struct {
		name string
		val  *int32
	}{{"maxConnections", cb.MaxConnections}, {"maxPendingRequests", cb.MaxPendingRequests}, {"maxRequests", cb.MaxRequests},
		{"maxRetries", cb.MaxRetries}, {"maxConnectionsPerEndpoint", cb.MaxConnectionsPerEndpoint}} {
		if f.val != nil && *f.val < 1 {
			v.add(p.child(f.name), "must be at least 1, got %d", *f.val)
		}
	}
	if rb := cb.RetryBudget; rb != nil {
		v.intRange(p.child("retryBudget").child("percent"), int64(*rb.Percent), 0, 100)
		v.intRange(p.child("retryBudget").child("minConcurrency"), int64(*rb.MinConcurrency), 0, 1<<20)
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
		case !isDNSLabel(r.Name):
			v.add(rp.child("name"), "must be a DNS label (lowercase letters, digits, '-', at most 63), got %q", clip(r.Name))
		case names[r.Name]:
			v.add(rp.child("name"), "duplicate route name %q", r.Name)
		}
		names[r.Name] = true
		v.match(rp.child("match"), &r.Match)
		v.duration(rp.child("timeout"), r.Timeout.Duration, true)
		if r.IdleTimeout != nil {
			v.duration(rp.child("idleTimeout"), r.IdleTimeout.Duration, true)
		}
		v.retry(rp.child("retry"), r.Retry)
		v.session(rp.child("sessionPersistence"), r.SessionPersistence)
		v.routeAction(rp, r, backends)
	}
}

func (v *validator) retry(p path, r *Retry) {
	if r == nil {
		return
	}
	statusOn := false
	for i, on := range r.Conditions {
		if !oneOf(on, supportedRetryOn) {
			v.add(p.child("conditions").index(i), "%s", unsupported(on, supportedRetryOn))
		}
		statusOn = statusOn || on == RetryOnRetriableStatus
	}
	switch {
	case statusOn && len(r.StatusCodes) == 0:
		v.add(p.child("statusCodes"), "required when conditions has retriable-status-codes")
	case !statusOn && len(r.StatusCodes) > 0:
		v.add(p.child("statusCodes"), "only allowed when conditions has retriable-status-codes")
	}
	for i, c := range r.StatusCodes {
		v.intRange(p.child("statusCodes").index(i), int64(c), 100, 599)
	}
	v.intRange(p.child("attempts"), int64(*r.Attempts), 0, 10)
	if r.PerTryTimeout != nil {
		v.duration(p.child("perTryTimeout"), r.PerTryTimeout.Duration, false)
	}
	v.duration(p.child("backoff").child("base"), r.Backoff.Base.Duration, false)
	v.duration(p.child("backoff").child("max"), r.Backoff.Max.Duration, false)
	if r.Backoff.Max.Duration < r.Backoff.Base.Duration {
		v.add(p.child("backoff").child("max"), "must not be less than base (%s), got %s", r.Backoff.Base.Duration, r.Backoff.Max.Duration)
	}
}

func (v *validator) session(p path, s *SessionPersistence) {
	if s == nil {
		return
	}
	if !oneOf(s.Type, supportedSessionTypes) {
		v.add(p.child("type"), "%s", unsupported(s.Type, supportedSessionTypes))
	}
	v.token(p.child("name"), s.Name, "a cookie or header name")
	if s.Type == SessionHeader {
		if s.TTL != nil || s.Path != "" {
			v.add(p, "ttl and path are only allowed with type Cookie")
		}
		if s.AcrossBackends {
			v.add(p.child("acrossBackends"), "only allowed with type Cookie")
		}
		return
	}
	if s.TTL != nil {
		v.duration(p.child("ttl"), s.TTL.Duration, true)
	}
	v.cookiePath(p.child("path"), s.Path)
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
		case m.Path.Type == PathMatchRegex:
			if _, err := regexp.Compile(m.Path.Value); err != nil {
				v.add(pp.child("value"), "invalid regular expression: %v", err)
			}
		case strings.ContainsAny(m.Path.Value, "?# \t\r\n"):
			v.add(pp.child("value"), "must not contain '?', '#' or white space, got %q", clip(m.Path.Value))
		}
	}
	v.queryParams(p.child("queryParams"), m.QueryParams)
	if m.Method != "" && !oneOf(m.Method, supportedMethods) {
		v.add(p.child("method"), "%s", unsupported(m.Method, supportedMethods))
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

// debugHeaders are response headers: a TCP listener has none to add them to.
func (v *validator) debugHeaders(p path, s *LoadBalancerPolicySpec) {
	if s.DebugHeaders && s.Listener.Protocol == ProtocolTCP {
		v.add(p, "only allowed on HTTP and HTTPS listeners")
	}
}

// keyPairSource validates where a certificate and its private key come from, at p: both files, or a Secret,
// not both.
func (v *validator) keyPairSource(p path, certFile, keyFile, secretName string) {
	files := certFile != "" || keyFile != ""
	switch {
	case files && secretName != "":
		v.add(p, "set certificateFile and privateKeyFile, or secretName, not both")
	case !files && secretName == "":
		v.add(p, "set certificateFile and privateKeyFile, or secretName")
	case files && (certFile == "" || keyFile == ""):
		v.add(p, "certificateFile and privateKeyFile go together")
	}
	v.filePath(p.child("certificateFile"), certFile)
	v.filePath(p.child("privateKeyFile"), keyFile)
}
