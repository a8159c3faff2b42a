package kubesource_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// A change to one policy, or to the EndpointSlices behind one, publishes a new version of the whole group.
// While the proxy has not acknowledged it (held here for longer than the writer's grace for pending
// proxies), only the policies whose resources changed are written Pending: the others' resources are in
// the config the proxy runs, so their status is not written at all.
func TestUnchangedPoliciesStayProgrammedWhileTheGroupIsPending(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	const n = 200
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := func(p string, i int) string { return fmt.Sprintf("%s-%04d", p, i) }
	createServicePolicies(ctx, t, c, n)
	_, stream := startDeltaSource(ctx, t, c)
	// The client acknowledges every response, except while hold is set: then it keeps the last nonce of
	// each type, as an Envoy busy applying a big config would, and acknowledges them on release.
	var (
		mu   sync.Mutex
		hold bool
		held = map[string]string{}
	)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			if hold {
				held[r.TypeUrl] = r.Nonce
			} else {
				_ = stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
			}
			mu.Unlock()
		}
	}()
	release := func() {
		mu.Lock()
		defer mu.Unlock()
		hold = false
		for typ, nonce := range held {
			if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: nonce}); err != nil {
				t.Error(err)
			}
		}
	}
	var names []string
	for i := range n {
		names = append(names, "default/"+name("p", i)+"/web")
	}
	mu.Lock()
	err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "held", Cluster: xdscache.DefaultGroup},
		TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names})
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	programmed := func(p *v1alpha1.LoadBalancerPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionProgrammed)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation
	}
	deadline := time.Now().Add(4 * time.Minute)
	// Every policy Programmed, and the writer settled (two list rounds without a write).
	last := waitSettled(ctx, t, c.Client, n, deadline, programmed, "the policies to all become Programmed")

	// Count every write to a policy from here on, as the API server applies them.
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &v1alpha1.LoadBalancerPolicyList{}, &client.ListOptions{Namespace: "default", Raw: &metav1.ListOptions{ResourceVersion: last}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := map[string][]*v1alpha1.LoadBalancerPolicy{}
	next := func(until func(*v1alpha1.LoadBalancerPolicy) bool, what string) {
		t.Helper()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch ended")
				}
				p, isPolicy := ev.Object.(*v1alpha1.LoadBalancerPolicy)
				if ev.Type != watch.Modified || !isPolicy {
					t.Fatalf("watch event %s %T", ev.Type, ev.Object)
				}
				writes[p.Name] = append(writes[p.Name], p)
				if until(p) {
					return
				}
			case <-time.After(time.Until(deadline)):
				t.Fatal("waiting for " + what)
			}
		}
	}

	mu.Lock()
	hold = true
	mu.Unlock()
	// A burst of endpoint changes behind one policy, and a spec change of another (it now uses the
	// Service of a third policy, which is not changed).
	endpoints, respecced := name("p", 100), name("p", 150)
	for j := range 5 {
		cur := &discoveryv1.EndpointSlice{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name("s", 100)}, cur); err != nil {
			t.Fatal(err)
		}
		cur.Endpoints = serviceSlice(100, fmt.Sprintf("10.9.9.%d", j+1)).Endpoints
		if err := c.Client.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	p := &v1alpha1.LoadBalancerPolicy{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: respecced}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Backends[0].Service.Name = name("s", 151)
	if err := c.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The policy whose endpoints changed is written Pending once the grace for pending proxies is over:
	// by then every other policy of the group would be too, had they been computed Pending.
	next(func(p *v1alpha1.LoadBalancerPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionProgrammed)
		return p.Name == endpoints && c != nil && c.Reason == policystatus.ReasonPending
	}, endpoints+" to be written Pending")
	release()
	done := map[string]bool{}
	next(func(p *v1alpha1.LoadBalancerPolicy) bool {
		if (p.Name == endpoints || p.Name == respecced) && programmed(p) {
			done[p.Name] = true
		}
		return len(done) == 2
	}, "both changed policies to be Programmed again")
	// Whatever the writer still had to write is on its way within a few rounds: wait for two settled lists.
	for stable := 0; stable < 2; {
		time.Sleep(time.Second)
		var list v1alpha1.LoadBalancerPolicyList
		if err := c.Client.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		if list.ResourceVersion == last {
			stable++
		} else {
			stable = 0
		}
		last = list.ResourceVersion
	}
	for drained := false; !drained; {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*v1alpha1.LoadBalancerPolicy); ok {
				writes[p.Name] = append(writes[p.Name], p)
			}
		case <-time.After(time.Second):
			drained = true
		}
	}

	for name, ws := range writes {
		switch name {
		case endpoints:
			// Pending, then Programmed.
			if len(ws) > 2 {
				t.Errorf("%s (its endpoints changed) was written %d times, want at most 2", name, len(ws))
			}
		case respecced:
			// The spec (the user's write), its new generation observed (Pending), then Programmed.
			if len(ws) > 3 {
				t.Errorf("%s (its spec changed) was written %d times, want at most 3", name, len(ws))
			}
		default:
			c := meta.FindStatusCondition(ws[0].Status.Conditions, v1alpha1.ConditionProgrammed)
			t.Errorf("%s, unchanged, was written %d times (first: Programmed %s %s)", name, len(ws), c.Status, c.Reason)
		}
	}
}
