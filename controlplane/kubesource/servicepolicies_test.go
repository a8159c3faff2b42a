package kubesource_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/sync/errgroup"
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

// serviceSlice is the EndpointSlice of Service s-NNNN (i), with one endpoint at addr.
func serviceSlice(i int, addr string) *discoveryv1.EndpointSlice {
	name, port := "", int32(8080)
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i), Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("s-%04d", i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
}

// createServicePolicies creates n policies p-NNNN in default, each backed by its own headless Service s-NNNN
// whose EndpointSlice holds one address, 10.1.(i/250).(i%250+1); eight writers at a time.
func createServicePolicies(ctx context.Context, t *testing.T, c *kubetest.Cluster, n int) {
	t.Helper()
	create := func(i int) error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i), Namespace: "default"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		p := &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{fmt.Sprintf("p-%04d.example.com", i)}},
				Backends: []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: svc.Name, Port: 80}}}}}
		for _, o := range []client.Object{svc, serviceSlice(i, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)), p} {
			if err := c.Client.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error { return create(i) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// startDeltaSource runs a Kubernetes source on c until ctx ends, waits for it to sync, serves its cache over
// xDS on a loopback port, and opens one delta ADS stream to that server.
func startDeltaSource(ctx context.Context, t *testing.T, c *kubetest.Cluster) (*engine.Engine, discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) {
	t.Helper()
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
	// A thousand policies' first responses are large.
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(512<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return eng, stream
}
