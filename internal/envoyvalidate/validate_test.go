package envoyvalidate_test

import (
	"context"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/internal/envoyvalidate"
	"github.com/lbplane/lbplane/internal/tools"
)

func group() *ir.Group {
	return &ir.Group{Name: "g", Clusters: []*ir.Cluster{{Name: "c", Algorithm: ir.RoundRobin, ConnectTimeout: 1e9,
		CircuitBreakers: ir.CircuitBreakers{MaxConnections: 1, MaxPendingRequests: 1, MaxRequests: 1, MaxRetries: 1},
		Endpoints:       []ir.Endpoint{{Address: "127.0.0.1", Port: 1, Weight: 1}}}},
		Listeners: []*ir.Listener{{Name: "l", Address: "127.0.0.1", Port: 1, Protocol: ir.HTTP,
			VirtualHosts: []*ir.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*ir.Route{{Name: "r", PathType: ir.PathPrefix, Path: "/", Clusters: []ir.WeightedCluster{{Name: "c", Weight: 1}}}}}}}}}
}

func TestEnvoyAcceptsAndRejects(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	res, err := xdsbuild.Build(group())
	if err != nil {
		t.Fatal(err)
	}
	if err := envoyvalidate.Check(context.Background(), envoy, res); err != nil {
		t.Fatalf("a valid config was rejected: %v", err)
	}
	// A load-balancing policy whose type no Envoy extension implements passes proto validation but not Envoy.
	bad := xdsbuild.Resources{}
	for k, v := range res {
		bad[k] = v
	}
	c := proto.Clone(res[resource.ClusterType][0]).(*clusterv3.Cluster)
	a, _ := anypb.New(&emptypb.Empty{})
	c.LoadBalancingPolicy = &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: "nope", TypedConfig: a}}}}
	bad[resource.ClusterType] = []proto.Message{c}
	err = envoyvalidate.Check(context.Background(), envoy, bad)
	if err == nil || !strings.Contains(err.Error(), "envoy rejected") {
		t.Fatalf("Envoy should reject an unknown load-balancing policy, got %v", err)
	}
	t.Logf("rejected as expected: %.300s", err)
}
