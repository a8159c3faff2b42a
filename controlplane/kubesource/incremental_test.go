package kubesource_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
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
	slice := func(i int, addr string) *discoveryv1.EndpointSlice {
		name, port := "", int32(8080)
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i), Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("s-%04d", i)}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		}
	}
	create := func(i int) error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i), Namespace: "default"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		p := &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{fmt.Sprintf("p-%04d.example.com", i)}},
				Backends: []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: svc.Name, Port: 80}}}}}
		for _, o := range []client.Object{svc, slice(i, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)), p} {
			if err := c.Client.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := create(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	eng := engine.New(cache, log)
	tracker := xdsserver.NewTracker(cache, log)
	src := &kubesource.Source{Config: c.Config, Engine: eng, Tracker: tracker, Log: log, StatusInterval: 200 * time.Millisecond}
	if err := src.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = src.Run(ctx) }()
	select {
	case <-src.Synced():
	case <-time.After(2 * time.Minute):
		t.Fatal("the Kubernetes source did not sync")
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = xdsserver.Serve(ctx, xdsserver.NewGRPC(ctx, cache, tracker), lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(512<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
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

	translated := eng.Translations()
	moved := slice(500, "10.9.9.9")
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
	after := versions()
	for name, rv := range before {
		if after[name] != rv {
			t.Errorf("policy %s was written (resource version %s -> %s) though no condition changed", name, rv, after[name])
		}
	}
}
