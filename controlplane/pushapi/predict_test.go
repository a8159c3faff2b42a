package pushapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// predictDoc is a policy of three endpoints in two zones, zone-aware, on a port shared by many.
func predictDoc(name string, port int) string {
	return fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: %s}
spec:
  listener: {port: %d, protocol: HTTP, hostnames: [%s.example.com]}
  backends:
    - name: app
      loadBalancing: {algorithm: RoundRobin, zoneAware: {minEndpoints: 1}}
      endpoints:
        - {address: 10.0.0.1, port: 80, zone: zone-a}
        - {address: 10.0.0.2, port: 80, zone: zone-a}
        - {address: 10.0.0.3, port: 80, zone: zone-b}
`, name, port, name)
}

// BenchmarkPredict5000 answers trace, whatif and diff --traffic (a traffic preview of one changed policy)
// about one policy among 5,000 on one port through the push API, as lbctl asks them: from what the server
// serves, with nothing downloaded. The target is 50 ms per answer on an idle two-core machine.
func BenchmarkPredict5000(b *testing.B) {
	const n = 5000
	s := storedServer(b, n, func(i int) string { return predictDoc(fmt.Sprintf("p-%05d", i), 8080) })
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	c := &pushapi.Client{BaseURL: hs.URL, Token: "t"}
	ctx := context.Background()
	name := fmt.Sprintf("p-%05d", n/2)
	zone := "zone-a"
	changed := []byte(strings.Replace(predictDoc(name, 8080), "minEndpoints: 1", "minEndpoints: 3", 1))
	// explain, which reads the server's built state too, is the yardstick the three are measured beside.
	b.Run("explain", func(b *testing.B) {
		for b.Loop() {
			if e, err := c.Explain(ctx, "default", name); err != nil || e == nil {
				b.Fatalf("%v %+v", err, e)
			}
		}
	})
	b.Run("trace", func(b *testing.B) {
		for b.Loop() {
			ans, err := c.Trace(ctx, "default", name, apiwire.TraceRequest{Path: "/", Predict: apiwire.Predict{Zone: &zone}})
			if err != nil || len(ans.Trace.Backends) != 1 || len(ans.Trace.Backends[0].Candidates) != 2 {
				b.Fatalf("%v %+v", err, ans)
			}
		}
	})
	b.Run("whatif", func(b *testing.B) {
		for b.Loop() {
			pvs, err := c.WhatIf(ctx, "default", name, apiwire.WhatIfRequest{Predict: apiwire.Predict{Down: []string{"endpoint=10.0.0.1:80"}, Zone: &zone}})
			if err != nil || len(pvs) != 1 || len(pvs[0].Changes) != 3 {
				b.Fatalf("%v %+v", err, pvs)
			}
		}
	})
	b.Run("traffic", func(b *testing.B) {
		for b.Loop() {
			pvs, err := c.Traffic(ctx, changed, &zone)
			if err != nil || len(pvs) != 1 || len(pvs[0].Changes) != 3 {
				b.Fatalf("%v %+v", err, pvs)
			}
		}
	})
}

// TestTrafficPreviewInKubernetesMode: where policies come from Kubernetes (pushes refused), a traffic
// preview still answers, the body's policies replacing or joining the cluster's; an invalid one is refused
// with its field, and a trace names the policy's listener for --live.
func TestTrafficPreviewInKubernetesMode(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cache := xdscache.New()
	eng := engine.New(cache, log)
	s := &pushapi.Server{Store: st, Engine: eng, Tracker: xdsserver.NewTracker(cache, log), Token: "t", Log: log,
		ReadOnly: "policies come from Kubernetes in this mode: use kubectl apply"}
	cart := &v1alpha1.LoadBalancerPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: "shop"},
		Spec: v1alpha1.LoadBalancerPolicySpec{DebugHeaders: true, Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "app", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}, {Address: "10.0.0.2", Port: 80}}}}}}
	eng.Set(engine.SourceKubernetes, []*v1alpha1.LoadBalancerPolicy{cart})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	c := &pushapi.Client{BaseURL: hs.URL, Token: "t"}
	ctx := context.Background()
	next := `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: cart, namespace: shop}
spec:
  listener: {port: 8080, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 10.0.0.1, port: 80}, {address: 10.0.0.2, port: 80}, {address: 10.0.0.3, port: 80}, {address: 10.0.0.4, port: 80}]}]
`
	pvs, err := c.Traffic(ctx, []byte(next), nil)
	if err != nil || len(pvs) != 1 || len(pvs[0].Changes) != 4 {
		t.Fatalf("%v %+v", err, pvs)
	}
	for _, ch := range pvs[0].Changes {
		want := 0.5
		if ch.State == "added" {
			want = 0
		}
		if ch.Before != want || ch.After != 0.25 {
			t.Errorf("%s: %.2f -> %.2f, want %.2f -> 0.25 (%s)", ch.Address, ch.Before, ch.After, want, ch.State)
		}
	}
	if _, err := c.Apply(ctx, []byte(next), false); apiErr(t, err).Status != http.StatusConflict {
		t.Errorf("a push in Kubernetes mode: %v", err)
	}
	_, err = c.Traffic(ctx, []byte(strings.Replace(next, "port: 8080", "port: 0", 1)), nil)
	if e := apiErr(t, err); e.Status != http.StatusUnprocessableEntity || !strings.Contains(strings.Join(e.Errors, " "), "spec.listener.port") {
		t.Errorf("an invalid policy: %d %v", e.Status, e.Errors)
	}
	ans, err := c.Trace(ctx, "shop", "cart", apiwire.TraceRequest{Path: "/"})
	if err != nil || ans.Target.Port != 8080 || !ans.Target.DebugHeaders || len(ans.Trace.Backends[0].Candidates) != 2 {
		t.Errorf("trace: %v %+v", err, ans)
	}
	if _, err := c.Trace(ctx, "shop", "cart", apiwire.TraceRequest{Path: "x"}); apiErr(t, err).Status != http.StatusBadRequest {
		t.Errorf("a path without /: %v", err)
	}
}

// TestTrafficPreviewOfAConfigDirPolicy: a policy of --config-dir, which a push refuses, is previewed as its
// file edited would serve it; one request mixing it with a pushed policy is refused, naming both sources.
func TestTrafficPreviewOfAConfigDirPolicy(t *testing.T) {
	c, s, _ := newServer(t)
	ctx := context.Background()
	fromDir := &v1alpha1.LoadBalancerPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "dir", Namespace: "default"},
		Spec: v1alpha1.LoadBalancerPolicySpec{Listener: v1alpha1.Listener{Port: 8081, Protocol: v1alpha1.ProtocolHTTP},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "127.0.0.1", Port: 80}}}}}}
	s.Engine.Set(engine.SourceConfigDir, []*v1alpha1.LoadBalancerPolicy{fromDir})
	edited := `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: dir}
spec:
  listener: {port: 8081, protocol: HTTP}
  backends: [{name: a, endpoints: [{address: 127.0.0.1, port: 80}, {address: 127.0.0.2, port: 80}]}]
`
	if _, err := c.Apply(ctx, []byte(edited), false); apiErr(t, err).Status != http.StatusConflict {
		t.Fatalf("a push of a --config-dir policy: %v", err)
	}
	pvs, err := c.Traffic(ctx, []byte(edited), nil)
	if err != nil || len(pvs) != 1 || len(pvs[0].Changes) != 2 || pvs[0].Changes[0].Before != 1 || pvs[0].Changes[0].After != 0.5 {
		t.Fatalf("%v %+v", err, pvs)
	}
	_, err = c.Traffic(ctx, []byte(edited+"---\n"+doc("pushed", 8082, "pushed.example.com")), nil)
	if e := apiErr(t, err); e.Status != http.StatusConflict || !strings.Contains(strings.Join(e.Errors, " "), "of --config-dir and of the store (lbctl push-config)") {
		t.Errorf("mixed sources: %d %v", e.Status, e.Errors)
	}
}
