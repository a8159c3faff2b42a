package xdscache_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	stream "github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// tenant is a policy as the push benchmark fills them: its own hostname on one shared port, one endpoint.
func tenant(name string, i int, endpointPort int32, timeout time.Duration) *v1alpha1.LoadBalancerPolicy {
	p := &v1alpha1.LoadBalancerPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, i, time.UTC))},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{name + ".bench.local"}},
			Backends: []v1alpha1.Backend{{Name: "app", Endpoints: []v1alpha1.Endpoint{{Address: "127.0.0.1", Port: endpointPort}}}},
		},
	}
	if timeout > 0 {
		p.Spec.Backends[0].ConnectTimeout = &metav1.Duration{Duration: timeout}
	}
	return p
}

// proxy plays an Envoy's delta ADS stream against a cache, as go-control-plane's delta server drives it:
// clusters and listeners by wildcard, endpoints by the names of the clusters received, route types by the
// names the group serves. It acknowledges every response.
type proxy struct {
	t      *testing.T
	c      *xdscache.Cache
	ch     chan cachev3.DeltaResponse
	subs   map[string]*stream.Subscription
	cancel map[string]func()
	nonce  int
}

var proxyNode = &corev3.Node{Id: "envoy", Cluster: xdscache.DefaultGroup}

func newProxy(t *testing.T, c *xdscache.Cache) *proxy {
	p := &proxy{t: t, c: c, ch: make(chan cachev3.DeltaResponse, 64), subs: map[string]*stream.Subscription{}, cancel: map[string]func(){}}
	for _, typ := range xdscache.Types {
		p.request(typ, "", nil)
	}
	return p
}

// request sends a request of a type: an ACK of nonce, subscribing to names.
func (p *proxy) request(typ, nonce string, subscribe []string) {
	sub, ok := p.subs[typ]
	if !ok {
		wildcard := typ == resource.ClusterType || typ == resource.ListenerType || typ == resource.SecretType
		s := stream.NewDeltaSubscription(subscribe, nil, nil, wildcard)
		if !wildcard && len(subscribe) == 0 {
			// Envoy opens these only once it has something to ask for.
			return
		}
		sub = &s
		p.subs[typ] = sub
	} else {
		p.cancel[typ]()
		sub.UpdateResourceSubscriptions(subscribe, nil)
	}
	req := &discovery.DeltaDiscoveryRequest{Node: proxyNode, TypeUrl: typ, ResponseNonce: nonce, ResourceNamesSubscribe: subscribe}
	cancel, err := p.c.CreateDeltaWatch(req, sub, p.ch)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cancel[typ] = cancel
}

// settle answers every response until none comes, and returns how many there were.
func (p *proxy) settle() int {
	n := 0
	for {
		select {
		case r := <-p.ch:
			n++
			typ := r.GetDeltaRequest().GetTypeUrl()
			p.subs[typ].SetReturnedResources(r.GetNextVersionMap())
			dr, err := r.GetDeltaDiscoveryResponse()
			if err != nil {
				p.t.Fatal(err)
			}
			p.nonce++
			nonce := fmt.Sprint(p.nonce)
			var eds []string
			if typ == resource.ClusterType {
				for _, res := range dr.Resources {
					c := &clusterv3.Cluster{}
					if err := res.Resource.UnmarshalTo(c); err != nil {
						p.t.Fatal(err)
					}
					if _, ok := p.subs[resource.EndpointType]; !ok || !subscribed(p.subs[resource.EndpointType], c.Name) {
						eds = append(eds, c.Name)
					}
				}
			}
			p.request(typ, nonce, nil)
			if len(eds) > 0 {
				p.request(resource.EndpointType, "", eds)
			}
			if typ == resource.ListenerType || typ == resource.ScopedRouteType {
				cur, _ := p.c.State(xdscache.DefaultGroup)
				for _, rt := range []string{resource.ScopedRouteType, resource.RouteType} {
					var want []string
					for _, n := range cur.Names(rt) {
						if s, ok := p.subs[rt]; !ok || !subscribed(s, n) {
							want = append(want, n)
						}
					}
					if len(want) > 0 {
						p.request(rt, "", want)
					}
				}
			}
		default:
			return n
		}
	}
}

func subscribed(s *stream.Subscription, name string) bool {
	_, ok := s.SubscribedResources()[name]
	return ok
}

// The first change after a fill of 10,000 policies (ten publishes of 1,000, as the push benchmark fills)
// looks at as many resources as the changes after it: a handful, not every cluster and endpoint
// (bench/results/2026-11-23-vm-incremental 6.6: change 0 published in 20-35 ms, the others in 0.5-5).
func TestFirstChangeAfterAFillLooksAtWhatChanged(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	c := xdscache.New()
	// Staged: a publish gives the proxy its steps one by one, as it answers them.
	c.StepTimeout = time.Hour
	// served waits until the proxy is given what the last publish asked for.
	served := func() {
		cur, target := c.State(xdscache.DefaultGroup)
		if cur.Version != target.Version {
			t.Fatal("the steps of the last publish were not all given to the proxy once it answered them")
		}
	}
	e := engine.New(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.Reach = reach.Loopback
	p := newProxy(t, c)
	timeout := 1
	probe := func() *v1alpha1.LoadBalancerPolicy {
		timeout = timeout%5 + 1
		return tenant("probe", 0, int32(81+timeout%2), time.Duration(timeout)*time.Second)
	}
	policies := []*v1alpha1.LoadBalancerPolicy{probe()}
	set := func() {
		e.Set(engine.SourceStore, slices.Clone(policies))
		p.settle()
	}
	set()
	// The benchmark first times changes with 10 policies.
	for i := range 10 {
		policies = append(policies, tenant(fmt.Sprintf("f-%d", i), i+1, 80, 0))
	}
	set()
	for range 20 {
		policies[0] = probe()
		set()
	}
	fill := xdscache.Compared()
	for have := 10; have < n; have += 1000 {
		for i := have; i < min(n, have+1000); i++ {
			policies = append(policies, tenant(fmt.Sprintf("f-%d", i), i+1, 80, 0))
		}
		// The fill publishes faster than the proxy answers: each publish takes the proxy on from a step of
		// the one before. It answers once the fill is done.
		e.Set(engine.SourceStore, slices.Clone(policies))
	}
	p.settle()
	served()
	t.Logf("resources looked at by the answers during the fill: %d", xdscache.Compared()-fill)
	var costs []int64
	for range 5 {
		before := xdscache.Compared()
		policies[0] = probe()
		e.Set(engine.SourceStore, slices.Clone(policies))
		costs = append(costs, xdscache.Compared()-before)
		if p.settle() == 0 {
			t.Fatal("a change of the probe policy sent the proxy nothing")
		}
	}
	t.Logf("resources looked at by the answers to each change: %v", costs)
	for i, n := range costs {
		if n > 50 {
			t.Errorf("change %d: its answers looked at %d resources, want a handful (all: %v)", i, n, costs)
		}
	}
}
