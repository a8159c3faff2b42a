package xdscache

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// A change that adds a cluster and changes a listener, removing nothing, ends its steps on a union with the
// target's content: a stream that reached it has its target (Lagging must not wait for it).
func TestGivenAtTheEndOfAnAddingPlan(t *testing.T) {
	old, err := NewState(map[string][]proto.Message{resource.ClusterType: {&clusterv3.Cluster{Name: "a"}},
		resource.ListenerType: {&listenerv3.Listener{Name: "l", StatPrefix: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	next, err := NewState(map[string][]proto.Message{resource.ClusterType: {&clusterv3.Cluster{Name: "a"}, &clusterv3.Cluster{Name: "b"}},
		resource.ListenerType: {&listenerv3.Listener{Name: "l", StatPrefix: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	steps := plan(old, next)
	if last := steps[len(steps)-1]; last.Version != next.Version {
		t.Fatalf("the plan ends on %s, not the target %s", last.Version, next.Version)
	}
	g := &group{name: "g", target: next}
	st := &streamState{group: g, plan: steps, at: len(steps) - 1}
	if !st.given() {
		t.Error("a stream at the end of its plan, with nothing unanswered, is not given its target")
	}
	st.at = 0
	if len(steps) > 1 && st.given() {
		t.Error("a stream on the first of several steps is given its target")
	}
}
