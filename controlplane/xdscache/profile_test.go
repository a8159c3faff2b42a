package xdscache

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestClientOf(t *testing.T) {
	meta := func(v string) *structpb.Struct {
		s, _ := structpb.NewStruct(map[string]any{ClientKey: v})
		return s
	}
	for _, c := range []struct {
		node *corev3.Node
		want string
	}{
		{&corev3.Node{UserAgentName: "envoy"}, ClientEnvoy},
		{&corev3.Node{UserAgentName: "gRPC Go"}, ClientGRPC},
		{&corev3.Node{UserAgentName: "gRPC Java"}, ClientGRPC},
		{&corev3.Node{UserAgentName: "grpc c-core"}, ClientGRPC},
		{&corev3.Node{UserAgentName: "gRPCish"}, ClientEnvoy},
		{&corev3.Node{UserAgentName: "envoy", Metadata: meta("grpc")}, ClientGRPC},
		{&corev3.Node{UserAgentName: "gRPC Go", Metadata: meta("envoy")}, ClientEnvoy},
		{nil, ClientEnvoy},
	} {
		if got := ClientOf(c.node); got != c.want {
			t.Errorf("%v: %s, want %s", c.node, got, c.want)
		}
	}
	if k := ServedKey(&corev3.Node{Cluster: "edge", UserAgentName: "gRPC Go"}); k != GRPCKey("edge") || k == "edge" {
		t.Errorf("a gRPC node of edge is served %q", k)
	}
	if g, ok := profileGroup(GRPCKey("edge")); !ok || g != "edge" {
		t.Errorf("profileGroup: %q %v", g, ok)
	}
	if _, ok := profileGroup("edge"); ok {
		t.Error("a group taken for a profile")
	}
}
