package xdsbuild

import (
	"net/netip"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	upstreamproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// The PROXY protocol: read from trusted senders on a listener, sent to a backend's endpoints.

// acceptProxyProtocol adds the PROXY protocol listener filter (first: it must read the header before TLS
// inspection or any byte reaches a filter chain) and restricts the listener to the trusted senders.
//
// Every filter chain matches on direct_source_prefix_ranges: the connection's own peer, which the PROXY
// header does not change (source_prefix_ranges would match the address the header claims). A connection from
// elsewhere matches no chain and Envoy closes it, before any network filter has seen the claimed address. A
// default filter chain would catch it, so the default becomes a chain that matches only on the source (an
// empty server_names matches any SNI, after the chains that name theirs).
func acceptProxyProtocol(l *ir.Listener, out *listenerv3.Listener) {
	if !l.Edge.AcceptProxyProtocol {
		return
	}
	pp := &listenerv3.ListenerFilter{Name: "envoy.filters.listener.proxy_protocol", ConfigType: &listenerv3.ListenerFilter_TypedConfig{
		TypedConfig: mustAny(&proxyprotocolv3.ProxyProtocol{AllowRequestsWithoutProxyProtocol: l.Edge.ProxyProtocolOptional, StatPrefix: l.Name})}}
	out.ListenerFilters = append([]*listenerv3.ListenerFilter{pp}, out.ListenerFilters...)
	if d := out.DefaultFilterChain; d != nil {
		out.FilterChains = append(out.FilterChains, d)
		out.DefaultFilterChain = nil
	}
	var ranges []*corev3.CidrRange
	for _, c := range strings.Split(l.Edge.ProxyProtocolTrusted, ",") {
		pfx, err := netip.ParsePrefix(c)
		if err != nil {
			continue // validated by the API; a prefix that does not parse trusts nobody
		}
		ranges = append(ranges, &corev3.CidrRange{AddressPrefix: pfx.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(pfx.Bits()))})
	}
	if len(ranges) == 0 {
		// Nothing trusted: a range no connection comes from, so that every connection is closed.
		ranges = []*corev3.CidrRange{{AddressPrefix: "0.0.0.0", PrefixLen: wrapperspb.UInt32(32)}}
	}
	for _, fc := range out.FilterChains {
		if fc.FilterChainMatch == nil {
			fc.FilterChainMatch = &listenerv3.FilterChainMatch{}
		}
		fc.FilterChainMatch.DirectSourcePrefixRanges = ranges
	}
}

// sendProxyProtocol wraps the cluster's transport socket (TLS or plain) in the upstream PROXY protocol one,
// which sends the header before any byte of the inner socket.
func sendProxyProtocol(c *ir.Cluster, out *clusterv3.Cluster) {
	if c.ProxyProtocol == "" {
		return
	}
	inner := out.TransportSocket
	if inner == nil {
		inner = &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(&rawbufferv3.RawBuffer{})}}
	}
	version := corev3.ProxyProtocolConfig_V2
	if c.ProxyProtocol == "V1" {
		version = corev3.ProxyProtocolConfig_V1
	}
	out.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.upstream_proxy_protocol", ConfigType: &corev3.TransportSocket_TypedConfig{
		TypedConfig: mustAny(&upstreamproxyv3.ProxyProtocolUpstreamTransport{Config: &corev3.ProxyProtocolConfig{Version: version}, TransportSocket: inner})}}
}
