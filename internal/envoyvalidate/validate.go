// Package envoyvalidate asks a real Envoy binary whether it accepts a set of generated resources. Envoy only
// validates a bootstrap, so the dynamic resources are folded into a static one: EDS clusters become static
// clusters carrying their load assignment (DNS clusters carry theirs already), and RDS listeners carry their route table inline.
package envoyvalidate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Static folds the resources of one proxy group into a bootstrap Envoy can validate offline.
func Static(res map[string][]proto.Message) (*bootstrapv3.Bootstrap, error) {
	clas := map[string]*endpointv3.ClusterLoadAssignment{}
	for _, m := range res[resource.EndpointType] {
		cla := m.(*endpointv3.ClusterLoadAssignment)
		clas[cla.ClusterName] = cla
	}
	routes := map[string]*routev3.RouteConfiguration{}
	for _, m := range res[resource.RouteType] {
		rc := m.(*routev3.RouteConfiguration)
		routes[rc.Name] = rc
	}
	b := &bootstrapv3.Bootstrap{
		Admin: &bootstrapv3.Admin{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0}}}}},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{},
	}
	for _, m := range res[resource.SecretType] {
		b.StaticResources.Secrets = append(b.StaticResources.Secrets, proto.Clone(m).(*tlsv3.Secret))
	}
	for _, m := range res[resource.ClusterType] {
		c := proto.Clone(m).(*clusterv3.Cluster)
		if err := upstreamStaticSecrets(c.TransportSocket); err != nil {
			return nil, err
		}
		if c.GetClusterType() != nil {
			// A DNS cluster carries its endpoints already.
			b.StaticResources.Clusters = append(b.StaticResources.Clusters, c)
			continue
		}
		name := c.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = c.Name
		}
		cla, ok := clas[name]
		if !ok {
			return nil, fmt.Errorf("cluster %s: no load assignment named %s", c.Name, name)
		}
		c.EdsClusterConfig = nil
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		c.LoadAssignment = proto.Clone(cla).(*endpointv3.ClusterLoadAssignment)
		c.LoadAssignment.ClusterName = c.Name
		b.StaticResources.Clusters = append(b.StaticResources.Clusters, c)
	}
	for _, m := range res[resource.ListenerType] {
		l := proto.Clone(m).(*listenerv3.Listener)
		chains := l.FilterChains
		if l.DefaultFilterChain != nil {
			chains = append(chains, l.DefaultFilterChain)
		}
		for _, fc := range chains {
			if err := staticSecrets(fc.TransportSocket, &tlsv3.DownstreamTlsContext{}); err != nil {
				return nil, err
			}
			for _, f := range fc.Filters {
				tc := f.GetTypedConfig()
				if tc == nil || tc.TypeUrl != "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
					continue
				}
				hcm := &hcmv3.HttpConnectionManager{}
				if err := tc.UnmarshalTo(hcm); err != nil {
					return nil, err
				}
				if sr := hcm.GetScopedRoutes(); sr != nil {
					// Scopes over SRDS become an inline list, each carrying its route table.
					list := &hcmv3.ScopedRouteConfigurationsList{}
					for _, m := range res[resource.ScopedRouteType] {
						sc := proto.Clone(m).(*routev3.ScopedRouteConfiguration)
						rc, ok := routes[sc.RouteConfigurationName]
						if !ok {
							return nil, fmt.Errorf("scope %s: no route configuration named %s", sc.Name, sc.RouteConfigurationName)
						}
						sc.RouteConfigurationName, sc.RouteConfiguration = "", rc
						list.ScopedRouteConfigurations = append(list.ScopedRouteConfigurations, sc)
					}
					sr.ConfigSpecifier = &hcmv3.ScopedRoutes_ScopedRouteConfigurationsList{ScopedRouteConfigurationsList: list}
				} else {
					name := hcm.GetRds().GetRouteConfigName()
					rc, ok := routes[name]
					if !ok {
						return nil, fmt.Errorf("listener %s: no route configuration named %s", l.Name, name)
					}
					hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc}
				}
				a, err := anypb.New(hcm)
				if err != nil {
					return nil, err
				}
				f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
			}
		}
		b.StaticResources.Listeners = append(b.StaticResources.Listeners, l)
	}
	return b, nil
}

// staticSecrets points the SDS references of a TLS transport socket at static secrets of the same name.
func staticSecrets(ts *corev3.TransportSocket, ctx tlsContext) error {
	if ts == nil || ts.GetTypedConfig() == nil {
		return nil
	}
	if err := ts.GetTypedConfig().UnmarshalTo(ctx); err != nil {
		return err
	}
	common := ctx.GetCommonTlsContext()
	for _, s := range common.GetTlsCertificateSdsSecretConfigs() {
		s.SdsConfig = nil
	}
	if v := common.GetValidationContextSdsSecretConfig(); v != nil {
		v.SdsConfig = nil
	}
	if v := common.GetCombinedValidationContext().GetValidationContextSdsSecretConfig(); v != nil {
		v.SdsConfig = nil
	}
	a, err := anypb.New(ctx)
	if err != nil {
		return err
	}
	ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: a}
	return nil
}

// upstreamStaticSecrets is staticSecrets for a cluster's transport socket, which may wrap the TLS socket in
// the upstream PROXY protocol one.
func upstreamStaticSecrets(ts *corev3.TransportSocket) error {
	tc := ts.GetTypedConfig()
	if tc == nil || tc.TypeUrl != "type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport" {
		return staticSecrets(ts, &tlsv3.UpstreamTlsContext{})
	}
	pp := &upstreamproxyv3.ProxyProtocolUpstreamTransport{}
	if err := tc.UnmarshalTo(pp); err != nil {
		return err
	}
	if pp.TransportSocket.GetTypedConfig().GetTypeUrl() == "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext" {
		if err := staticSecrets(pp.TransportSocket, &tlsv3.UpstreamTlsContext{}); err != nil {
			return err
		}
	}
	a, err := anypb.New(pp)
	if err != nil {
		return err
	}
	ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: a}
	return nil
}

type tlsContext interface {
	proto.Message
	GetCommonTlsContext() *tlsv3.CommonTlsContext
}

// Check runs `envoy --mode validate` on the folded resources and returns Envoy's complaint if it rejects them.
func Check(ctx context.Context, envoy string, res map[string][]proto.Message) error {
	b, err := Static(res)
	if err != nil {
		return err
	}
	js, err := protojson.Marshal(b)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "envoy-validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "bootstrap.json")
	if err := os.WriteFile(cfg, js, 0o600); err != nil {
		return err
	}
	return CheckBootstrap(ctx, envoy, cfg)
}

// CheckBootstrap runs `envoy --mode validate` on a bootstrap file.
func CheckBootstrap(ctx context.Context, envoy, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, envoy, "--mode", "validate", "-c", path, "-l", "error", "--use-dynamic-base-id")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("envoy rejected the config: %v\n%s", err, out)
	}
	return nil
}
