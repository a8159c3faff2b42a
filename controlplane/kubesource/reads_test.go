package kubesource_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// With 1,000 Service-backed policies on a real API server, a change reads what it touches and nothing
// else: moving one EndpointSlice's endpoint resolves that one Service and translates that one policy, and
// editing one policy hands the engine that one policy anew (no other is taken or read again).
func TestChangeReadsWhatItTouches(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and creates 3,000 objects")
	}
	const n = 1000
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createServicePolicies(ctx, t, c, n)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	eng := engine.New(cache, log)
	src := &kubesource.Source{Config: c.Config, Engine: eng, Tracker: xdsserver.NewTracker(cache, log), Log: log, StatusInterval: 200 * time.Millisecond}
	if err := src.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = src.Run(ctx) }()
	select {
	case <-src.Synced():
	case <-time.After(2 * time.Minute):
		t.Fatal("the Kubernetes source did not sync")
	}
	if res, _ := eng.Result(); res.Policies.Len() != n {
		t.Fatalf("%d policies after the first resync, want %d", res.Policies.Len(), n)
	}
	taken, services, _ := src.Reads()
	if taken != n || services != n {
		t.Fatalf("the first resync took %d policies and resolved %d Services, want %d of each", taken, services, n)
	}
	// waitFor polls the engine's result: the source reads the cache as events arrive, with no signal of
	// its own to wait on.
	waitFor := func(what string, ok func(*translate.Result) bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			res, _ := eng.Result()
			if ok(res) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in the engine's result after a minute", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// reads returns the policies the source took anew, the Services it resolved and the policies the engine
	// translated since the last call.
	translated := eng.Translations()
	reads := func() (int64, int64, int64) {
		c, s, _ := src.Reads()
		tr := eng.Translations()
		dc, ds, dt := c-taken, s-services, tr-translated
		taken, services, translated = c, s, tr
		return dc, ds, dt
	}
	reads()

	moved := serviceSlice(500, "10.9.9.9")
	current := &discoveryv1.EndpointSlice{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(moved), current); err != nil {
		t.Fatal(err)
	}
	current.Endpoints = moved.Endpoints
	if err := c.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	waitFor("the moved endpoint", func(res *translate.Result) bool { return endpointOf(res, "default/p-0500/web") == "10.9.9.9" })
	if p, s, tr := reads(); p != 0 || s != 1 || tr != 1 {
		t.Errorf("one EndpointSlice change took %d policies, resolved %d Services and translated %d policies; want 0, 1 and 1", p, s, tr)
	}

	edited := &v1alpha1.LoadBalancerPolicy{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "p-0700"}, edited); err != nil {
		t.Fatal(err)
	}
	edited.Spec.Listener.Hostnames = []string{"edited.example.com"}
	if err := c.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	waitFor("the edited policy", func(res *translate.Result) bool {
		r, ok := res.Policies.Get(objkey.Key{Namespace: "default", Name: "p-0700"})
		return ok && r.Generation == edited.Generation
	})
	if p, s, tr := reads(); p != 1 || s != 0 || tr != 1 {
		t.Errorf("one policy edit took %d policies, resolved %d Services and translated %d policies; want 1, 0 and 1", p, s, tr)
	}

	// A deleted policy's Service is no longer resolved: a change of its EndpointSlice reads nothing.
	gone := &v1alpha1.LoadBalancerPolicy{}
	gone.Namespace, gone.Name = "default", "p-0300"
	if err := c.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	waitFor("the deleted policy", func(res *translate.Result) bool {
		_, ok := res.Policies.Get(objkey.Key{Namespace: "default", Name: "p-0300"})
		return !ok
	})
	if p, s, tr := reads(); p != 0 || s != 0 {
		t.Errorf("one policy deleted: took %d policies and resolved %d Services (translated %d), want none", p, s, tr)
	}
	orphan := serviceSlice(300, "10.9.9.8")
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(orphan), current); err != nil {
		t.Fatal(err)
	}
	current.Endpoints = orphan.Endpoints
	if err := c.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	// Then one more change, which does show, to know that the source has seen the one before it.
	moved = serviceSlice(501, "10.9.9.7")
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(moved), current); err != nil {
		t.Fatal(err)
	}
	current.Endpoints = moved.Endpoints
	if err := c.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	waitFor("the second moved endpoint", func(res *translate.Result) bool { return endpointOf(res, "default/p-0501/web") == "10.9.9.7" })
	if p, s, tr := reads(); p != 0 || s != 1 || tr != 1 {
		t.Errorf("a change of an unreferenced Service's EndpointSlice, then of a referenced one: copied %d policies, resolved %d Services and translated %d policies; want 0, 1 and 1", p, s, tr)
	}
}

// endpointOf is the address of a one-endpoint cluster of the default group in res; "" when there is no such
// cluster.
func endpointOf(res *translate.Result, cluster string) string {
	g := res.IR.Groups[xdscache.DefaultGroup]
	if g == nil {
		return ""
	}
	for _, c := range g.Clusters {
		if c.Name == cluster && len(c.Endpoints) == 1 {
			return c.Endpoints[0].Address
		}
	}
	return ""
}
