package pushapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/pushclient"
)

// A push answers within PushWait however many Envoys of its group do not answer, and names them, the
// first MaxLagging of them, with their count.
func TestPushReplyNamesLaggingEnvoysWithinTheWait(t *testing.T) {
	const wait = 300 * time.Millisecond
	_, url, cache := pushapitest.Start(t, "admin", func(s *pushapi.Server) { s.PushWait = wait })
	n := apiwire.MaxLagging + 20
	for i := range n {
		// A delta stream of clusters that takes its first response and never answers it.
		sub := stream.NewDeltaSubscription(nil, nil, nil, true)
		ch := make(chan cachev3.DeltaResponse, 4)
		req := &discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: fmt.Sprintf("n%03d", i)}, TypeUrl: resource.ClusterType}
		if _, err := cache.CreateDeltaWatch(req, &sub, ch); err != nil {
			t.Fatal(err)
		}
	}
	c := &pushclient.Client{BaseURL: url, Token: "admin"}
	start := time.Now()
	res, err := c.Apply(context.Background(), []byte(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: p}
spec:
  listener: {port: 10001, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: 9001}]}]
`), false)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took < wait || took > wait+5*time.Second {
		t.Errorf("the reply took %v, want about the wait, %v", took, wait)
	}
	if res.LaggingTotal != n || len(res.Lagging) != apiwire.MaxLagging || res.Lagging[0] != "n000" {
		t.Errorf("lagging: %d named (first %q), total %d; want %d named from n000, total %d",
			len(res.Lagging), res.Lagging[:min(1, len(res.Lagging))], res.LaggingTotal, apiwire.MaxLagging, n)
	}
}
