package xdsserver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lbplane/lbplane/controlplane/xdscache"
)

func sdsRef(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}
}

func transportSocket(t *testing.T, m proto.Message) *corev3.TransportSocket {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

// A group is given only the Secrets its listeners and clusters reference over SDS; any other name, asked
// for by name or by wildcard, is answered as unknown.
func TestOnlyReferencedSecretsAreServed(t *testing.T) {
	f := start(t)
	secret := func(n string) proto.Message {
		return &tlsv3.Secret{Name: n, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			PrivateKey: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "key of " + n}}}}}
	}
	lis := &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{TransportSocket: transportSocket(t,
		&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sdsRef("used-by-listener")}}})}}}
	cl := &clusterv3.Cluster{Name: "c", TransportSocket: transportSocket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{ValidationContextSdsSecretConfig: sdsRef("used-by-cluster")}}})}
	s, err := xdscache.NewState(map[string][]proto.Message{
		resource.SecretType:   {secret("used-by-listener"), secret("used-by-cluster"), secret("nobody-uses")},
		resource.ListenerType: {lis}, resource.ClusterType: {cl},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.cache.Publish("g", s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	want := []string{"used-by-cluster", "used-by-listener"}
	d := openDelta(t, ctx, f.conn)
	d.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.SecretType,
		ResourceNamesSubscribe: []string{"used-by-listener", "used-by-cluster", "nobody-uses", "*"}})
	r := d.recv(5 * time.Second)
	if r == nil {
		t.Fatal("no delta SDS response")
	}
	var got []string
	for _, res := range r.Resources {
		got = append(got, res.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("delta SDS served %v, want only %v", got, want)
	}

	so := openSotw(t, ctx, f.conn)
	so.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.SecretType, ResourceNames: []string{"nobody-uses", "used-by-listener"}})
	r2 := so.recv(5 * time.Second)
	if r2 == nil {
		t.Fatal("no SotW SDS response")
	}
	got = nil
	for _, a := range r2.Resources {
		sec := &tlsv3.Secret{}
		if err := a.UnmarshalTo(sec); err != nil {
			t.Fatal(err)
		}
		got = append(got, sec.Name)
	}
	if !slices.Equal(got, []string{"used-by-listener"}) {
		t.Fatalf("SotW SDS served %v, want only used-by-listener", got)
	}
}
