package xdscache

import (
	"context"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/proto"
)

// Lagging waits for streams that still answer, names without waiting for them those that have left a
// response unanswered longer than the unresponsive bound, and names nobody once every stream answered.
func TestLaggingWaitsOnlyForStreamsThatAnswer(t *testing.T) {
	c := New()
	s, err := NewState(map[string][]proto.Message{resource.ClusterType: {&clusterv3.Cluster{Name: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Publish("g", s)
	open := func(node string) (*stream.Subscription, chan cachev3.DeltaResponse) {
		sub := stream.NewDeltaSubscription(nil, nil, nil, true)
		ch := make(chan cachev3.DeltaResponse, 4)
		if _, err := c.CreateDeltaWatch(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: node, Cluster: "g"}, TypeUrl: resource.ClusterType}, &sub, ch); err != nil {
			t.Fatal(err)
		}
		return &sub, ch
	}
	// "stuck" never answers: it has been unresponsive for a while when the wait starts. "late" answers
	// 200 ms into the wait, well before it would turn unresponsive.
	const unresponsive = 400 * time.Millisecond
	open("stuck")
	time.Sleep(unresponsive + 100*time.Millisecond)
	sub, ch := open("late")
	go func() {
		time.Sleep(200 * time.Millisecond)
		r := <-ch
		sub.SetReturnedResources(r.GetNextVersionMap())
		c.CreateDeltaWatch(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "late", Cluster: "g"}, TypeUrl: resource.ClusterType, ResponseNonce: "1"}, sub, ch)
	}()
	start := time.Now()
	got := c.Lagging(context.Background(), []string{"g"}, 10*time.Second, unresponsive)
	took := time.Since(start)
	if !slices.Equal(got, []string{"stuck"}) {
		t.Errorf("lagging %q, want [stuck]", got)
	}
	if took < 150*time.Millisecond || took > 5*time.Second {
		t.Errorf("the wait took %v: it should end when the late stream answered, about 200ms", took)
	}
	if got := c.Lagging(context.Background(), []string{"other"}, 10*time.Second, time.Minute); len(got) != 0 {
		t.Errorf("another group's wait named %q", got)
	}
}
