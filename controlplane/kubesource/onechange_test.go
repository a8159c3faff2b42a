package kubesource_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// With 1,000 policies in one group and a proxy that acknowledges every response, each change of one
// policy's spec publishes a new version of the whole group, which the proxy acknowledges. The status
// writer computes the changed policy's status, and no other: the others' inputs (their results, their
// objects, which proxies the group has) did not change, whatever the proxy's versions and sync states did
// meanwhile. One of the changes is rejected by the proxy, then taken by the next: a NACK that names no
// other policy's resources concerns no other policy either.
func TestOnePolicyChangeAmongAThousandComputesOneStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and creates 3,000 objects")
	}
	const (
		n       = 1000
		changes = 5
		changed = "p-0500"
	)
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createServicePolicies(ctx, t, c, n)
	var (
		mu       sync.Mutex
		computed = map[string]int{}
	)
	defer kubesource.OnStatusComputed(func(k objkey.Key) {
		mu.Lock()
		computed[k.Name]++
		mu.Unlock()
	})()
	_, stream := startDeltaSource(ctx, t, c)
	// nackNext makes the client reject the next Cluster response (the changed policy's cluster), as an
	// Envoy does a config it cannot take; the change after it is taken, and clears the NACK.
	var nackNext atomic.Bool
	var responses sync.WaitGroup
	responses.Add(1)
	go func() {
		defer responses.Done()
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			ack := &discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}
			if r.TypeUrl == resource.ClusterType && nackNext.CompareAndSwap(true, false) {
				ack.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: "refused by the test"}
			}
			_ = stream.Send(ack)
		}
	}()
	defer responses.Wait()
	defer cancel()
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("default/p-%04d/web", i))
	}
	// Listeners and clusters (wildcard) and their endpoints, as an Envoy subscribes: every type moves with
	// each change.
	node := &corev3.Node{Id: "acks", Cluster: xdscache.DefaultGroup}
	for _, r := range []*discovery.DeltaDiscoveryRequest{
		{Node: node, TypeUrl: resource.ListenerType},
		{TypeUrl: resource.ClusterType},
		{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names},
	} {
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}

	deadline := time.Now().Add(5 * time.Minute)
	programmed := func(p *v1alpha1.LoadBalancerPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionProgrammed)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation
	}
	settled := func(what string) {
		t.Helper()
		waitSettled(ctx, t, c.Client, n, deadline, programmed, what)
	}
	settled("every policy to be Programmed")
	mu.Lock()
	clear(computed)
	mu.Unlock()

	for i := range changes {
		p := &v1alpha1.LoadBalancerPolicy{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: changed}, p); err != nil {
			t.Fatal(err)
		}
		// A new connect timeout: a new cluster, and a new version of every type of the group.
		p.Spec.Backends[0].ConnectTimeout = &metav1.Duration{Duration: time.Duration(i+2) * time.Second}
		nackNext.Store(i == 2)
		// Update reads the answer into p: p.Generation is the new generation.
		if err := c.Client.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		for {
			if time.Now().After(deadline) {
				t.Fatalf("change %d: %s was not Programmed for generation %d", i, changed, p.Generation)
			}
			time.Sleep(100 * time.Millisecond)
			cur := &v1alpha1.LoadBalancerPolicy{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
				t.Fatal(err)
			}
			// The rejected change's status says whatever the NACK makes it say; the others', Programmed.
			prog := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionProgrammed)
			if cur.Generation >= p.Generation && prog != nil && prog.ObservedGeneration == cur.Generation && (i == 2 || programmed(cur)) {
				break
			}
		}
	}
	settled("the writer to settle after the changes")

	mu.Lock()
	defer mu.Unlock()
	others := 0
	for name, k := range computed {
		if name != changed {
			others += k
		}
	}
	t.Logf("%d changes of %s: its status computed %d times, %d statuses of the %d other policies", changes, changed, computed[changed], others, n-1)
	if computed[changed] < changes {
		t.Errorf("%s's status computed %d times for %d changes, want at least one per change", changed, computed[changed], changes)
	}
	if others > 0 {
		t.Errorf("%d changes of %s computed %d statuses of other policies (%d of them), want 0", changes, changed, others, len(computed)-1)
	}
}
