package xdsbuild

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	statefulsessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/stateful_session/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	connlimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

const statefulSessionFilter = "envoy.filters.http.stateful_session"

// Listener builds the listener of one port.
func Listener(l *ir.Listener) *listenerv3.Listener { return listener(l, false) }

func listener(l *ir.Listener, scoped bool) *listenerv3.Listener {
	var filter *listenerv3.Filter
	if l.Protocol == ir.TCP {
		filter = &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(tcpProxy(l))}}
	} else {
		filter = &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(httpConnectionManager(l, scoped))}}
	}
	filters := []*listenerv3.Filter{filter}
	if n := l.Edge.MaxConnections; n > 0 {
		// First in the chain, so that a connection over the limit is closed before any other filter runs.
		filters = []*listenerv3.Filter{connectionLimit(l.Name, n), filter}
	}
	filters = connectionRateLimit(l, filters)
	out := &listenerv3.Listener{Name: l.Name, Address: socketAddress(l.Address, l.Port),
		// Envoy's default is 1 MiB per connection; a client that sends faster than the backend reads (or
		// headers that never end) would otherwise pin that much each.
		PerConnectionBufferLimitBytes: setOrDefault(l.Edge.BufferBytes)}
	defer acceptProxyProtocol(l, out)
	if l.TLS == nil {
		out.FilterChains = []*listenerv3.FilterChain{{Filters: filters}}
		return out
	}
	// SNI picks the filter chain, and with it the certificate.
	out.ListenerFilters = []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.tls_inspector",
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})}}}
	for i, ch := range l.TLS.Chains {
		if i == l.TLS.Default {
			out.DefaultFilterChain = tlsChain(l, ch, filters)
		}
		if len(ch.ServerNames) > 0 {
			fc := tlsChain(l, ch, filters)
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: ch.ServerNames}
			out.FilterChains = append(out.FilterChains, fc)
		}
	}
	return out
}

// connectionLimit closes connections beyond n on one filter chain (Envoy counts per chain, across workers).
func connectionLimit(name string, n uint32) *listenerv3.Filter {
	return &listenerv3.Filter{Name: "envoy.filters.network.connection_limit", ConfigType: &listenerv3.Filter_TypedConfig{
		TypedConfig: mustAny(&connlimitv3.ConnectionLimit{StatPrefix: name, MaxConnections: wrapperspb.UInt64(uint64(n))})}}
}

func tlsChain(l *ir.Listener, ch ir.TLSChain, filters []*listenerv3.Filter) *listenerv3.FilterChain {
	t := l.TLS
	// ALPN decides the protocol on TLS: h2 is offered only when the listener has HTTP/2 on. TCP listeners
	// pass bytes through and announce nothing.
	var alpn []string
	switch {
	case l.Protocol == ir.TCP:
	case l.Edge.HTTP2:
		alpn = []string{"h2", "http/1.1"}
	default:
		alpn = []string{"http/1.1"}
	}
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: ch.Secret, SdsConfig: ads(0)}},
		TlsParams: &tlsv3.TlsParameters{
			TlsMinimumProtocolVersion: tlsv3.TlsParameters_TlsProtocol(tlsv3.TlsParameters_TlsProtocol_value[t.MinVersion]),
			TlsMaximumProtocolVersion: tlsv3.TlsParameters_TlsProtocol(tlsv3.TlsParameters_TlsProtocol_value[t.MaxVersion]),
			CipherSuites:              t.Ciphers,
		},
		AlpnProtocols: alpn,
	}}
	return &listenerv3.FilterChain{
		Filters: filters,
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)}},
	}
}

func tcpProxy(l *ir.Listener) *tcpv3.TcpProxy {
	tp := &tcpv3.TcpProxy{StatPrefix: l.Name, AccessLog: accessLogs(l)}
	if len(l.TCP.Clusters) == 1 {
		tp.ClusterSpecifier = &tcpv3.TcpProxy_Cluster{Cluster: l.TCP.Clusters[0].Name}
	} else {
		wc := &tcpv3.TcpProxy_WeightedCluster{}
		for _, c := range l.TCP.Clusters {
			wc.Clusters = append(wc.Clusters, &tcpv3.TcpProxy_WeightedCluster_ClusterWeight{Name: c.Name, Weight: c.Weight})
		}
		tp.ClusterSpecifier = &tcpv3.TcpProxy_WeightedClusters{WeightedClusters: wc}
	}
	for _, k := range l.TCP.HashKeys {
		// TCP has no headers or cookies: only the client address can be hashed.
		if k.SourceIP {
			tp.HashPolicy = append(tp.HashPolicy, &typev3.HashPolicy{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}})
		}
	}
	return tp
}

func routerFilter(l *ir.Listener) *routerv3.Router {
	if l.NoRouterDynamicStats {
		return &routerv3.Router{DynamicStats: wrapperspb.Bool(false)}
	}
	return &routerv3.Router{}
}

func httpConnectionManager(l *ir.Listener, scoped bool) *hcmv3.HttpConnectionManager {
	filters := slices.Clone(hopFilters())
	if anyRoute(l, func(r *ir.Route) bool { return r.Session != nil }) {
		// Off unless a route turns it on (typed_per_filter_config), so routes without persistence pay nothing.
		filters = append(filters, &hcmv3.HttpFilter{Name: statefulSessionFilter,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&statefulsessionv3.StatefulSession{})}})
	}
	if anyRoute(l, func(r *ir.Route) bool { return r.RateLimit != nil }) {
		filters = append(filters, rateLimitHTTPFilter(l))
	}
	filters = append(filters, &hcmv3.HttpFilter{
		Name: "envoy.filters.http.router",
		// Dynamic stats stay on unless turned off: upstream_rq_time and the per-status counters are what
		// lbplane reports as each backend's latency and errors.
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(routerFilter(l))},
	})
	e := l.Edge
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: l.Name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    ads(0),
			RouteConfigName: l.RouteConfigName(),
		}},
		// A front load balancer: the peer address is the client, and X-Forwarded-For gets it appended.
		UseRemoteAddress: wrapperspb.Bool(true),
		// Request IDs cost a UUID per request and are only useful with tracing, which is off.
		GenerateRequestId: wrapperspb.Bool(false),
		// WebSocket upgrades pass through, as nginx and HAProxy users expect.
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
		HttpFilters:    filters,
		// A looping request is answered 508 with a body that says so (see loop.go).
		LocalReplyConfig: loopReply(),
		// Edge hardening (Envoy's "Configuring Envoy as an edge proxy"): slow clients are cut off, header
		// blocks are bounded (431 beyond), and paths are normalised before routing so that a route's prefix
		// cannot be sidestepped with "..", "//" or an escaped slash.
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{
			IdleTimeout:                  durationpb.New(e.ConnectionIdleTimeout),
			MaxHeadersCount:              setOrDefault(e.MaxHeadersCount),
			HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_HeadersWithUnderscoresAction(corev3.HttpProtocolOptions_HeadersWithUnderscoresAction_value[e.HeadersWithUnderscores]),
		},
		RequestHeadersTimeout:        durationpb.New(e.RequestHeadersTimeout),
		StreamIdleTimeout:            durationpb.New(e.StreamIdleTimeout),
		MaxRequestHeadersKb:          setOrDefault(e.MaxRequestHeadersKB),
		NormalizePath:                wrapperspb.Bool(e.NormalizePath),
		MergeSlashes:                 e.MergeSlashes,
		PathWithEscapedSlashesAction: hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction(hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction_value[e.EscapedSlashes]),
		// HTTP/1.1 only unless the listener turns HTTP/2 on: AUTO would accept h2c prior knowledge on plain
		// HTTP, which the listener did not ask for.
		CodecType: hcmv3.HttpConnectionManager_HTTP1,
		AccessLog: accessLogs(l),
	}
	if scoped {
		hcm.RouteSpecifier = scopedRoutes(l)
	}
	if e.HTTP2 {
		hcm.CodecType = hcmv3.HttpConnectionManager_AUTO
		hcm.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{
			// Extended CONNECT, so that WebSockets work over HTTP/2 as well (RFC 8441).
			AllowConnect:                true,
			MaxConcurrentStreams:        setOrDefault(e.HTTP2MaxConcurrentStreams),
			InitialStreamWindowSize:     setOrDefault(e.HTTP2InitialStreamWindow),
			InitialConnectionWindowSize: setOrDefault(e.HTTP2InitialConnectionWindow),
		}
	}
	return hcm
}

// anyRoute tells whether some route of the listener is one of which has is true: a listener's HTTP filters
// that routes turn on (sessions, rate limits) are there only if some route does.
func anyRoute(l *ir.Listener, has func(*ir.Route) bool) bool {
	for _, vh := range l.VirtualHosts {
		if slices.ContainsFunc(vh.Routes, has) {
			return true
		}
	}
	return false
}

// setOrDefault leaves a limit that is 0 in the IR unset, so that Envoy applies its own default: 0 is never a
// valid value for these, and an IR made without defaults (a test's, a future source's) must still build
// something Envoy accepts.
func setOrDefault(v uint32) *wrapperspb.UInt32Value {
	if v == 0 {
		return nil
	}
	return wrapperspb.UInt32(v)
}
