package kubesource_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// The Gateway API status is written by the status writer's rule: once a Gateway's routes are accepted and
// written, a tick with nothing changed computes no status of any Gateway API object. A change to one
// HTTPRoute's path computes and writes that route's status (its observedGeneration moved) and no other
// object's: its Gateway's status did not change. A new route writes its own status and its Gateway's (the
// listener's attachedRoutes moved), and no other route's. Neither change reads everything again: the
// Gateway API objects are translated again and the engine is handed the one policy that moved.
func TestGatewayStatusComputesOnlyWhatChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	const n = 30
	c := kubetest.Start(t)
	c.InstallCRDs(t, "charts/lbplane/crds/gateway-api")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := client.New(c.Config, client.Options{Scheme: kubesource.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	mkRoute := func(i int) *gwv1.HTTPRoute {
		// Three routes to a host name, as teams share a domain.
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("r-%02d", i)},
			Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
				Hostnames:       []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("h-%02d.example.com", i/3))},
				Rules: []gwv1.HTTPRouteRule{{
					Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptrTo(gwv1.PathMatchPathPrefix), Value: ptrTo(fmt.Sprintf("/r%d", i))}}},
					BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptrTo(gwv1.PortNumber(80))}}}},
				}},
			}}
	}
	objects := []client.Object{
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "lbplane"}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayapi.ControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "edge"}, Spec: gwv1.GatewaySpec{GatewayClassName: "lbplane",
			Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
	}
	for i := range n {
		objects = append(objects, mkRoute(i))
	}
	for _, o := range objects {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu       sync.Mutex
		computed = map[string][]string{} // kind → names, one per computation
		ticks    = make(chan struct{}, 1)
	)
	defer kubesource.OnStatusComputedOfKind(func(kind string, k objkey.Key) {
		mu.Lock()
		computed[kind] = append(computed[kind], k.Name)
		mu.Unlock()
	})()
	defer kubesource.OnStatusTick(func() {
		select {
		case ticks <- struct{}{}:
		default:
		}
	})()
	take := func() map[string][]string {
		mu.Lock()
		defer mu.Unlock()
		out := maps.Clone(computed)
		clear(computed)
		return out
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	eng := engine.New(cache, log)
	src := &kubesource.Source{Config: c.Config, Engine: eng, Tracker: xdsserver.NewTracker(cache, log), Log: log,
		StatusInterval: 100 * time.Millisecond, GatewayAPI: &kubesource.GatewayAPI{ProxyGroup: xdscache.DefaultGroup, Address: "127.0.0.1", Ports: []int32{20080}}}
	if err := src.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = src.Run(ctx) }()

	deadline := time.Now().Add(2 * time.Minute)
	// tick waits for the writer's next whole tick.
	tick := func(what string) {
		t.Helper()
		for range 2 { // the one under way, then a whole one
			select {
			case <-ticks:
			case <-time.After(time.Until(deadline)):
				t.Fatalf("waiting for %s: past the deadline", what)
			}
		}
	}
	// quiet waits until a whole tick computes no status, and returns what was computed until then.
	quiet := func(what string) map[string][]string {
		t.Helper()
		all := map[string][]string{}
		for {
			tick(what)
			got := take()
			if len(got) == 0 {
				return all
			}
			for k, v := range got {
				all[k] = append(all[k], v...)
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: the writer still computes %v", what, got)
			}
		}
	}
	accepted := func(r *gwv1.HTTPRoute) bool {
		for _, p := range r.Status.Parents {
			if p.ControllerName == gatewayapi.ControllerName {
				c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
				return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation
			}
		}
		return false
	}
	// versions waits until every route is accepted and the Gateway counts want routes, and returns the
	// resource version of each route and of the Gateway (a status write moves it).
	versions := func(want int32, what string) map[string]string {
		t.Helper()
		for {
			tick(what)
			var routes gwv1.HTTPRouteList
			var gw gwv1.Gateway
			if err := cl.List(ctx, &routes); err != nil {
				t.Fatal(err)
			}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "edge"}, &gw); err != nil {
				t.Fatal(err)
			}
			out := map[string]string{"gateway": gw.ResourceVersion}
			ok := len(gw.Status.Listeners) == 1 && gw.Status.Listeners[0].AttachedRoutes == want
			for i := range routes.Items {
				out[routes.Items[i].Name] = routes.Items[i].ResourceVersion
				ok = ok && accepted(&routes.Items[i])
			}
			if ok {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	versions(n, "every route to be accepted and attached")
	quiet("the status of every object to be written")

	// Nothing changes: no tick computes anything.
	for range 5 {
		tick("ticks with nothing changed")
	}
	if got := take(); len(got) > 0 {
		t.Errorf("ticks with nothing changed computed statuses: %v", got)
	}

	moved := func(before, after map[string]string) []string {
		var out []string
		for name, v := range after {
			if before[name] != v {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}

	// One route's path changes.
	before := versions(n, "the routes before the change")
	everything, translations := kubesource.ResyncsOfEverything(), eng.Translations()
	r := &gwv1.HTTPRoute{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "r-07"}, r); err != nil {
		t.Fatal(err)
	}
	r.Spec.Rules[0].Matches[0].Path.Value = ptrTo("/moved")
	if err := cl.Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	versions(n, "the changed route's status")
	got := quiet("the change to be written")
	after := versions(n, "the routes after the change")
	if m := moved(before, after); !slices.Equal(m, []string{"r-07"}) {
		t.Errorf("a change of r-07's path wrote the status of %v, want r-07 alone", m)
	}
	if routes := slices.Compact(slices.Sorted(slices.Values(got[kubesource.KindRoute]))); !slices.Equal(routes, []string{"r-07"}) || len(got[kubesource.KindGateway]) > 0 {
		t.Errorf("a change of r-07's path computed the status of routes %v and of the Gateway %d times, want r-07 alone", routes, len(got[kubesource.KindGateway]))
	}
	if d := kubesource.ResyncsOfEverything() - everything; d != 0 {
		t.Errorf("a change of r-07's path read everything again %d times, want 0", d)
	}
	if d := eng.Translations() - translations; d != 1 {
		t.Errorf("a change of r-07's path translated %d policies, want 1 (its host name's)", d)
	}

	// A new route: its status, and its Gateway's (attachedRoutes).
	before = after
	if err := cl.Create(ctx, mkRoute(n)); err != nil {
		t.Fatal(err)
	}
	versions(n+1, "the new route's status and its Gateway's")
	quiet("the new route to be written")
	after = versions(n+1, "the routes after the new one")
	if m := moved(before, after); !slices.Equal(m, []string{"gateway", fmt.Sprintf("r-%02d", n)}) {
		t.Errorf("a new route wrote the status of %v, want the Gateway's and r-%02d's", m, n)
	}
}

func ptrTo[T any](v T) *T { return &v }
