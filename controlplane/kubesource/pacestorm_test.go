package kubesource_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// A storm of EndpointSlice updates (four writers as fast as the API server takes them, over ten Services
// for three seconds: about 300 a second here) reaches a client as at most one EDS response per endpoint
// interval (50 ms), plus the one under way when the storm began, and the client converges on the last
// addresses written. (Without the interval the same storm gave this client 121 responses where the bound is
// 62; how many depends on how long each resync takes, so that case is not a test.)
func TestEndpointStormIsPaced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	responses, updates, span := endpointStorm(t)
	bound := int(span/kubesource.DefaultEndpointInterval) + 2
	t.Logf("%d EndpointSlice updates in %s: %d EDS responses (bound %d)", updates, span.Round(time.Millisecond), responses, bound)
	if updates < 2*bound {
		t.Fatalf("the API server took only %d updates in %s: too few to tell a bound of %d responses", updates, span, bound)
	}
	if responses > bound {
		t.Errorf("%d EDS responses during the storm, more than one per %s (%d)", responses, kubesource.DefaultEndpointInterval, bound)
	}
}

// endpointStorm runs a source with the default endpoint interval, a client subscribed to ten policies'
// endpoints, and the storm; it returns the EDS responses the client got during the storm, the updates
// written, and how long the storm lasted. It fails unless the client ends with the last addresses written.
func endpointStorm(t *testing.T) (responses, updates int, span time.Duration) {
	const n, writers = 10, 4
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createServicePolicies(ctx, t, c, n)
	_, stream := startDeltaSource(ctx, t, c)
	var (
		mu    sync.Mutex
		times []time.Time
		last  = map[string]string{} // cluster → its one address, as the client last got it
	)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			if r.TypeUrl == resource.EndpointType {
				mu.Lock()
				times = append(times, time.Now())
				for _, res := range r.Resources {
					var cla endpointv3.ClusterLoadAssignment
					if res.Resource.UnmarshalTo(&cla) == nil {
						addr := ""
						for _, l := range cla.Endpoints {
							for _, e := range l.LbEndpoints {
								addr = e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
							}
						}
						last[cla.ClusterName] = addr
					}
				}
				mu.Unlock()
			}
			_ = stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
		}
	}()
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("default/p-%04d/web", i))
	}
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "storm", Cluster: xdscache.DefaultGroup},
		TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the client has every Service's endpoints", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(last) < n {
			return fmt.Errorf("%d of %d", len(last), n)
		}
		return nil
	})

	// Each writer owns the Services i%writers == w, and writes each in turn with a new address.
	const stormFor = 3 * time.Second
	written := make([]string, n)
	counts := make([]int, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := map[int]*discoveryv1.EndpointSlice{}
			for k := 0; time.Since(start) < stormFor; k++ {
				i := w + writers*(k%(n/writers+1))
				if i >= n {
					continue
				}
				cur := mine[i]
				if cur == nil {
					cur = &discoveryv1.EndpointSlice{}
					if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("s-%04d", i)}, cur); err != nil {
						t.Error(err)
						return
					}
				}
				addr := fmt.Sprintf("10.8.%d.%d", k/250%250, k%250+1)
				cur.Endpoints = serviceSlice(i, addr).Endpoints
				if err := c.Client.Update(ctx, cur); err != nil {
					t.Error(err)
					return
				}
				mine[i], written[i] = cur, addr
				counts[w]++
			}
		}()
	}
	wg.Wait()
	span = time.Since(start)
	for _, k := range counts {
		updates += k
	}
	eventually(t, 30*time.Second, "the client has the last addresses written", func() error {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if got := last[fmt.Sprintf("default/p-%04d/web", i)]; got != written[i] {
				return fmt.Errorf("p-%04d: %s, last written %s", i, got, written[i])
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, at := range times {
		if !at.Before(start) && !at.After(start.Add(span)) {
			responses++
		}
	}
	return responses, updates, span
}

// eventually retries f every 20 ms until it succeeds, and fails the test with f's last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
