package translate

import (
	"math"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

// listenerEdge resolves a policy's listener hardening (spec.listener.limits, timeouts, http2, requests) to
// values, with the edge defaults for whatever it leaves unset. On a shared port the listener keeps the
// settings of the policy that created it (the oldest; see edgeConflict), since Envoy has one connection
// manager per port.
func listenerEdge(p *v1alpha1.LoadBalancerPolicy) ir.Edge {
	l := &p.Spec.Listener
	e := ir.Edge{
		BufferBytes:                  v1alpha1.DefaultConnectionBufferBytes,
		MaxRequestHeadersKB:          v1alpha1.DefaultMaxRequestHeadersKB,
		MaxHeadersCount:              v1alpha1.DefaultMaxHeadersCount,
		RequestHeadersTimeout:        v1alpha1.DefaultRequestHeadersTimeout,
		StreamIdleTimeout:            v1alpha1.DefaultStreamIdleTimeout,
		ConnectionIdleTimeout:        v1alpha1.DefaultConnectionIdleTimeout,
		HTTP2:                        l.Protocol == v1alpha1.ProtocolHTTPS,
		HTTP2MaxConcurrentStreams:    v1alpha1.DefaultHTTP2MaxConcurrentStreams,
		HTTP2InitialStreamWindow:     v1alpha1.DefaultHTTP2InitialStreamWindow,
		HTTP2InitialConnectionWindow: v1alpha1.DefaultHTTP2InitialConnectionWindow,
		HeadersWithUnderscores:       "REJECT_REQUEST",
		NormalizePath:                true,
		MergeSlashes:                 true,
		EscapedSlashes:               "UNESCAPE_AND_REDIRECT",
	}
	if lim := l.Limits; lim != nil {
		setU32(&e.MaxConnections, lim.MaxConnections)
		setU32(&e.BufferBytes, lim.ConnectionBufferBytes)
		setU32(&e.MaxRequestHeadersKB, lim.MaxRequestHeadersKB)
		setU32(&e.MaxHeadersCount, lim.MaxHeadersCount)
	}
	if t := l.Timeouts; t != nil {
		if t.RequestHeaders != nil {
			e.RequestHeadersTimeout = t.RequestHeaders.Duration
		}
		if t.StreamIdle != nil {
			e.StreamIdleTimeout = t.StreamIdle.Duration
		}
		if t.ConnectionIdle != nil {
			e.ConnectionIdleTimeout = t.ConnectionIdle.Duration
		}
	}
	if h := l.HTTP2; h != nil {
		if h.Enabled != nil {
			e.HTTP2 = *h.Enabled
		}
		setU32(&e.HTTP2MaxConcurrentStreams, h.MaxConcurrentStreams)
		setU32(&e.HTTP2InitialStreamWindow, h.InitialStreamWindowSize)
		setU32(&e.HTTP2InitialConnectionWindow, h.InitialConnectionWindowSize)
	}
	if r := l.Requests; r != nil {
		switch r.HeadersWithUnderscores {
		case v1alpha1.UnderscoresDrop:
			e.HeadersWithUnderscores = "DROP_HEADER"
		case v1alpha1.UnderscoresAllow:
			e.HeadersWithUnderscores = "ALLOW"
		}
		if r.NormalizePath != nil {
			e.NormalizePath = *r.NormalizePath
		}
		if r.MergeSlashes != nil {
			e.MergeSlashes = *r.MergeSlashes
		}
		switch r.EscapedSlashes {
		case v1alpha1.EscapedSlashesKeep:
			e.EscapedSlashes = "KEEP_UNCHANGED"
		case v1alpha1.EscapedSlashesReject:
			e.EscapedSlashes = "REJECT_REQUEST"
		case v1alpha1.EscapedSlashesUnescapeAndForward:
			e.EscapedSlashes = "UNESCAPE_AND_FORWARD"
		}
	}
	edgeProxyProtocolAndRateLimit(&e, l)
	if a := l.AccessLog; a != nil {
		e.AccessLog = ir.AccessLog{Format: ir.AccessLogJSON}
		switch {
		case a.Disabled:
			e.AccessLog.Format = ir.AccessLogOff
		case a.Format == v1alpha1.AccessLogText:
			e.AccessLog.Format = ir.AccessLogText
		}
		if s := a.SamplePercent; s != nil && !a.Disabled && *s < 100 {
			// At least one in a million: validation refuses 0 and below.
			e.AccessLog.SamplePerMillion = max(uint32(math.Round(*s*10000)), 1)
		}
	}
	return e
}

// accessLogOf is what a listener whose owner has edge e logs: the owner's setting, or the server's default.
func accessLogOf(e ir.Edge, def ir.AccessLog) ir.AccessLog {
	if e.AccessLog != (ir.AccessLog{}) {
		return e.AccessLog
	}
	return def
}

// clusterBufferBytes is the per-connection buffer limit towards a backend's endpoints.
func clusterBufferBytes(b *v1alpha1.Backend) uint32 {
	if c := b.Connection; c != nil && c.BufferBytes != nil {
		return uint32(*c.BufferBytes)
	}
	return v1alpha1.DefaultConnectionBufferBytes
}

func setU32(dst *uint32, v *int32) {
	if v != nil {
		*dst = uint32(*v)
	}
}

// edgeConflict says which of the policy's listener hardening fields differ from those of the listener it
// joins (owner), or "". One Envoy listener serves a port, so its settings cannot differ per policy; a policy
// that leaves them all unset takes the listener's as they are.
func edgeConflict(owner ir.Edge, p *v1alpha1.LoadBalancerPolicy) string {
	if !setsEdge(p) || listenerEdge(p) == owner {
		return ""
	}
	return edgeConflictMessage
}

const edgeConflictMessage = "spec.listener: sets other limits, timeouts, http2, requests, proxyProtocol, rateLimit or accessLog"

// setsEdge tells whether a policy sets any of its listener's hardening fields.
func setsEdge(p *v1alpha1.LoadBalancerPolicy) bool {
	l := &p.Spec.Listener
	return l.Limits != nil || l.Timeouts != nil || l.HTTP2 != nil || l.Requests != nil || l.ProxyProtocol != nil || l.RateLimit != nil || l.AccessLog != nil
}

// DefaultProxyProtocolTrusted are the senders a PROXY protocol listener trusts when its policy lists none:
// loopback only (a balancer on the same host).
var DefaultProxyProtocolTrusted = []string{"127.0.0.0/8", "::1/128"}

// edgeProxyProtocolAndRateLimit adds the listener's PROXY protocol and connection rate limit to its edge settings: both are
// per port, so they are owned and compared like the rest of the edge (see edgeConflict).
func edgeProxyProtocolAndRateLimit(e *ir.Edge, l *v1alpha1.Listener) {
	if pp := l.ProxyProtocol; pp != nil {
		e.AcceptProxyProtocol, e.ProxyProtocolOptional = true, pp.Optional
		trusted := DefaultProxyProtocolTrusted
		if len(pp.TrustedSources) > 0 {
			trusted = pp.TrustedSources
		}
		e.ProxyProtocolTrusted = strings.Join(trusted, ",")
	}
	if rl := l.RateLimit; rl != nil && l.Protocol == v1alpha1.ProtocolTCP {
		e.ConnectionRateLimit = rateLimit(rl)
	}
}

func rateLimit(rl *v1alpha1.RateLimit) ir.RateLimit {
	return ir.RateLimit{Tokens: uint32(rl.Requests), MaxTokens: uint32(*rl.Burst), Interval: rl.Interval.Duration}
}
