package kubesource_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// With 1,000 Service-backed policies on a real API server, moving one EndpointSlice's endpoint translates
// that one policy, sends a delta client that one cluster's endpoints and nothing else, and writes no status
// (no condition or count changed).
func TestOneEndpointSliceChangeAmongAThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and creates 3,000 objects")
	}
	const n = 1000
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createServicePolicies(ctx, t, c, n)
	eng, stream := startDeltaSource(ctx, t, c)
	responses := make(chan *discovery.DeltaDiscoveryResponse, 64)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				close(responses)
				return
			}
			responses <- r
			_ = stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
		}
	}()
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("default/p-%04d/web", i))
	}
	node := &corev3.Node{Id: "kube-proof", Cluster: xdscache.DefaultGroup}
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names}); err != nil {
		t.Fatal(err)
	}
	// Wait for every policy's status and every cluster's endpoints.
	deadline := time.Now().Add(4 * time.Minute)
	got := map[string]bool{}
	for len(got) < n && time.Now().Before(deadline) {
		select {
		case r := <-responses:
			for _, res := range r.Resources {
				got[res.Name] = true
			}
		case <-time.After(time.Second):
		}
	}
	if len(got) < n {
		t.Fatalf("endpoints of %d clusters received, want %d", len(got), n)
	}
	versions := func() map[string]string {
		var list v1alpha1.LoadBalancerPolicyList
		if err := c.Client.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range list.Items {
			if len(p.Status.Conditions) == 0 {
				return nil
			}
			out[p.Name] = p.ResourceVersion
		}
		return out
	}
	var before map[string]string
	for before == nil && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		before = versions()
	}
	if before == nil {
		t.Fatal("statuses were not all written")
	}
	// Let the status writer settle: the client connecting and acknowledging changes every policy's
	// Programmed condition, and a thousand writes take a while.
	for settled := false; !settled; {
		if time.Now().After(deadline) {
			t.Fatal("statuses kept changing")
		}
		time.Sleep(2 * time.Second)
		now := versions()
		settled = len(now) == len(before)
		for k, v := range before {
			settled = settled && now[k] == v
		}
		before = now
	}
	drain := func() {
		for {
			select {
			case <-responses:
			case <-time.After(300 * time.Millisecond):
				return
			}
		}
	}
	drain()

	translated, hashed := eng.Translations(), eng.RefHashes()
	moved := serviceSlice(500, "10.9.9.9")
	current := &discoveryv1.EndpointSlice{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(moved), current); err != nil {
		t.Fatal(err)
	}
	current.Endpoints = moved.Endpoints
	if err := c.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-responses:
		if r.TypeUrl != resource.EndpointType || len(r.Resources) != 1 || r.Resources[0].Name != "default/p-0500/web" || len(r.RemovedResources) > 0 {
			t.Fatalf("after one EndpointSlice change: %s with %d resources, removed %v", r.TypeUrl, len(r.Resources), r.RemovedResources)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no response after the EndpointSlice change")
	}
	select {
	case r := <-responses:
		t.Fatalf("a second response: %s with %d resources", r.TypeUrl, len(r.Resources))
	case <-time.After(time.Second):
	}
	if d := eng.Translations() - translated; d != 1 {
		t.Errorf("one EndpointSlice change translated %d policies, want 1", d)
	}
	// The translator is told which Service changed: it hashes the references of that Service's policy
	// (to find it changed, to replace its fragment, for the new fragment), not those of all 1,000.
	if d := eng.RefHashes() - hashed; d < 1 || d > 3 {
		t.Errorf("one EndpointSlice change hashed the references of policies %d times, want at most 3", d)
	}
	after := versions()
	for name, rv := range before {
		if after[name] != rv {
			t.Errorf("policy %s was written (resource version %s -> %s) though no condition changed", name, rv, after[name])
		}
	}
}
