package pushapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

func newServer(t *testing.T) (*pushapi.Client, *pushapi.Server, *xdscache.Cache) {
	t.Helper()
	s, url, cache := pushapitest.Start(t, "secret", nil)
	return &pushapi.Client{BaseURL: url, Token: "secret"}, s, cache
}

func doc(name string, port int, hosts string) string {
	return fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: %s}
spec:
  listener: {port: %d, protocol: HTTP, hostnames: [%s]}
  backends: [{name: a, endpoints: [{address: 10.0.0.1, port: 80}]}]
`, name, port, hosts)
}

func apiErr(t *testing.T, err error) *pushapi.APIError {
	t.Helper()
	var e *pushapi.APIError
	if !errors.As(err, &e) {
		t.Fatalf("want an API error, got %v", err)
	}
	return e
}

func TestTokenRequired(t *testing.T) {
	c, _, _ := newServer(t)
	for _, tok := range []string{"", "wrong", "secret2"} {
		bad := &pushapi.Client{BaseURL: c.BaseURL, Token: tok}
		_, err := bad.Apply(context.Background(), []byte(doc("a", 80, "a.example.com")), false)
		if e := apiErr(t, err); e.Status != http.StatusUnauthorized {
			t.Errorf("token %q: status %d", tok, e.Status)
		}
	}
	list, err := c.List(context.Background())
	if err != nil || len(list) != 0 {
		t.Fatalf("an unauthorised push changed something: %v %v", list, err)
	}
	resp, err := http.Get(c.BaseURL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz needs no token: %v %v", resp, err)
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	c, _, _ := newServer(t)
	ctx := context.Background()
	res, err := c.Apply(ctx, []byte(doc("a", 80, "a.example.com")), false)
	if err != nil || res.Policies[0].Outcome != pushapi.Created || res.Policies[0].Generation != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	// One valid and one invalid document: neither is applied.
	body := doc("a", 80, "a2.example.com") + "---\n" + strings.Replace(doc("b", 81, "b.example.com"), "port: 81", "port: 0", 1)
	_, err = c.Apply(ctx, []byte(body), false)
	e := apiErr(t, err)
	if e.Status != http.StatusUnprocessableEntity || len(e.Errors) != 1 || !strings.Contains(e.Errors[0], "default/b (request#2): spec.listener.port: must be between 1 and 65535, got 0") {
		t.Fatalf("got %d %q", e.Status, e.Errors)
	}
	p, err := c.Get(ctx, "default", "a")
	if err != nil || p.Spec.Listener.Hostnames[0] != "a.example.com" || p.Generation != 1 {
		t.Fatalf("a changed after a refused push: %+v %v", p, err)
	}
	if _, err := c.Get(ctx, "default", "b"); apiErr(t, err).Status != http.StatusNotFound {
		t.Fatal("b exists after a refused push")
	}
	// Same document again: unchanged; new spec: configured, generation 2; metadata only: no new generation.
	res, _ = c.Apply(ctx, []byte(doc("a", 80, "a.example.com")), false)
	if res.Policies[0].Outcome != pushapi.Unchanged {
		t.Errorf("same document: %+v", res.Policies[0])
	}
	res, _ = c.Apply(ctx, []byte(doc("a", 80, "a3.example.com")), false)
	if res.Policies[0].Outcome != pushapi.Configured || res.Policies[0].Generation != 2 {
		t.Errorf("new spec: %+v", res.Policies[0])
	}
	res, err = c.Apply(ctx, []byte(strings.Replace(doc("a", 80, "a3.example.com"), "{name: a}", "{name: a, labels: {team: web}}", 1)), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Policies[0].Outcome != pushapi.Configured || res.Policies[0].Generation != 2 {
		t.Errorf("metadata change: %+v", res.Policies[0])
	}
	// The spec is compared as the API reads it: a duration spelled another way is the same spec, and a new
	// value is a new one.
	timed := func(d string) []byte {
		return []byte(strings.Replace(doc("a", 80, "a3.example.com"), "backends: [{name: a,", "backends: [{name: a, connectTimeout: "+d+",", 1))
	}
	for _, step := range []struct {
		timeout string
		gen     int64
	}{{"2s", 3}, {"2000ms", 3}, {"3s", 4}} {
		res, err := c.Apply(ctx, timed(step.timeout), false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Policies[0].Generation != step.gen {
			t.Errorf("connectTimeout %s: generation %d, want %d", step.timeout, res.Policies[0].Generation, step.gen)
		}
	}
}

func TestConflictsAreRefused(t *testing.T) {
	c, _, _ := newServer(t)
	ctx := context.Background()
	if _, err := c.Apply(ctx, []byte(doc("old", 80, "x.example.com")+"---\n"+doc("other", 80, "y.example.com")), false); err != nil {
		t.Fatal(err)
	}
	// A new policy taking a hostname already served.
	_, err := c.Apply(ctx, []byte(doc("new", 80, "x.example.com")), false)
	if e := apiErr(t, err); e.Status != http.StatusConflict || !strings.Contains(e.Errors[0], `default/new: spec.listener.hostnames: hostname "x.example.com" on port 80 is already served by policy default/old`) {
		t.Fatalf("%d %q", e.Status, e.Errors)
	}
	// A change to an older policy that would take a newer one's hostname away from it.
	_, err = c.Apply(ctx, []byte(doc("old", 80, "x.example.com, y.example.com")), false)
	if e := apiErr(t, err); e.Status != http.StatusConflict || !strings.Contains(e.Errors[0], "default/other would no longer be accepted") {
		t.Fatalf("%d %q", e.Status, e.Errors)
	}
	// Twice in one request.
	_, err = c.Apply(ctx, []byte(doc("z", 90, "z.example.com")+"---\n"+doc("z", 90, "z.example.com")), false)
	if e := apiErr(t, err); !strings.Contains(e.Errors[0], "default/z is in the request twice") {
		t.Fatalf("%q", e.Errors)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	c, _, cache := newServer(t)
	ctx := context.Background()
	res, err := c.Apply(ctx, []byte(doc("a", 80, "a.example.com")), true)
	if err != nil || !res.DryRun || res.Policies[0].Outcome != pushapi.Created {
		t.Fatalf("%+v %v", res, err)
	}
	if list, _ := c.List(ctx); len(list) != 0 {
		t.Fatalf("dry run stored %d policies", len(list))
	}
	if cur, _ := cache.State("default"); len(cur.Names("type.googleapis.com/envoy.config.cluster.v3.Cluster")) != 0 {
		t.Fatal("dry run published config")
	}
}

func TestBodyLimit(t *testing.T) {
	c, _, _ := newServer(t)
	_, err := c.Apply(context.Background(), []byte(strings.Repeat("#", pushapi.MaxBodyBytes+1)), false)
	if e := apiErr(t, err); e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", e.Status)
	}
}

func TestDelete(t *testing.T) {
	c, _, cache := newServer(t)
	ctx := context.Background()
	if _, err := c.Apply(ctx, []byte(doc("a", 80, "a.example.com")), false); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "default", "a"); err != nil {
		t.Fatal(err)
	}
	if e := apiErr(t, c.Delete(ctx, "default", "a")); e.Status != http.StatusNotFound {
		t.Errorf("second delete: %d", e.Status)
	}
	if cur, target := cache.State("default"); len(target.Names("type.googleapis.com/envoy.config.listener.v3.Listener")) != 0 || cur != target {
		t.Error("the deleted policy is still served")
	}
}

func TestRateLimitPerClient(t *testing.T) {
	c, s, _ := newServer(t)
	s.RateLimit = 5  // burst 11
	c.NoRetry = true // this test is about the refusals, not the client's patience
	ctx := context.Background()
	limited := 0
	for i := 0; i < 30; i++ {
		if _, err := c.List(ctx); err != nil {
			if e := apiErr(t, err); e.Status == http.StatusTooManyRequests {
				limited++
			}
		}
	}
	if limited < 15 {
		t.Errorf("30 calls at once against 5/s (burst 11): %d refused with 429, want at least 15", limited)
	}
}

// A good token has a bucket of its own: wrong tokens are throttled by their address (guessing is not free),
// and a flood of them from the address the host's own lbctl uses (a policy can route a public listener to
// the push API from the Envoy's loopback address) does not starve the holder of a good token.
func TestRateLimitWrongTokensDoNotStarveAGoodOne(t *testing.T) {
	c, s, _ := newServer(t)
	s.RateLimit = 5 // burst 11
	c.NoRetry = true
	ctx := context.Background()
	bad := &pushapi.Client{BaseURL: c.BaseURL, Token: "guess", NoRetry: true}
	limited := 0
	for range 30 {
		if _, err := bad.List(ctx); apiErr(t, err).Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 15 {
		t.Errorf("30 wrong tokens at once against 5/s (burst 11): %d refused with 429, want at least 15", limited)
	}
	for i := range 5 {
		if _, err := c.List(ctx); err != nil {
			t.Errorf("call %d with the admin token from the flooded address: %v", i, err)
		}
	}
}

// BenchmarkApplyOneChangeAmong measures one policy's change pushed with many others stored, as the
// control-plane benchmark does through HTTP (go test -bench Apply -cpuprofile to see where it goes).
func BenchmarkApplyOneChangeAmong(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := storedServer(b, n, func(i int) string { return doc(fmt.Sprintf("f-%d", i), 8080, fmt.Sprintf("f-%d.example.com", i)) })
			b.ResetTimer()
			for i := range b.N {
				change := strings.Replace(doc("probe", 8080, "probe.example.com"), "port: 80}", fmt.Sprintf("port: %d}", 81+i%2), 1)
				if _, code, errs := s.Apply([]byte(change), false); errs != nil {
					b.Fatalf("%d: %v", code, errs)
				}
			}
		})
	}
}

// storedServer is a push API (admin token "t") on a store of its own holding n policies, doc(i) each,
// pushed a thousand at a time.
func storedServer(b *testing.B, n int, doc func(i int) string) *pushapi.Server {
	b.Helper()
	st, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	s := &pushapi.Server{Store: st, Engine: engine.New(cache, log), Tracker: xdsserver.NewTracker(cache, log), Token: "t", Log: log}
	if err := s.Load(); err != nil {
		b.Fatal(err)
	}
	for from := 0; from < n; from += 1000 {
		var all strings.Builder
		for i := from; i < min(n, from+1000); i++ {
			all.WriteString("---\n" + doc(i))
		}
		if _, code, errs := s.Apply([]byte(all.String()), false); errs != nil {
			b.Fatalf("%d: %v", code, errs)
		}
	}
	return s
}

// TestConditionsKeepTheirTransitionTime: status is computed on every read, but a condition's
// lastTransitionTime is when it took its status, not the time of the read.
func TestConditionsKeepTheirTransitionTime(t *testing.T) {
	c, _, _ := newServer(t)
	ctx := context.Background()
	if _, err := c.Apply(ctx, []byte(doc("a", 80, "a.example.com")), false); err != nil {
		t.Fatal(err)
	}
	times := func() map[string]time.Time {
		t.Helper()
		list, err := c.List(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("%d policies, %v", len(list), err)
		}
		out := map[string]time.Time{}
		for _, cond := range list[0].Status.Conditions {
			out[cond.Type+"="+string(cond.Status)] = cond.LastTransitionTime.Time
		}
		return out
	}
	first := times()
	// Conditions are written to the second: wait until a read would show another second.
	time.Sleep(1100 * time.Millisecond)
	second := times()
	if len(first) < 3 {
		t.Fatalf("conditions: %v", first)
	}
	for k, at := range first {
		if !second[k].Equal(at) {
			t.Errorf("%s: lastTransitionTime moved from %s to %s between two reads", k, at, second[k])
		}
	}
}

// TestListAGatewaysPolicies: GET /v1/policies?gateway=NAMESPACE/NAME answers only the policies a Gateway
// became (by their annotation), and an empty list for a Gateway with none.
func TestListAGatewaysPolicies(t *testing.T) {
	c, _, _ := newServer(t)
	ctx := context.Background()
	gwDoc := strings.Replace(doc("gateway.web.80.any", 81, "a.example.com"), "metadata: {name: gateway.web.80.any}",
		"metadata: {name: gateway.web.80.any, namespace: shop, annotations: {gateway.lbplane.io/gateway: shop/web, gateway.lbplane.io/port: \"80\"}}", 1)
	if _, err := c.Apply(ctx, []byte(doc("a", 80, "b.example.com")+"---\n"+gwDoc), false); err != nil {
		t.Fatal(err)
	}
	pc := &pushclient.Client{BaseURL: c.BaseURL, Token: c.Token}
	ps, err := pc.GatewayPolicies(ctx, "shop", "web")
	if err != nil || len(ps) != 1 || ps[0].Name != "gateway.web.80.any" || ps[0].Status.Conditions == nil {
		t.Fatalf("the Gateway's policies: %v, %v", ps, err)
	}
	if ps, err := pc.GatewayPolicies(ctx, "shop", "other"); err != nil || len(ps) != 0 {
		t.Fatalf("another Gateway's policies: %v, %v", ps, err)
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	req, _ := http.NewRequest(http.MethodGet, c.BaseURL+"/v1/policies?gateway=shop/web", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Items) != 1 {
		t.Fatalf("the server answered %d items (%v), want only the Gateway's", len(l.Items), err)
	}
}
