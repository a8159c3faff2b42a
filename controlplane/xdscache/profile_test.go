package xdscache

import (
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	stream "github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/proto"
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

// A gRPC node is served its group's gRPC profile and an Envoy the group; the first gRPC client of a group
// whose profile was never published asks for it, once.
func TestGRPCNodesAreServedTheProfile(t *testing.T) {
	c := New()
	asked := make(chan string, 4)
	c.OnGRPCClient = func(g string) { asked <- g }
	envoyState, _ := NewState(map[string][]proto.Message{resource.ListenerType: {&listenerv3.Listener{Name: "http-80"}}})
	profile, _ := NewState(map[string][]proto.Message{resource.ListenerType: {&listenerv3.Listener{Name: "a.example:80"}}})
	c.Publish("edge", envoyState)
	c.Publish(GRPCKey("edge"), profile)

	served := func(node *corev3.Node, names []string) []string {
		t.Helper()
		ch := make(chan cachev3.Response, 1)
		sub := stream.NewSotwSubscription(names, true)
		if _, err := c.CreateWatch(&cachev3.Request{Node: node, TypeUrl: resource.ListenerType, ResourceNames: names}, sub, ch); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-ch:
			var out []string
			dr, err := r.GetDiscoveryResponse()
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range dr.GetResources() {
				l := &listenerv3.Listener{}
				if err := a.UnmarshalTo(l); err != nil {
					t.Fatal(err)
				}
				out = append(out, l.Name)
			}
			return out
		default:
			return nil
		}
	}
	if got := served(&corev3.Node{Id: "e", Cluster: "edge", UserAgentName: "envoy"}, nil); !slices.Equal(got, []string{"http-80"}) {
		t.Errorf("an Envoy is served %v", got)
	}
	if got := served(&corev3.Node{Id: "g", Cluster: "edge", UserAgentName: "gRPC Go"}, []string{"a.example:80"}); !slices.Equal(got, []string{"a.example:80"}) {
		t.Errorf("a gRPC client is served %v", got)
	}
	select {
	case g := <-asked:
		t.Errorf("asked for the published profile of %s", g)
	default:
	}
	served(&corev3.Node{Id: "g2", Cluster: "other", UserAgentName: "gRPC Go"}, []string{"b.example:80"})
	served(&corev3.Node{Id: "g3", Cluster: "other", UserAgentName: "gRPC Java"}, []string{"b.example:80"})
	if g := <-asked; g != "other" {
		t.Errorf("asked for %q, want other", g)
	}
	select {
	case g := <-asked:
		t.Errorf("asked twice (%s)", g)
	case <-time.After(100 * time.Millisecond): // the hook runs on its own goroutine; a second call would be as quick as the first
	}
}
