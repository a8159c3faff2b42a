package lint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Rules of proxyless gRPC clients (see GRPC).
const (
	// RuleGRPCRefused: a gRPC client would reject it, so the part named is not served to gRPC clients.
	RuleGRPCRefused = "grpc-refused"
	// RuleGRPCIgnored: a gRPC client takes the config but does nothing with this field.
	RuleGRPCIgnored = "grpc-ignored"
)

func init() {
	Rules = append(Rules,
		struct{ Name, Catches string }{RuleGRPCRefused, "for proxy groups with gRPC clients: a field a proxyless gRPC client would reject (upstream TLS, host-name backends resolved by Envoy, a PROXY header, a TCP listener, a listener without host names); that part is not served to gRPC clients"},
		struct{ Name, Catches string }{RuleGRPCIgnored, "for proxy groups with gRPC clients: a field a proxyless gRPC client accepts and ignores (active health checks, cookie or source-IP hashing, slow start, sessions, rate limits, the listener's own settings)"},
	)
}

// GRPC lints a defaulted, valid policy for the proxyless gRPC clients of its group: what they would reject
// (RuleGRPCRefused: lbplane leaves it out of what they are served, xdsbuild.GRPCRefused) and what they
// ignore (RuleGRPCIgnored). Status shows these findings while a gRPC client of the group is connected;
// lbctl lint --grpc prints them.
func GRPC(p *v1alpha1.LoadBalancerPolicy) []Finding {
	var out []Finding
	refused := func(field, format string, args ...any) {
		out = append(out, Finding{Rule: RuleGRPCRefused, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	ignored := func(field, format string, args ...any) {
		out = append(out, Finding{Rule: RuleGRPCIgnored, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	s := &p.Spec
	l := &s.Listener
	switch {
	case l.Protocol == v1alpha1.ProtocolTCP:
		refused("spec.listener.protocol", "a TCP listener is not served to gRPC clients: they speak HTTP/2 through an API listener")
	case len(l.Hostnames) == 0:
		refused("spec.listener.hostnames", "no host names: a gRPC client asks for the listener named after its target (xds:///host:port), and a policy without host names has none")
	}
	for i, h := range l.Hostnames {
		if strings.Contains(h, "*") {
			ignored(fmt.Sprintf("spec.listener.hostnames[%d]", i), "%q is a wildcard: a gRPC client asks for one name (xds:///host:port), so only exact host names are served to it", h)
		}
	}
	if l.TLS != nil {
		ignored("spec.listener.tls", "a gRPC client connects to the backends itself: the listener's TLS does not protect its calls")
	}
	for _, f := range []struct {
		set  bool
		name string
	}{{l.Limits != nil, "limits"}, {l.Timeouts != nil, "timeouts"}, {l.HTTP2 != nil, "http2"}, {l.Requests != nil, "requests"},
		{l.ProxyProtocol != nil, "proxyProtocol"}, {l.RateLimit != nil, "rateLimit"}} {
		if f.set {
			ignored("spec.listener."+f.name, "Envoy's listener setting: a gRPC client has no listener of its own")
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		bp := fmt.Sprintf("spec.backends[%d]", i)
		if b.TLS != nil {
			refused(bp+".tls", "gRPC clients take upstream TLS as certificate provider instances, lbplane sends it as SDS secrets: the backend is not served to them")
		}
		if b.UsesDNS() && b.DNS != nil && b.DNS.Resolver == v1alpha1.DNSResolverEnvoy {
			refused(bp+".dns.resolver", "Envoy resolves these host names (a DNS cluster gRPC clients do not have): the backend is not served to them; let lbplane resolve them")
		}
		if b.ProxyProtocol != nil {
			refused(bp+".proxyProtocol", "the PROXY header is sent by an Envoy transport socket, which gRPC clients refuse: the backend is not served to them")
		}
		lb := &b.LoadBalancing
		for j, k := range lb.HashKeys {
			if k.Header == nil {
				ignored(fmt.Sprintf("%s.loadBalancing.hashKeys[%d]", bp, j), "gRPC clients hash on request metadata (header keys) only: this key does nothing, and calls without a header key are spread at random")
			}
		}
		for _, f := range []struct {
			set  bool
			name string
		}{{lb.SlowStart != nil, "slowStart"}, {lb.ZoneAware != nil, "zoneAware"}, {lb.HashBalanceFactor != nil, "hashBalanceFactor"},
			{lb.FailoverThreshold != nil, "failoverThreshold"}} {
			if f.set {
				ignored(bp+".loadBalancing."+f.name, "gRPC clients have no such setting")
			}
		}
		if hc := b.HealthCheck; hc != nil && hc.Active != nil {
			ignored(bp+".healthCheck.active", "gRPC clients do not probe: they leave out endpoints by connection state and outlier detection (healthCheck.passive)")
		}
		if b.Connection != nil {
			ignored(bp+".connection", "gRPC clients keep their own connections (one HTTP/2 connection per endpoint)")
		}
		if cb := b.CircuitBreakers; cb != nil && (cb.RetryBudget != nil || cb.MaxConnectionsPerEndpoint != nil) {
			ignored(bp+".circuitBreakers", "gRPC clients read maxRequests only")
		}
	}
	for i := range s.Routes {
		r := &s.Routes[i]
		rp := fmt.Sprintf("spec.routes[%d]", i)
		if rt := r.Retry; rt != nil {
			if len(rt.StatusCodes) > 0 {
				ignored(rp+".retry.statusCodes", "gRPC clients retry on gRPC status codes: every retry condition is sent as UNAVAILABLE")
			}
			if rt.PerTryTimeout != nil {
				ignored(rp+".retry.perTryTimeout", "gRPC clients have no per-try timeout: the route's timeout bounds the call")
			}
		}
		for _, f := range []struct {
			set  bool
			name string
		}{{r.IdleTimeout != nil, "idleTimeout"}, {r.SessionPersistence != nil, "sessionPersistence"}, {r.RateLimit != nil, "rateLimit"}, {len(r.Mirrors) > 0, "mirrors"}} {
			if f.set {
				ignored(rp+"."+f.name, "an Envoy filter or setting gRPC clients do not have")
			}
		}
		if r.ResponseHeaders != nil {
			ignored(rp+".responseHeaders", "gRPC clients do not change the headers of the responses they get")
		}
		if r.Rewrite != nil {
			ignored(rp+".rewrite", "gRPC clients call the method and authority they were given: nothing rewrites them")
		}
	}
	return out
}

// ForClients returns a policy's warnings (Strings of Check and GRPC findings) as a group with or without
// gRPC clients shows them: the gRPC findings only where it has some. refused are then the RuleGRPCRefused
// findings, without the rule name.
func ForClients(warnings []string, grpc bool) (out, refused []string) {
	if !slices.ContainsFunc(warnings, isGRPCFinding) {
		return warnings, nil
	}
	for _, w := range warnings {
		if isGRPCFinding(w) && !grpc {
			continue
		}
		out = append(out, w)
		if r, ok := strings.CutPrefix(w, RuleGRPCRefused+": "); ok {
			refused = append(refused, r)
		}
	}
	return out, refused
}

func isGRPCFinding(w string) bool {
	return strings.HasPrefix(w, RuleGRPCRefused+": ") || strings.HasPrefix(w, RuleGRPCIgnored+": ")
}
