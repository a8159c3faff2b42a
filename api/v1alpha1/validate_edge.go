package v1alpha1

import (
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	supportedAccessLogFormats = []AccessLogFormat{AccessLogJSON, AccessLogText}
	supportedUnderscores      = []HeadersWithUnderscores{UnderscoresReject, UnderscoresDrop, UnderscoresAllow}
	supportedEscapedSlashes   = []EscapedSlashes{EscapedSlashesKeep, EscapedSlashesReject, EscapedSlashesUnescapeAndRedirect, EscapedSlashesUnescapeAndForward}
)

// listenerEdge validates the listener's hardening overrides (limits, timeouts, http2, requests) and its
// access log.
func (v *validator) listenerEdge(p path, l *Listener) {
	if a := l.AccessLog; a != nil {
		ap := p.child("accessLog")
		if a.Format != "" && !oneOf(a.Format, supportedAccessLogFormats) {
			v.add(ap.child("format"), "%s", unsupported(a.Format, supportedAccessLogFormats))
		}
		if s := a.SamplePercent; s != nil && (!(*s > 0) || *s > 100) {
			v.add(ap.child("samplePercent"), "must be above 0 and at most 100 (use disabled: true to log nothing), got %v", *s)
		}
		if a.Disabled && (a.Format != "" || a.SamplePercent != nil) {
			v.add(ap, "format and samplePercent have no effect with disabled: true")
		}
	}
	if lim := l.Limits; lim != nil {
		lp := p.child("limits")
		if lim.MaxConnections != nil {
			v.intRange(lp.child("maxConnections"), int64(*lim.MaxConnections), 1, 1<<30)
		}
		if lim.ConnectionBufferBytes != nil {
			v.intRange(lp.child("connectionBufferBytes"), int64(*lim.ConnectionBufferBytes), 1024, 16<<20)
		}
		if lim.MaxRequestHeadersKB != nil {
			v.intRange(lp.child("maxRequestHeadersKB"), int64(*lim.MaxRequestHeadersKB), 1, 8192)
		}
		if lim.MaxHeadersCount != nil {
			v.intRange(lp.child("maxHeadersCount"), int64(*lim.MaxHeadersCount), 1, 10000)
		}
		if l.Protocol == ProtocolTCP && (lim.MaxRequestHeadersKB != nil || lim.MaxHeadersCount != nil) {
			v.add(lp, "maxRequestHeadersKB and maxHeadersCount are not allowed on a TCP listener: TCP has no headers")
		}
	}
	if l.Protocol == ProtocolTCP {
		// HTTP settings on a TCP listener would be silently ignored: refuse them instead.
		for _, f := range []struct {
			name string
			set  bool
		}{{"timeouts", l.Timeouts != nil}, {"http2", l.HTTP2 != nil}, {"requests", l.Requests != nil}} {
			if f.set {
				v.add(p.child(f.name), "not allowed on a TCP listener: it applies to HTTP only")
			}
		}
		return
	}
	if t := l.Timeouts; t != nil {
		tp := p.child("timeouts")
		for _, f := range []struct {
			name string
			d    *metav1.Duration
		}{{"requestHeaders", t.RequestHeaders}, {"streamIdle", t.StreamIdle}, {"connectionIdle", t.ConnectionIdle}} {
			if f.d != nil {
				v.duration(tp.child(f.name), f.d.Duration, false)
			}
		}
	}
	if h := l.HTTP2; h != nil {
		hp := p.child("http2")
		if h.MaxConcurrentStreams != nil {
			v.intRange(hp.child("maxConcurrentStreams"), int64(*h.MaxConcurrentStreams), 1, 1<<31-1)
		}
		// Envoy refuses windows below the HTTP/2 minimum of 65535 bytes.
		if h.InitialStreamWindowSize != nil {
			v.intRange(hp.child("initialStreamWindowSize"), int64(*h.InitialStreamWindowSize), 65535, 1<<31-1)
		}
		if h.InitialConnectionWindowSize != nil {
			v.intRange(hp.child("initialConnectionWindowSize"), int64(*h.InitialConnectionWindowSize), 65535, 1<<31-1)
		}
	}
	if r := l.Requests; r != nil {
		rp := p.child("requests")
		if r.HeadersWithUnderscores != "" && !oneOf(r.HeadersWithUnderscores, supportedUnderscores) {
			v.add(rp.child("headersWithUnderscores"), "%s", unsupported(r.HeadersWithUnderscores, supportedUnderscores))
		}
		if r.EscapedSlashes != "" && !oneOf(r.EscapedSlashes, supportedEscapedSlashes) {
			v.add(rp.child("escapedSlashes"), "%s", unsupported(r.EscapedSlashes, supportedEscapedSlashes))
		}
	}
}

// listenerLimits validates the listener's connection rate limit and PROXY protocol.
func (v *validator) listenerLimits(spec path, s *LoadBalancerPolicySpec) {
	lp := spec.child("listener")
	if rl := s.Listener.RateLimit; rl != nil {
		if s.Listener.Protocol != ProtocolTCP {
			v.add(lp.child("rateLimit"), "only allowed on a TCP listener, where it limits connections; HTTP listeners limit per route (routes[].rateLimit)")
		} else {
			v.rateLimit(lp.child("rateLimit"), rl)
			if rl.PerClient != nil {
				v.add(lp.child("rateLimit").child("perClient"), "only allowed on routes (routes[].rateLimit.perClient): a TCP listener's limit counts connections")
			}
			if rl.Headers {
				v.add(lp.child("rateLimit").child("headers"), "only allowed on routes: a TCP listener has no headers to add")
			}
		}
	}
	if pp := s.Listener.ProxyProtocol; pp != nil {
		v.trustedSources(lp.child("proxyProtocol").child("trustedSources"), pp.TrustedSources)
	}
}

func (v *validator) rateLimit(p path, rl *RateLimit) {
	v.intRange(p.child("requests"), int64(rl.Requests), 1, 1<<30)
	v.intRange(p.child("burst"), int64(*rl.Burst), 1, 1<<30)
	d := rl.Interval.Duration
	v.duration(p.child("interval"), d, false)
	if d > 0 && d < MinRateLimitInterval {
		v.add(p.child("interval"), "must be at least %s (Envoy's shortest refill), got %s", MinRateLimitInterval, d)
	}
	if c := rl.PerClient; c != nil {
		cp := p.child("perClient")
		v.rateLimit(cp, &RateLimit{Requests: c.Requests, Interval: c.Interval, Burst: c.Burst})
		v.intRange(cp.child("maxClients"), int64(*c.MaxClients), 1, 1000000)
	}
}

// trustedSources accepts network prefixes with no host bits set.
func (v *validator) trustedSources(p path, cidrs []string) {
	if len(cidrs) > 64 {
		v.add(p, "at most 64 entries, got %d", len(cidrs))
		return
	}
	for i, c := range cidrs {
		pfx, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			v.add(p.index(i), "must be a CIDR such as 198.51.100.0/24 or 2001:db8::/32, got %q", clip(c))
		case pfx != pfx.Masked():
			v.add(p.index(i), "has host bits set: the network is %s, got %q", pfx.Masked(), clip(c))
		}
	}
}
