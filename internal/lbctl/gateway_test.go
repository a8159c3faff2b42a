package lbctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/internal/lbctl"
)

var shopGateway = filepath.Join("testdata", "gateway", "shop.yaml")

// traceJSON is what lbctl trace -o json says of a Gateway's request.
type traceJSON struct {
	Policy  string `json:"policy"`
	Route   string `json:"route"`
	Gateway struct {
		Gateway   string   `json:"gateway"`
		Port      int32    `json:"port"`
		Hostname  string   `json:"hostname"`
		Listeners []string `json:"listeners"`
		Policy    string   `json:"policy"`
		Rule      *struct {
			Route string `json:"route"`
			Rule  int    `json:"rule"`
			Name  string `json:"name"`
			Match int    `json:"match"`
		} `json:"rule"`
	} `json:"gateway"`
	Backends []struct {
		Backend    string `json:"backend"`
		Candidates []struct {
			Address string `json:"address"`
		} `json:"candidates"`
	} `json:"backends"`
}

// TestTraceGatewayOffline: trace gateway/NAME URL -f finds the policy of the URL's port and host name as
// Envoy picks it (the listener of the name itself over the wildcard's; the wildcard's for another name), and
// names the Gateway, the listener and the HTTPRoute rule; the Services' endpoints are the files'
// EndpointSlices'.
func TestTraceGatewayOffline(t *testing.T) {
	for _, tc := range []struct {
		url, listener, hostname, backend, endpoint string
		rule, match                                int
		ruleName                                   string
	}{
		{"http://shop.example.com/api/cart?x=1", "shop", "shop.example.com", "api", "10.0.0.2:8080", 0, 0, ""},
		{"http://SHOP.example.com:80/", "shop", "shop.example.com", "frontend", "10.0.1.1:8000", 1, 0, "rest"},
		{"http://a.b.example.com/api", "http", "*.example.com", "api", "10.0.0.1:8080", 0, 0, ""},
	} {
		code, out, errs := run(t, "", "trace", "gateway/web", "-n", "shop", tc.url, "-f", shopGateway, "-o", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.url, code, errs)
		}
		var tr traceJSON
		if err := json.Unmarshal([]byte(out), &tr); err != nil {
			t.Fatal(err)
		}
		g := tr.Gateway
		if g.Gateway != "shop/web" || g.Port != 80 || g.Hostname != tc.hostname || strings.Join(g.Listeners, ",") != tc.listener || g.Policy != tr.Policy {
			t.Errorf("%s: gateway %+v (policy %s)", tc.url, g, tr.Policy)
		}
		if r := g.Rule; r == nil || r.Route != "shop/web" || r.Rule != tc.rule || r.Match != tc.match || r.Name != tc.ruleName {
			t.Errorf("%s: rule %+v, want shop/web rule %d match %d", tc.url, r, tc.rule, tc.match)
		}
		if len(tr.Backends) == 0 || !strings.HasPrefix(tr.Backends[0].Backend, tc.backend+"-") || !strings.Contains(out, tc.endpoint) {
			t.Errorf("%s: backends %+v, want %s with %s", tc.url, tr.Backends, tc.backend, tc.endpoint)
		}
	}
	code, out, errs := run(t, "", "trace", "gateway/web", "-n", "shop", "http://x.example.com/", "-f", shopGateway)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Gateway shop/web, listener http (port 80), host name *.example.com: policy shop/gateway.web.80.",
		`/web-5ae11849-0-0 (HTTPRoute shop/web spec.rules[0].matches[0]): path "/" is not "/api" or below it`,
		"  made of HTTPRoute shop/web spec.rules[1] (name rest).matches[0]",
		"Error share: weight 1 (10.0% of the route)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A Gateway of one port needs no URL: the Host header names the host.
	if code, out, errs := run(t, "", "trace", "gtw/web", "-n", "shop", "--header", "host=shop.example.com:80", "--path", "/api", "-f", shopGateway); code != 0 || !strings.Contains(out, "listener shop (port 80)") {
		t.Errorf("without a URL: exit %d: %s%s", code, out, errs)
	}
	// A host name with nothing attached answers 404, and says so.
	if code, out, errs := run(t, "", "trace", "gateway/two-ports", "-n", "shop", "http://any.example.org:8080/", "-f", shopGateway); code != 0 ||
		!strings.Contains(out, "listener alt (port 8080), host name * (") || !strings.Contains(out, "made of no HTTPRoute rule") || !strings.Contains(out, "404") {
		t.Errorf("nothing attached: exit %d: %s%s", code, out, errs)
	}
}

// TestGatewayTargetErrors: what cannot be resolved says which part of the request and why.
func TestGatewayTargetErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gateway/nope", "http://shop.example.com/"}, "gateway shop/nope: lbplane serves no listener of it: no Gateway shop/nope in " + shopGateway},
		{[]string{"gateway/elsewhere", "http://shop.example.com/"}, "gateway shop/elsewhere: lbplane serves no listener of it: its GatewayClass other has controllerName other than lbplane.io/gateway-controller"},
		{[]string{"gateway/web", "http://shop.example.com:8080/"}, "port 8080: gateway shop/web has no listener on port 8080 that lbplane serves (its ports: 80)"},
		{[]string{"gateway/web", "https://shop.example.com/"}, "port 443: gateway shop/web has no listener on port 443"},
		{[]string{"gateway/web", "http://example.org/"}, `host "example.org": gateway shop/web does not serve it on port 80 (its host names there: *.example.com, shop.example.com): Envoy answers 404`},
		{[]string{"gateway/web"}, "host: the request names none, and gateway shop/web serves only named hosts on port 80"},
		{[]string{"gateway/two-ports"}, "gateway shop/two-ports listens on ports 80, 8080: name one in the request's URL"},
		{[]string{"gateway/web", "shop.example.com/"}, `URL "shop.example.com/": want http://HOST[:PORT][/PATH]`},
		{[]string{"gateway/web", "http://shop.example.com/a", "--path", "/b"}, "--path /b: the URL gives the path (/a)"},
		{[]string{"gateway/web", "http://shop.example.com/", "--header", "host=other.example.com"}, "--header host=other.example.com: the URL names host shop.example.com"},
		{[]string{"service/web"}, `"service/web": kind service is neither a LoadBalancerPolicy (NAME, lbp/NAME) nor a Gateway (gateway/NAME)`},
		{[]string{"web", "http://shop.example.com/"}, "a request URL goes with gateway/NAME"},
	} {
		code, _, errs := run(t, "", append([]string{"trace", "-n", "shop", "-f", shopGateway}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, "error: "+tc.want) {
			t.Errorf("trace %v: exit %d, stderr %q; want %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestWhatIfGatewayOffline: whatif gateway/NAME previews each of the Gateway's policies under its listener
// and host name, with the HTTPRoute rule of each route; a URL previews the one that serves it.
func TestWhatIfGatewayOffline(t *testing.T) {
	code, out, errs := run(t, "", "whatif", "gateway/web", "-n", "shop", "-f", shopGateway, "--down", "endpoint=10.0.0.1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Gateway shop/web, listener http (port 80), host name *.example.com: policy shop/gateway.web.80.",
		"Gateway shop/web, listener shop (port 80), host name shop.example.com: policy shop/gateway.web.80.",
		"HTTPROUTE RULE",
		"shop/web spec.rules[0].matches[0]",
		"shop/web spec.rules[1] (name rest).matches[0]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = run(t, "", "whatif", "gateway/web", "-n", "shop", "http://shop.example.com", "-f", shopGateway, "--down", "endpoint=10.0.0.1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var l struct {
		Items []struct {
			Policy  string `json:"policy"`
			Gateway struct {
				Hostname string `json:"hostname"`
			} `json:"gateway"`
			SpecRoutes map[string]int `json:"specRoutes"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Items) != 1 || l.Items[0].Gateway.Hostname != "shop.example.com" || len(l.Items[0].SpecRoutes) != 2 {
		t.Fatalf("whatif of one host name: %v\n%s", err, out)
	}
}

// gatewayServer is a push API whose store holds the policies the test files' Gateways become, their Services'
// endpoints written out (a store has no Kubernetes to resolve them). It records the calls made to it, and
// returns its URL and an endpoint of one of shop/web's policies only.
func gatewayServer(t *testing.T) (url string, down string, seen func() []string) {
	t.Helper()
	s, _, _ := pushapitest.Start(t, "admin", nil)
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	// The Gateway's policies as lbplane makes them, their Services' endpoints written out (a store has no
	// Kubernetes to resolve them).
	ps, err := lbctl.GatewayPolicies(shopGateway)
	if err != nil || len(ps) == 0 {
		t.Fatalf("%d policies, %v", len(ps), err)
	}
	var docs []string
	down = "" // an endpoint of one of shop/web's policies only
	for i, p := range ps {
		for j := range p.Spec.Backends {
			b := &p.Spec.Backends[j]
			b.Service = nil
			b.Endpoints = []v1alpha1.Endpoint{{Address: "127.0.0.1", Port: int32(9200 + 10*i + j)}}
			if down == "" && strings.HasPrefix(p.Name, "gateway.web.") {
				down = fmt.Sprintf("endpoint=127.0.0.1:%d", b.Endpoints[0].Port)
			}
		}
		b, err := yaml.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	c := &pushclient.Client{BaseURL: srv.URL, Token: "admin"}
	if _, err := c.Apply(context.Background(), []byte(strings.Join(docs, "---\n")), false); err != nil {
		t.Fatal(err)
	}
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
	take()
	return srv.URL, down, take
}

// TestTraceGatewayAsksTheServer: without -f, trace and whatif of gateway/NAME ask the server for the
// Gateway's policies alone (GET /v1/policies?gateway=...), never the whole list, and then for the trace of
// the one that serves the request; the server says which route of the policy matched, and the answer names
// its HTTPRoute rule.
func TestTraceGatewayAsksTheServer(t *testing.T) {
	url, down, seen := gatewayServer(t)
	code, out, errs := run(t, "", "--server", url, "--token", "admin", "trace", "gateway/web", "-n", "shop", "http://shop.example.com/", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var tr traceJSON
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	if r := tr.Gateway.Rule; tr.Gateway.Hostname != "shop.example.com" || r == nil || r.Route != "shop/web" || r.Rule != 1 || r.Name != "rest" {
		t.Errorf("gateway %+v, rule %+v", tr.Gateway, tr.Gateway.Rule)
	}
	want := []string{"GET /v1/policies?gateway=shop%2Fweb", fmt.Sprintf("POST /v1/policies/shop/%s/trace", tr.Gateway.Policy[len("shop/"):])}
	if got := seen(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	code, _, errs = run(t, "", "--server", url, "--token", "admin", "trace", "gateway/nope", "-n", "shop", "http://shop.example.com/")
	if code == 0 || !strings.Contains(errs, "error: gateway shop/nope: lbplane serves no listener of it: no such Gateway, not of a GatewayClass with controllerName lbplane.io/gateway-controller") {
		t.Errorf("unknown Gateway: exit %d, %s", code, errs)
	}
	// The endpoint is in one policy of the Gateway: the other is left out, and said so.
	code, out, errs = run(t, "", "--server", url, "--token", "admin", "whatif", "gateway/web", "-n", "shop", "--down", down)
	if code != 0 || strings.Count(out, "Gateway shop/web, listener") != 1 || !strings.Contains(out, "shop/web spec.rules[0].matches[0]") ||
		!strings.Contains(errs, "note: not previewed: gateway.web.80.") {
		t.Errorf("whatif: exit %d: %s%s", code, out, errs)
	}
}

// TestStatusAndGetOfAGateway: status and get take gateway/NAME (the Gateway's policies, asked of the server
// alone); a Gateway's policy says in its status which Gateway, listener and host name it serves, and get -o
// wide shows its Gateway and listeners.
func TestStatusAndGetOfAGateway(t *testing.T) {
	url, _, seen := gatewayServer(t)
	code, out, errs := run(t, "", "--server", url, "--token", "admin", "status", "gateway/web", "-n", "shop")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"  Gateway       shop/web, listener http (port 80), host name *.example.com\n",
		"  Gateway       shop/web, listener shop (port 80), host name shop.example.com\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if got := seen(); len(got) != 1 || got[0] != "GET /v1/policies?gateway=shop%2Fweb" {
		t.Errorf("calls %q", got)
	}
	code, out, errs = run(t, "", "--server", url, "--token", "admin", "get", "gateway/two-ports", "-n", "shop", "-o", "wide")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tail := func(l string) string { f := strings.Fields(l); return strings.Join(f[len(f)-2:], " ") }
	if len(lines) != 3 || tail(lines[0]) != "GATEWAY LISTENERS" || tail(lines[1]) != "shop/two-ports http:80" || tail(lines[2]) != "shop/two-ports alt:8080" {
		t.Errorf("get -o wide:\n%s", out)
	}
	code, out, errs = run(t, "", "--server", url, "--token", "admin", "get", "gateway/web", "-n", "shop", "-o", "name")
	if code != 0 || strings.Count(out, "loadbalancerpolicy.lbplane.io/gateway.web.80.") != 2 {
		t.Errorf("get -o name: exit %d: %s%s", code, out, errs)
	}
	code, _, errs = run(t, "", "--server", url, "--token", "admin", "status", "gateway/nope", "-n", "shop")
	if code == 0 || !strings.Contains(errs, "error: gateway shop/nope: lbplane serves no listener of it") {
		t.Errorf("status of an unknown Gateway: exit %d: %s", code, errs)
	}
}

// TestDiffOfGatewayObjects: diff --traffic --from and diff --from read Gateway API objects and the Services
// they name: the Gateway's policies whose traffic moves are previewed under their Gateway, listener and host
// name (the others are not), and the resources that change are listed. Asked of lbplane, Gateway API objects
// are refused with what to do instead.
func TestDiffOfGatewayObjects(t *testing.T) {
	next := filepath.Join("testdata", "gateway", "shop-next.yaml")
	code, out, errs := run(t, "", "diff", "--traffic", "--from", shopGateway, "-f", next)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (traffic moves): %s%s", code, out, errs)
	}
	for _, want := range []string{
		"Gateway shop/web, listener http (port 80), host name *.example.com: policy shop/gateway.web.80.",
		"Gateway shop/web, listener shop (port 80), host name shop.example.com: policy shop/gateway.web.80.",
		"shop/web spec.rules[0].matches[0]",
		"10.0.1.3:8000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff --traffic lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "two-ports") {
		t.Errorf("a Gateway the change does not touch is previewed:\n%s", out)
	}
	code, out, errs = run(t, "", "diff", "--from", shopGateway, "-f", next)
	// The route to /api now sends to the frontend, which has one more endpoint.
	if code != 1 || !strings.Contains(out, "~ RouteConfiguration ") || !strings.Contains(out, `"10.0.1.3"`) {
		t.Errorf("diff --from: exit %d: %s%s", code, out, errs)
	}
	code, _, errs = run(t, "", "--server", "http://127.0.0.1:1", "--token", "x", "diff", "--traffic", "-f", next)
	if code != 2 || !strings.Contains(errs, "holds Kubernetes objects") || !strings.Contains(errs, "--from RUNNING") {
		t.Errorf("asked of lbplane: exit %d: %s", code, errs)
	}
}

// TestOfflineReadsAList: a List, as kubectl get -o yaml prints it, is read item by item; what lbplane makes
// no policy of is left out, and said so.
func TestOfflineReadsAList(t *testing.T) {
	code, out, errs := run(t, "", "trace", "gateway/listed", "-n", "shop", "http://any.example.com/", "-f", filepath.Join("testdata", "gateway", "list.yaml"))
	if code != 0 || !strings.Contains(out, "made of HTTPRoute shop/listed spec.rules[0].matches[0]") || !strings.Contains(out, "10.0.0.9:8080") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if !strings.Contains(errs, "warning: testdata/gateway/list.yaml#1.items[4]: v1 Pod: left out") {
		t.Errorf("stderr %q", errs)
	}
}
