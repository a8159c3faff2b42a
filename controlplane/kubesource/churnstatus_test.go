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
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// EndpointSlices behind Service-backed policies change continuously (200 writes, each moving one policy's
// only endpoint to a new address) while the one proxy acknowledges every response late, as a busy Envoy
// does: it always has a response in flight, so it is never current with the group's newest version. No
// condition and no count of any policy changes, so no status is written. Removing a Service afterwards
// does change a condition (ResolvedRefs), and that is written.
func TestEndpointChurnWritesNoStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	const (
		n      = 50
		writes = 200
		// ackDelay is longer than the most time between two resyncs (100 ms): a new version is always waiting.
		ackDelay = 250 * time.Millisecond
	)
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createServicePolicies(ctx, t, c, n)
	_, stream := startDeltaSource(ctx, t, c)
	var sendMu sync.Mutex
	send := func(r *discovery.DeltaDiscoveryRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(r)
	}
	responses := make(chan *discovery.DeltaDiscoveryResponse, 1024)
	go func() {
		defer close(responses)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			responses <- r
		}
	}()
	var (
		delayMu sync.Mutex
		delay   time.Duration
	)
	go func() {
		for r := range responses {
			delayMu.Lock()
			d := delay
			delayMu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			_ = send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
		}
	}()
	node := &corev3.Node{Id: "busy", Cluster: xdscache.DefaultGroup}
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("default/p-%04d/web", i))
	}
	// Clusters (wildcard) and their endpoints, as an Envoy subscribes.
	if err := send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}); err != nil {
		t.Fatal(err)
	}
	if err := send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(4 * time.Minute)
	programmed := func(p *v1alpha1.LoadBalancerPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionProgrammed)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation
	}
	settled := func(ok func(*v1alpha1.LoadBalancerPolicy) bool, what string) string {
		t.Helper()
		return waitSettled(ctx, t, c.Client, n, deadline, ok, what)
	}
	rv := settled(programmed, "every policy to be Programmed")
	// Nothing changes: the writer's ticks (every 200 ms) compute no status at all.
	quiet := kubesource.StatusComputations()
	time.Sleep(time.Second)
	if d := kubesource.StatusComputations() - quiet; d != 0 {
		t.Errorf("the status writer computed %d statuses while nothing changed, want 0", d)
	}

	// Every write to a policy from here on, as the API server applies them.
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &v1alpha1.LoadBalancerPolicyList{}, &client.ListOptions{Namespace: "default", Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var (
		writtenMu sync.Mutex
		written   []*v1alpha1.LoadBalancerPolicy
	)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*v1alpha1.LoadBalancerPolicy); ok && ev.Type == watch.Modified {
				writtenMu.Lock()
				written = append(written, p)
				writtenMu.Unlock()
			}
		}
	}()
	snapshot := func() []*v1alpha1.LoadBalancerPolicy {
		writtenMu.Lock()
		defer writtenMu.Unlock()
		return append([]*v1alpha1.LoadBalancerPolicy(nil), written...)
	}

	delayMu.Lock()
	delay = ackDelay
	delayMu.Unlock()
	// Four writers, round robin over the slices; each write a new address.
	var g sync.WaitGroup
	errs := make(chan error, writes)
	next := make(chan int)
	for range 4 {
		g.Add(1)
		go func() {
			defer g.Done()
			for k := range next {
				i := k % n
				cur := &discoveryv1.EndpointSlice{}
				if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("s-%04d", i)}, cur); err != nil {
					errs <- err
					continue
				}
				cur.Endpoints = serviceSlice(i, fmt.Sprintf("10.2.%d.%d", k/250, k%250+1)).Endpoints
				if err := c.Client.Update(ctx, cur); err != nil {
					errs <- err
				}
			}
		}()
	}
	start := time.Now()
	for k := range writes {
		next <- k
		// About 20 writes a second: 200 over ten seconds, longer than the writer's grace for pending proxies.
		time.Sleep(50 * time.Millisecond)
	}
	close(next)
	g.Wait()
	close(errs)
	for err := range errs {
		t.Error("writing an EndpointSlice:", err)
	}
	t.Logf("%d EndpointSlice writes in %s; %d statuses computed", writes, time.Since(start).Round(time.Millisecond), kubesource.StatusComputations()-quiet)
	delayMu.Lock()
	delay = 0
	delayMu.Unlock()
	settled(programmed, "every policy to be Programmed after the churn")
	if ws := snapshot(); len(ws) > 0 {
		reasons := map[string]int{}
		for _, p := range ws {
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionProgrammed)
			reasons[fmt.Sprintf("Programmed=%s %s", c.Status, c.Reason)]++
		}
		t.Errorf("%d status writes during endpoint churn that changed no condition, want 0 (%v; first: %s)", len(ws), reasons, ws[0].Name)
	}
	writtenMu.Lock()
	written = nil
	writtenMu.Unlock()

	// A condition that does change is still written.
	gone := "s-0007"
	if err := c.Client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: gone}}); err != nil {
		t.Fatal(err)
	}
	unresolved := func(p *v1alpha1.LoadBalancerPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionResolvedRefs)
		return p.Name == "p-0007" && c != nil && c.Status == metav1.ConditionFalse
	}
	for found := false; !found; {
		if time.Now().After(deadline) {
			t.Fatal("p-0007's ResolvedRefs=False (its Service deleted) was not written")
		}
		time.Sleep(200 * time.Millisecond)
		for _, p := range snapshot() {
			found = found || unresolved(p)
		}
	}
	settled(func(p *v1alpha1.LoadBalancerPolicy) bool { return p.Name == "p-0007" || programmed(p) }, "the writer to settle")
	w.Stop()
	<-watchDone
	for _, p := range snapshot() {
		if p.Name != "p-0007" {
			t.Errorf("policy %s written when only p-0007's Service was deleted", p.Name)
		}
	}
}
