package xdsserver_test

import (
	"context"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// Sending is true from a response until the Envoy answers it, or its stream closes: what work that can wait
// steps aside for.
func TestSendingLastsUntilTheResponseIsAnswered(t *testing.T) {
	f := start(t)
	f.cache.Publish("g", state(t, "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	until := func(want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for f.tracker.Sending() != want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if f.tracker.Sending() != want {
			t.Fatalf("%s: Sending() = %v, want %v", what, !want, want)
		}
	}
	if f.tracker.Sending() {
		t.Fatal("Sending() with no stream")
	}

	sctx, closeStream := context.WithCancel(ctx)
	defer closeStream()
	s := openDelta(t, sctx, f.conn)
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	r := s.recv(10 * time.Second)
	if r == nil {
		t.Fatal("no response to the first request")
	}
	until(true, "a response not yet answered")
	if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: r.Nonce}); err != nil {
		t.Fatal(err)
	}
	until(false, "the response acknowledged")

	// A new config is sent: Sending again, until the stream closes without answering it.
	f.cache.Publish("g", state(t, "a", "b"))
	if s.recv(10*time.Second) == nil {
		t.Fatal("no response to the new config")
	}
	until(true, "the new config not yet answered")
	closeStream()
	until(false, "the stream closed")
}
