package lbctl_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// zoneAwarePolicy: three endpoints in zone-a, three in zone-b, zone-aware with minEndpoints 2.
const zoneAwarePolicy = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: za}
spec:
  listener: {port: 10095, protocol: HTTP, hostnames: [za.example.com]}
  backends:
    - name: app
      loadBalancing: {algorithm: RoundRobin, zoneAware: {minEndpoints: 2}}
      endpoints:
        - {address: 127.0.0.1, port: 9101, zone: zone-a}
        - {address: 127.0.0.1, port: 9102, zone: zone-a}
        - {address: 127.0.0.1, port: 9103, zone: zone-a}
        - {address: 127.0.0.1, port: 9104, zone: zone-b}
        - {address: 127.0.0.1, port: 9105, zone: zone-b}
        - {address: 127.0.0.1, port: 9106, zone: zone-b}
`

// calls records the push API calls a command makes.
type calls struct {
	mu   sync.Mutex
	seen []string
}

func (c *calls) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.seen = append(c.seen, r.Method+" "+r.URL.Path)
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (c *calls) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.seen
	c.seen = nil
	return out
}

// zoneOfPort is an endpoint's zone ("a", "b") by its port: 9100-9103 are zone-a's.
func zoneOfPort(addr string) string {
	if addr >= "127.0.0.1:9104" {
		return "b"
	}
	return "a"
}

// TestPredictionsAskTheServer: trace, whatif and diff --traffic without -f ask the server, with a read-only
// token, and never list its policies (200 others are stored); their answers for a zone-aware backend follow
// the Envoy's zone (--zone, or the proxy group's Envoys: none here, so an Envoy without a zone, said in a
// caveat), and agree with the same predictions made offline from the file.
func TestPredictionsAskTheServer(t *testing.T) {
	s, _, _ := pushapitest.Start(t, "admin", func(s *pushapi.Server) { s.ReadOnlyToken = "reader" })
	rec := &calls{}
	srv := httptest.NewServer(rec.wrap(s.Handler()))
	t.Cleanup(srv.Close)
	var docs strings.Builder
	for i := range 200 {
		fmt.Fprintf(&docs, "---\napiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: f-%d}\nspec:\n  listener: {port: 10095, protocol: HTTP, hostnames: [f-%d.example.com]}\n  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: 9001}]}]\n", i, i)
	}
	docs.WriteString("---\n" + zoneAwarePolicy)
	admin := &pushclient.Client{BaseURL: srv.URL, Token: "admin"}
	if _, err := admin.Apply(context.Background(), []byte(docs.String()), false); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "za.yaml")
	if err := os.WriteFile(file, []byte(zoneAwarePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	rec.take()
	lbctl := func(args ...string) (int, string, string) {
		t.Helper()
		return run(t, "", append([]string{"--server", srv.URL, "--token", "reader"}, args...)...)
	}
	askedOnly := func(what string, want ...string) {
		t.Helper()
		if got := rec.take(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s called %v, want %v", what, got, want)
		}
	}

	trace := func(args ...string) trafficmodel.Trace {
		t.Helper()
		code, out, errs := lbctl(append([]string{"trace", "za", "-o", "json"}, args...)...)
		return oneBackendTrace(t, code, out, errs)
	}
	zones := func(cs []trafficmodel.Candidate) map[string]float64 {
		out := map[string]float64{}
		for _, c := range cs {
			out[zoneOfPort(c.Address)] += c.Probability
		}
		return out
	}
	inA := trace("--zone", "zone-a")
	askedOnly("trace --zone zone-a", "POST /v1/policies/default/za/trace")
	if z := zones(inA.Backends[0].Candidates); math.Abs(z["a"]-1) > 1e-9 || len(inA.Backends[0].Candidates) != 3 || inA.Envoys != "an Envoy in zone-a" {
		t.Errorf("an Envoy in zone-a: %v (%+v), want all to zone-a's three", z, inA.Backends[0].Candidates)
	}
	if len(inA.Backends[0].Caveats) != 0 {
		t.Errorf("one zone's Envoy: caveats %q", inA.Backends[0].Caveats)
	}
	none := trace()
	askedOnly("trace", "POST /v1/policies/default/za/trace")
	if z := zones(none.Backends[0].Candidates); math.Abs(z["a"]-0.5) > 1e-9 || len(none.Backends[0].Caveats) != 1 ||
		!strings.Contains(none.Backends[0].Caveats[0], "an Envoy without a zone") {
		t.Errorf("no Envoy connected: %v, caveats %q; want half per zone and the zone-aware caveat", z, none.Backends[0].Caveats)
	}
	offline := trace("-f", file, "--zone", "zone-a")
	askedOnly("trace -f")
	if a, b := fmt.Sprint(offline.Backends[0].Candidates), fmt.Sprint(inA.Backends[0].Candidates); a != b {
		t.Errorf("offline %s, server %s", a, b)
	}

	// What-if: two of zone-a's three down leaves one, below minEndpoints: 1 healthy of 4 stays in zone-a.
	whatif := func(args ...string) map[string]float64 {
		t.Helper()
		code, out, errs := lbctl(append([]string{"whatif", "za", "-o", "json", "--down", "endpoint=127.0.0.1:9101", "--down", "endpoint=127.0.0.1:9102"}, args...)...)
		if code != 0 {
			t.Fatalf("whatif %v: exit %d: %s", args, code, errs)
		}
		z := map[string]float64{}
		for _, c := range onePreview(t, out).Changes {
			z[zoneOfPort(c.Address)+" before"] += c.Before
			z[zoneOfPort(c.Address)+" after"] += c.After
		}
		return z
	}
	for _, args := range [][]string{{"--zone", "zone-a"}, {"--zone", "zone-a", "-f", file}} {
		z := whatif(args...)
		if math.Abs(z["a before"]-1) > 1e-9 || math.Abs(z["a after"]-0.25) > 1e-9 || math.Abs(z["b after"]-0.75) > 1e-9 {
			t.Errorf("whatif %v: %v, want zone-a 100%% before, 25%% after", args, z)
		}
	}
	askedOnly("whatif", "POST /v1/policies/default/za/whatif")

	// diff --traffic: a fourth zone-a endpoint, for an Envoy in zone-a: a quarter each of zone-a's four.
	next := filepath.Join(t.TempDir(), "next.yaml")
	os.WriteFile(next, []byte(strings.Replace(zoneAwarePolicy, "        - {address: 127.0.0.1, port: 9104", "        - {address: 127.0.0.1, port: 9100, zone: zone-a}\n        - {address: 127.0.0.1, port: 9104", 1)), 0o600)
	code, out, errs := lbctl("diff", "--traffic", "-f", next, "--zone", "zone-a", "-o", "json")
	askedOnly("diff --traffic", "POST /v1/traffic")
	if code != 1 {
		t.Errorf("diff --traffic: exit %d, want 1 (traffic moves): %s", code, errs)
	}
	for _, c := range onePreview(t, out).Changes {
		want := 0.0
		if zoneOfPort(c.Address) == "a" {
			want = 0.25
		}
		if math.Abs(c.After-want) > 1e-9 {
			t.Errorf("%s: after %.3f, want %.3f", c.Address, c.After, want)
		}
	}
	_, text, _ := lbctl("diff", "--traffic", "-f", next)
	if !strings.Contains(text, "(predicted for an Envoy without a zone: zone-aware routing depends on the Envoy's zone)") ||
		!strings.Contains(text, "(not predicted, backend app: zone-aware routing: the shares are those of an Envoy without a zone") {
		t.Errorf("diff --traffic text says neither whom it predicts for nor the caveat:\n%s", text)
	}

	// Bad input names the field.
	if code, _, errs := lbctl("trace", "za", "--zone", "not a zone"); code == 0 || !strings.Contains(errs, "zone: must be a zone name") {
		t.Errorf("a bad zone: exit %d: %s", code, errs)
	}
	if code, _, errs := lbctl("whatif", "za", "--down", "endpoint=10.9.9.9"); code == 0 || !strings.Contains(errs, "down: endpoint 10.9.9.9: no endpoint of default/za") {
		t.Errorf("an unknown endpoint: exit %d: %s", code, errs)
	}
	if code, _, errs := lbctl("trace", "nope"); code == 0 || !strings.Contains(errs, "default/nope not found") {
		t.Errorf("an unknown policy: exit %d: %s", code, errs)
	}
}
