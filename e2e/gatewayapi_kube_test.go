package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lbplane/lbplane/internal/kubetest"
)

// gwBackend is an in-test HTTP server behind a Service of its own: it answers with its name (X-Backend) and
// the request's headers as JSON, so that a test sees what Envoy changed. It listens inside a test network
// namespace (an EndpointSlice refuses loopback addresses, and lbplane the host's own).
type gwBackend struct {
	name, ip string
	port     int
	// probes counts Envoy's health-check requests (User-Agent Envoy/HC); a request with ?fail=1 gets 500, and
	// every request once failing is set.
	probes  *atomic.Int64
	failing *atomic.Bool
}

func startGWBackend(t *testing.T, name string) *gwBackend {
	t.Helper()
	h := newNetHost(t)
	ln, err := listenInNetns(h.name, net.JoinHostPort(h.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	probes, failing := &atomic.Int64{}, &atomic.Bool{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() == "Envoy/HC" {
			probes.Add(1)
		}
		w.Header().Set("X-Backend", name)
		// What the request looked like here: its Host and path (a rewrite changes them), and a header a
		// response header change may remove.
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-Uri", r.RequestURI)
		w.Header().Set("X-Backend-Extra", "extra")
		if r.URL.Query().Get("fail") == "1" || failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
		json.NewEncoder(w).Encode(r.Header)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &gwBackend{name: name, ip: h.IP, port: ln.Addr().(*net.TCPAddr).Port, probes: probes, failing: failing}
}

// listenInNetns opens a TCP listener inside the named network namespace: a socket stays in the namespace it
// was made in, and is served from any thread. The thread goes back to its own namespace afterwards, and is
// never ended: Envoy, started by some thread of this process, gets SIGTERM when that thread ends (it sets
// PR_SET_PDEATHSIG), so a thread that cannot go back is parked for good instead.
func listenInNetns(ns, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer own.Close()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering network namespace %s: %w", ns, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) != nil {
			select {} // in the test's namespace for good: never reused, never ended
		}
		runtime.UnlockOSThread()
	}()
	r := <-ch
	return r.ln, r.err
}

// gwService is a Service (port 80) and its EndpointSlice pointing at a backend.
const gwService = `
apiVersion: v1
kind: Service
metadata: {name: {{.Name}}, namespace: {{.Namespace}}}
spec:
  ports: [{name: http, port: 80, targetPort: {{.Port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {{.Name}}-1
  namespace: {{.Namespace}}
  labels: {kubernetes.io/service-name: {{.Name}}}
addressType: IPv4
ports: [{name: http, port: {{.Port}}, protocol: TCP}]
endpoints:
  - addresses: [{{.IP}}]
    conditions: {ready: true}
`

const gwBase = `
apiVersion: v1
kind: Namespace
metadata: {name: lbplane-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {team: apps}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: lbplane}
spec: {controllerName: lbplane.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: apps}
spec:
  gatewayClassName: lbplane
  listeners:
    - name: http
      port: 80
      protocol: HTTP
      allowedRoutes: {namespaces: {from: Same}}
`

// gwRoutes: the main route sends everything to web, with a header change; the newer one takes /exact (an
// exact path beats any prefix, whatever the age); /old redirects; /bad names a Service that is not there;
// /half is half web and half a missing Service; /rewrite goes to api with another Host and path, and its
// response headers changed; a route from another namespace is not allowed.
const gwRoutes = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: main, namespace: apps}
spec:
  parentRefs: [{name: gw}]
  rules:
    - filters:
        - type: RequestHeaderModifier
          requestHeaderModifier:
            set: [{name: X-Set, value: "set-by-gateway"}]
            add: [{name: X-Added, value: "added"}]
            remove: [X-Remove-Me]
      backendRefs: [{name: web, port: 80}]
    - matches: [{path: {type: PathPrefix, value: /old}}]
      filters:
        - type: RequestRedirect
          requestRedirect: {scheme: https, hostname: new.example.com, statusCode: 301, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}
    - matches: [{path: {type: PathPrefix, value: /bad}}]
      backendRefs: [{name: missing, port: 80}]
    - matches: [{path: {type: PathPrefix, value: /half}}]
      backendRefs: [{name: web, port: 80}, {name: missing, port: 80}]
    - matches: [{path: {type: PathPrefix, value: /post}, method: POST}]
      backendRefs: [{name: api, port: 80}]
    - matches: [{path: {type: PathPrefix, value: /q}, queryParams: [{name: v, value: "2"}]}]
      backendRefs: [{name: api, port: 80}]
    - matches: [{path: {type: PathPrefix, value: /rewrite}}]
      filters:
        - type: URLRewrite
          urlRewrite: {hostname: rewritten.example.com, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}
        - type: ResponseHeaderModifier
          responseHeaderModifier:
            set: [{name: X-Backend, value: "set-by-gateway"}]
            add: [{name: X-Added, value: "added"}]
            remove: [X-Backend-Extra]
      backendRefs: [{name: api, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: exact, namespace: apps}
spec:
  parentRefs: [{name: gw}]
  rules:
    - matches: [{path: {type: Exact, value: /exact}}]
      backendRefs: [{name: api, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: outsider, namespace: other}
spec:
  parentRefs: [{name: gw, namespace: apps}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /outsider}}]
      backendRefs: [{name: web, port: 80}]
`

// A Gateway and HTTPRoutes through a real API server and a real Envoy: traffic from the routes' backends,
// the specification's status, precedence, allowedRoutes, a redirect, a header change, a rewrite and a
// response header change, 500 for a backend that does not resolve, one Envoy cluster for 50 routes to one
// Service, and a BackendLoadBalancerPolicy on that Service: one health-check probe per interval and one
// ejection count for all its routes.
func TestGatewayAPIServesHTTPRoutes(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	cluster.InstallCRDs(t, "charts/lbplane/crds/gateway-api")
	ports := []string{strconv.Itoa(reservePort(t)), strconv.Itoa(reservePort(t))}
	l := startLbplane(t, "--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--gateway-api", "--gateway-api-address", "127.0.0.1",
		"--gateway-api-ports", strings.Join(ports, ","), "--namespace", "lbplane-system", "--gateway-api-envoy-selector", "app=envoy")
	envoy := startEnvoy(t, l, "envoy-gw", true)
	web, api := startGWBackend(t, "web"), startGWBackend(t, "api")
	kc := cluster.Kubeconfig
	kubeApply(t, kc, gwBase, nil)
	kubeApply(t, kc, gwService, map[string]any{"Name": "web", "Namespace": "apps", "Port": web.port, "IP": web.ip})
	kubeApply(t, kc, gwService, map[string]any{"Name": "api", "Namespace": "apps", "Port": api.port, "IP": api.ip})
	kubeApply(t, kc, gwRoutes, nil)

	// The Gateway's Service: port 80 to the Envoy port lbplane gave the listener.
	var url string
	eventually(t, 30*time.Second, "lbplane makes the Gateway's Service", func() error {
		out, err := kubectl(t, kc, "", "get", "svc", "-n", "lbplane-system", "-l", "gateway.lbplane.io/managed=true", "-o",
			`jsonpath={range .items[*]}{.metadata.annotations.gateway\.lbplane\.io/gateway} {.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.selector.app}{"\n"}{end}`)
		if err != nil {
			return fmt.Errorf("%v %s", err, out)
		}
		f := strings.Fields(out)
		if len(f) != 4 || f[0] != "apps/gw" || f[1] != "80" || (f[2] != ports[0] && f[2] != ports[1]) || f[3] != "envoy" {
			return fmt.Errorf("%q", out)
		}
		url = "http://127.0.0.1:" + f[2]
		return nil
	})
	waitServing(t, url+"/", "web")

	get := func(path string, method string, header map[string]string) (*http.Response, map[string][]string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if h := header["Host"]; h != "" {
			req.Host = h
		}
		c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var echoed map[string][]string
		json.NewDecoder(resp.Body).Decode(&echoed)
		return resp, echoed
	}

	t.Run("precedence", func(t *testing.T) {
		// kubectl creates the routes one by one, and "/" may be served before the newer route is translated: the
		// answers must settle on the specification's precedence, and stay there.
		eventually(t, 30*time.Second, "exact paths beat prefixes", func() error {
			for path, want := range map[string]string{"/exact": "api", "/exact/more": "web", "/exactly": "web", "/": "web"} {
				if resp, _ := get(path, "GET", nil); resp.StatusCode != 200 || resp.Header.Get("X-Backend") != want {
					return fmt.Errorf("%s: %d from %q, want 200 from %s", path, resp.StatusCode, resp.Header.Get("X-Backend"), want)
				}
			}
			return nil
		})
		if resp, _ := get("/post", "POST", nil); resp.Header.Get("X-Backend") != "api" {
			t.Errorf("POST /post: from %q, want api", resp.Header.Get("X-Backend"))
		}
		if resp, _ := get("/post", "GET", nil); resp.Header.Get("X-Backend") != "web" {
			t.Errorf("GET /post: from %q, want web (the method does not match)", resp.Header.Get("X-Backend"))
		}
		if resp, _ := get("/q?v=2", "GET", nil); resp.Header.Get("X-Backend") != "api" {
			t.Errorf("/q?v=2: from %q, want api", resp.Header.Get("X-Backend"))
		}
		if resp, _ := get("/q?v=3", "GET", nil); resp.Header.Get("X-Backend") != "web" {
			t.Errorf("/q?v=3: from %q, want web", resp.Header.Get("X-Backend"))
		}
	})

	t.Run("header modifier", func(t *testing.T) {
		resp, echoed := get("/", "GET", map[string]string{"X-Set": "client", "X-Added": "client", "X-Remove-Me": "x"})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := echoed["X-Set"]; len(got) != 1 || got[0] != "set-by-gateway" {
			t.Errorf("X-Set %q, want set-by-gateway", got)
		}
		if got := strings.Join(echoed["X-Added"], ","); got != "client,added" {
			t.Errorf("X-Added %q, want client,added", got)
		}
		if got := echoed["X-Remove-Me"]; len(got) != 0 {
			t.Errorf("X-Remove-Me %q, want it removed", got)
		}
	})

	t.Run("rewrite and response header modifier", func(t *testing.T) {
		resp, _ := get("/rewrite/page?x=1", "GET", nil)
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("X-Seen-Host") != "rewritten.example.com" || h.Get("X-Seen-Uri") != "/new/page?x=1" {
			t.Errorf("%d: the backend saw Host %q and %q, want rewritten.example.com and /new/page?x=1", resp.StatusCode, h.Get("X-Seen-Host"), h.Get("X-Seen-Uri"))
		}
		if got := h.Values("X-Backend"); len(got) != 1 || got[0] != "set-by-gateway" {
			t.Errorf("X-Backend %q, want set-by-gateway (the backend's api overwritten)", got)
		}
		if h.Get("X-Added") != "added" || h.Get("X-Backend-Extra") != "" {
			t.Errorf("X-Added %q, X-Backend-Extra %q; want added, and the backend's removed", h.Get("X-Added"), h.Get("X-Backend-Extra"))
		}
		if resp, _ := get("/rewrite", "GET", nil); resp.Header.Get("X-Seen-Uri") != "/new" {
			t.Errorf("/rewrite reached the backend as %q, want /new", resp.Header.Get("X-Seen-Uri"))
		}
	})

	t.Run("redirect", func(t *testing.T) {
		resp, _ := get("/old/page?x=1", "GET", nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != 301 || loc != "https://new.example.com/new/page?x=1" {
			t.Errorf("%d Location %q, want 301 https://new.example.com/new/page?x=1", resp.StatusCode, loc)
		}
	})

	t.Run("500 for backends that do not resolve", func(t *testing.T) {
		if resp, _ := get("/bad", "GET", nil); resp.StatusCode != 500 {
			t.Errorf("/bad: %d, want 500", resp.StatusCode)
		}
		counts := map[int]int{}
		for range 200 {
			resp, _ := get("/half", "GET", nil)
			counts[resp.StatusCode]++
		}
		// Half of 200 each way; 60 to 140 is far outside chance (p < 1e-8).
		if counts[200]+counts[500] != 200 || counts[500] < 60 || counts[500] > 140 {
			t.Errorf("/half answers %v, want about half 500", counts)
		}
	})

	t.Run("allowedRoutes", func(t *testing.T) {
		if resp, _ := get("/outsider", "GET", nil); resp.Header.Get("X-Backend") != "web" {
			t.Errorf("/outsider: from %q", resp.Header.Get("X-Backend"))
		}
		eventually(t, 20*time.Second, "the route from another namespace is not accepted", func() error {
			out, _ := kubectl(t, kc, "", "get", "httproute", "-n", "other", "outsider", "-o",
				`jsonpath={.status.parents[0].controllerName} {.status.parents[0].conditions[?(@.type=="Accepted")].status} {.status.parents[0].conditions[?(@.type=="Accepted")].reason}`)
			if out != "lbplane.io/gateway-controller False NotAllowedByListeners" {
				return fmt.Errorf("%q", out)
			}
			return nil
		})
	})

	t.Run("status", func(t *testing.T) {
		eventually(t, 30*time.Second, "GatewayClass, Gateway and HTTPRoute status as the specification says", func() error {
			out, _ := kubectl(t, kc, "", "get", "gatewayclass", "lbplane", "-o",
				`jsonpath={.status.conditions[?(@.type=="Accepted")].status} {.status.conditions[?(@.type=="SupportedVersion")].status} {.status.conditions[0].observedGeneration}={.metadata.generation}`)
			if f := strings.Fields(out); len(f) != 3 || f[0] != "True" || f[1] != "True" || !sameSides(f[2]) {
				return fmt.Errorf("GatewayClass: %q", out)
			}
			out, _ = kubectl(t, kc, "", "get", "gateway", "-n", "apps", "gw", "-o",
				`jsonpath={.status.conditions[?(@.type=="Accepted")].status} {.status.conditions[?(@.type=="Programmed")].status} `+
					`{.status.conditions[?(@.type=="Programmed")].observedGeneration}={.metadata.generation} {.status.addresses[0].type} `+
					`{.status.listeners[0].attachedRoutes} {.status.listeners[0].supportedKinds[0].kind} `+
					`{.status.listeners[0].conditions[?(@.type=="Accepted")].status} {.status.listeners[0].conditions[?(@.type=="Programmed")].status} `+
					`{.status.listeners[0].conditions[?(@.type=="ResolvedRefs")].status} {.status.listeners[0].conditions[?(@.type=="Conflicted")].status}`)
			// attachedRoutes: main and exact; the outsider is not allowed.
			if f := strings.Fields(out); len(f) != 10 || f[0] != "True" || f[1] != "True" || !sameSides(f[2]) || f[3] != "IPAddress" || f[4] != "2" ||
				f[5] != "HTTPRoute" || f[6] != "True" || f[7] != "True" || f[8] != "True" || f[9] != "False" {
				return fmt.Errorf("Gateway: %q", out)
			}
			out, _ = kubectl(t, kc, "", "get", "httproute", "-n", "apps", "main", "-o",
				`jsonpath={.status.parents[0].controllerName} {.status.parents[0].parentRef.name} {.status.parents[0].conditions[?(@.type=="Accepted")].status} `+
					`{.status.parents[0].conditions[?(@.type=="ResolvedRefs")].status} {.status.parents[0].conditions[?(@.type=="ResolvedRefs")].reason} `+
					`{.status.parents[0].conditions[0].observedGeneration}={.metadata.generation}`)
			if f := strings.Fields(out); len(f) != 6 || f[0] != "lbplane.io/gateway-controller" || f[1] != "gw" || f[2] != "True" || f[3] != "False" ||
				f[4] != "BackendNotFound" || !sameSides(f[5]) {
				return fmt.Errorf("HTTPRoute main: %q", out)
			}
			return nil
		})
	})

	t.Run("lbctl trace, whatif and status of the Gateway", func(t *testing.T) {
		// lbctl asks lbplane what it would do with a request to the Gateway, by its name and the request's
		// URL, and names the HTTPRoute rule and the endpoint; Envoy's answer to the same request says which
		// backend served it.
		addrOf := map[string]string{"web": net.JoinHostPort(web.ip, strconv.Itoa(web.port)), "api": net.JoinHostPort(api.ip, strconv.Itoa(api.port))}
		for _, tc := range []struct {
			path, route string
			rule        int
		}{
			{"/exact", "apps/exact", 0},
			{"/exact/more", "apps/main", 0},
			{"/", "apps/main", 0},
			{"/q?v=2", "apps/main", 5},
			{"/q?v=3", "apps/main", 0},
		} {
			out := lbctlOK(t, l, "trace", "gateway/gw", "-n", "apps", "http://shop.example.com"+tc.path, "-o", "json")
			var tr struct {
				Gateway struct {
					Gateway   string   `json:"gateway"`
					Port      int      `json:"port"`
					Listeners []string `json:"listeners"`
					Rule      struct {
						Route string `json:"route"`
						Rule  int    `json:"rule"`
					} `json:"rule"`
				} `json:"gateway"`
				Backends []struct {
					Candidates []struct {
						Address string `json:"address"`
					} `json:"candidates"`
				} `json:"backends"`
			}
			if err := json.Unmarshal([]byte(out), &tr); err != nil {
				t.Fatalf("%s: %v\n%s", tc.path, err, out)
			}
			g := tr.Gateway
			if g.Gateway != "apps/gw" || g.Port != 80 || strings.Join(g.Listeners, ",") != "http" || g.Rule.Route != tc.route || g.Rule.Rule != tc.rule {
				t.Errorf("%s: Gateway %+v, want HTTPRoute %s rule %d", tc.path, g, tc.route, tc.rule)
			}
			if len(tr.Backends) != 1 || len(tr.Backends[0].Candidates) != 1 {
				t.Fatalf("%s: backends %+v, want one endpoint", tc.path, tr.Backends)
			}
			predicted := tr.Backends[0].Candidates[0].Address
			resp, _ := get(tc.path, "GET", nil)
			if served := addrOf[resp.Header.Get("X-Backend")]; resp.StatusCode != 200 || served != predicted {
				t.Errorf("%s: lbctl trace predicts %s; Envoy answered %d from %q (%s)", tc.path, predicted, resp.StatusCode, resp.Header.Get("X-Backend"), served)
			}
		}
		// A redirect is the rule's answer, Envoy's own.
		out := lbctlOK(t, l, "trace", "gateway/gw", "-n", "apps", "http://shop.example.com/old/page")
		if !strings.Contains(out, "made of HTTPRoute apps/main spec.rules[1].matches[0]") || !strings.Contains(out, "redirect") {
			t.Errorf("trace of /old/page:\n%s", out)
		}
		if resp, _ := get("/old/page", "GET", nil); resp.StatusCode != 301 {
			t.Errorf("/old/page: %d, want 301", resp.StatusCode)
		}
		// What cannot be resolved says which part of the request and why.
		for args, want := range map[string]string{
			"gateway/gw http://shop.example.com:8080/": "error: port 8080: gateway apps/gw has no listener on port 8080 that lbplane serves (its ports: 80)",
			"gateway/nope http://shop.example.com/":    "error: gateway apps/nope: lbplane serves no listener of it",
		} {
			if code, out := lbctlExit(t, l, append([]string{"trace", "-n", "apps"}, strings.Fields(args)...)...); code != 1 || !strings.Contains(out, want) {
				t.Errorf("trace %s: exit %d, %q; want %q", args, code, out, want)
			}
		}
		out = lbctlOK(t, l, "whatif", "gateway/gw", "-n", "apps", "--down", "endpoint="+addrOf["web"])
		if !strings.Contains(out, "Gateway apps/gw, listener http (port 80), host name *") || !strings.Contains(out, "apps/main spec.rules[0].matches[0]") ||
			!strings.Contains(out, "down: what-if") {
			t.Errorf("whatif:\n%s", out)
		}
		out = lbctlOK(t, l, "status", "gateway/gw", "-n", "apps")
		if !strings.Contains(out, "  Gateway       apps/gw, listener http (port 80), host name *\n") {
			t.Errorf("status:\n%s", out)
		}
	})

	t.Run("other controllers' parents are kept", func(t *testing.T) {
		patch := `{"status":{"parents":[{"controllerName":"example.com/other","parentRef":{"name":"elsewhere"},"conditions":[` +
			`{"type":"Accepted","status":"True","reason":"Accepted","message":"theirs","lastTransitionTime":"2026-11-01T00:00:00Z","observedGeneration":1}]}]}}`
		if out, err := kubectl(t, kc, "", "patch", "httproute", "-n", "apps", "exact", "--subresource=status", "--type=merge", "-p", patch); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		eventually(t, 20*time.Second, "both controllers' entries are in status.parents", func() error {
			out, _ := kubectl(t, kc, "", "get", "httproute", "-n", "apps", "exact", "-o", `jsonpath={range .status.parents[*]}{.controllerName} {end}`)
			if f := strings.Fields(out); len(f) != 2 || !slices.Contains(f, "example.com/other") || !slices.Contains(f, "lbplane.io/gateway-controller") {
				return fmt.Errorf("%q", out)
			}
			return nil
		})
	})

	t.Run("a route that leaves lbplane's Gateways loses lbplane's status entries", func(t *testing.T) {
		// The outsider (namespace other) has lbplane's entry from the allowedRoutes subtest; it now names a
		// Gateway that does not exist.
		eventually(t, 20*time.Second, "the outsider has lbplane's entry", func() error {
			out, _ := kubectl(t, kc, "", "get", "httproute", "-n", "other", "outsider", "-o", `jsonpath={.status.parents[*].controllerName}`)
			if out != "lbplane.io/gateway-controller" {
				return fmt.Errorf("%q", out)
			}
			return nil
		})
		if out, err := kubectl(t, kc, "", "patch", "httproute", "-n", "other", "outsider", "--type=merge", "-p",
			`{"spec":{"parentRefs":[{"name":"nowhere","namespace":"apps"}]}}`); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		eventually(t, 20*time.Second, "lbplane's entry leaves status.parents", func() error {
			out, err := kubectl(t, kc, "", "get", "httproute", "-n", "other", "outsider", "-o", `jsonpath={.status.parents[*].controllerName}|{.metadata.generation}`)
			if err != nil || out != "|2" {
				return fmt.Errorf("%q %v", out, err)
			}
			return nil
		})
	})

	t.Run("50 routes to one Service, one cluster", func(t *testing.T) {
		// 50 routes of the listener's every name, and two more of host names of their own: lbplane makes a
		// policy per host name, and they all share the Service port's one cluster.
		var b strings.Builder
		for i := range 50 {
			fmt.Fprintf(&b, "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: many-%d, namespace: apps}\n"+
				"spec:\n  parentRefs: [{name: gw}]\n  rules:\n    - matches: [{path: {type: PathPrefix, value: /many/%d}}]\n      backendRefs: [{name: api, port: 80}]\n", i, i)
		}
		for _, h := range []string{"a", "b"} {
			fmt.Fprintf(&b, "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: many-host-%s, namespace: apps}\n"+
				"spec:\n  parentRefs: [{name: gw}]\n  hostnames: [%s.many.test]\n  rules:\n    - matches: [{path: {type: PathPrefix, value: /many-host}}]\n      backendRefs: [{name: api, port: 80}]\n", h, h)
		}
		if out, err := kubectl(t, kc, b.String(), "apply", "-f", "-"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		eventually(t, 30*time.Second, "all 50 routes serve", func() error {
			for _, i := range []int{0, 25, 49} {
				if resp, _ := get(fmt.Sprintf("/many/%d", i), "GET", nil); resp.Header.Get("X-Backend") != "api" {
					return fmt.Errorf("/many/%d from %q", i, resp.Header.Get("X-Backend"))
				}
			}
			for _, h := range []string{"a.many.test", "b.many.test"} {
				if resp, _ := get("/many-host", "GET", map[string]string{"Host": h}); resp.Header.Get("X-Backend") != "api" {
					return fmt.Errorf("%s from %q", h, resp.Header.Get("X-Backend"))
				}
			}
			return nil
		})
		var clusters []string
		for _, c := range dynamicClusterNames(t, envoy) {
			if strings.HasPrefix(c, "service/apps/api/") {
				clusters = append(clusters, c)
			}
		}
		if len(clusters) != 1 {
			t.Fatalf("Envoy has %d clusters for Service apps/api: %v, want 1 (shared by three host names' policies)", len(clusters), clusters)
		}
	})

	t.Run("a BackendLoadBalancerPolicy on a Service", func(t *testing.T) {
		// One names the Service's port, one the whole Service: the port's applies, the other is Conflicted.
		policies := `apiVersion: lbplane.io/v1alpha1
kind: BackendLoadBalancerPolicy
metadata: {name: api, namespace: apps}
spec:
  targetRefs: [{group: "", kind: Service, name: api, sectionName: http}]
  backend:
    loadBalancing: {algorithm: LeastRequest}
    healthCheck:
      active: {type: HTTP, interval: 2s, http: {path: /}}
      passive: {consecutive5xx: 3, maxEjectionPercent: 100}
---
apiVersion: lbplane.io/v1alpha1
kind: BackendLoadBalancerPolicy
metadata: {name: api-whole, namespace: apps}
spec:
  targetRefs: [{group: "", kind: Service, name: api}]
  backend: {loadBalancing: {algorithm: Random}}
`
		if out, err := kubectl(t, kc, policies, "apply", "-f", "-"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		eventually(t, 30*time.Second, "Envoy's one cluster of apps/api balances least-request and checks health", func() error {
			var found []string
			for _, cl := range dynamicClusters(t, envoy, "service/apps/api/") {
				hcs, _ := cl["health_checks"].([]any)
				policy, _ := json.Marshal(cl["load_balancing_policy"])
				found = append(found, fmt.Sprintf("%t %d", strings.Contains(string(policy), "envoy.load_balancing_policies.least_request"), len(hcs)))
			}
			if len(found) == 0 || slices.ContainsFunc(found, func(f string) bool { return f != "true 1" }) {
				return fmt.Errorf("clusters of apps/api (least request, health checks): %v", found)
			}
			return nil
		})
		if resp, _ := get("/exact", "GET", nil); resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "api" {
			t.Errorf("/exact: %d from %q, want 200 from api", resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		eventually(t, 30*time.Second, "each policy's status has the Gateway as its ancestor", func() error {
			jp := `jsonpath={.status.ancestors[0].ancestorRef.namespace}/{.status.ancestors[0].ancestorRef.name} {.status.ancestors[0].controllerName} ` +
				`{.status.ancestors[0].conditions[?(@.type=="Accepted")].status} {.status.ancestors[0].conditions[?(@.type=="Accepted")].reason} ` +
				`{.status.ancestors[0].conditions[0].observedGeneration}={.metadata.generation}`
			for name, want := range map[string]string{"api": "True Accepted", "api-whole": "False Conflicted"} {
				out, _ := kubectl(t, kc, "", "get", "backendloadbalancerpolicy", "-n", "apps", name, "-o", jp)
				if f := strings.Fields(out); len(f) != 5 || f[0] != "apps/gw" || f[1] != "lbplane.io/gateway-controller" || f[2]+" "+f[3] != want || !sameSides(f[4]) {
					return fmt.Errorf("%s: %q, want apps/gw %s", name, out, want)
				}
			}
			return nil
		})
		// The applied policy's status has what the Envoy reports of the Service port, through the one cluster
		// every route shares; the conflicted one applies nowhere and has none.
		eventually(t, 30*time.Second, "the applied policy's status.backends has the Envoy's view of api:80", func() error {
			jp := `jsonpath={.status.backends[*].name} {.status.backends[0].proxies} {.status.backends[0].endpoints.healthy}/{.status.backends[0].endpoints.total} {.status.backends[0].perEndpoint[0].address}`
			out, _ := kubectl(t, kc, "", "get", "blbp", "-n", "apps", "api", "-o", jp)
			if out != fmt.Sprintf("api:80 1 1/1 %s:%d", api.ip, api.port) {
				return fmt.Errorf("%q, want api:80 reported by 1 Envoy, 1/1 healthy, endpoint %s:%d", out, api.ip, api.port)
			}
			if out, _ := kubectl(t, kc, "", "get", "blbp", "-n", "apps", "api-whole", "-o", `jsonpath={.status.backends}`); out != "" {
				return fmt.Errorf("the conflicted policy's status.backends: %q, want none", out)
			}
			return nil
		})

		// The 52 routes that send to apps/api (50 of them /many/N) share one cluster, so one set of health
		// checks: one probe per 2 s interval from the one Envoy, not one per route. Envoy may fire a probe
		// late on a busy machine, never early.
		const window, interval = 10 * time.Second, 2 * time.Second
		before := api.probes.Load()
		time.Sleep(window) // a rate is counted over a window
		if n := api.probes.Load() - before; n < 2 || n > int64(window/interval)+1 {
			t.Errorf("%d health-check probes of apps/api in %s at a %s interval, want at most %d (one set for every route)", n, window, interval, window/interval+1)
		}

		// Passive checks count the errors of every route together: 3 consecutive 5xx through 3 different
		// routes eject the endpoint, as 3 through one route would.
		ejections := func() int {
			n := 0
			for _, line := range strings.Split(envoyStats(t, envoy, "outlier_detection.ejections_enforced_consecutive_5xx"), "\n") {
				if name, v, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(name, "cluster.service/apps/api/") {
					c, _ := strconv.Atoi(v)
					n += c
				}
			}
			return n
		}
		e0 := ejections()
		for i, path := range []string{"/many/1?fail=1", "/many/2?fail=1", "/many/3?fail=1"} {
			if resp, _ := get(path, "GET", nil); resp.StatusCode != 500 || resp.Header.Get("X-Backend") != "api" {
				t.Fatalf("%s: %d from %q, want 500 from api", path, resp.StatusCode, resp.Header.Get("X-Backend"))
			}
			if i == 1 && ejections() != e0 {
				t.Fatalf("ejected after 2 errors, want 3")
			}
		}
		eventually(t, 10*time.Second, "the third error, on a third route, ejects the endpoint", func() error {
			if n := ejections(); n != e0+1 {
				return fmt.Errorf("%d consecutive-5xx ejections of apps/api, want %d", n, e0+1)
			}
			return nil
		})
	})

	t.Run("a BackendLoadBalancerPolicy on an HTTPRoute", func(t *testing.T) {
		// The route "exact" hashes on a header; every other route to apps/api keeps the Service's policy and its
		// one shared cluster.
		policy := `apiVersion: lbplane.io/v1alpha1
kind: BackendLoadBalancerPolicy
metadata: {name: exact-route, namespace: apps}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: exact}]
  backend: {loadBalancing: {algorithm: RingHash, hashKeys: [{header: {name: x-user}}]}}
`
		if out, err := kubectl(t, kc, policy, "apply", "-f", "-"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		algorithms := func() map[string]string {
			out := map[string]string{}
			for name, cl := range dynamicClusters(t, envoy, "service/apps/api/") {
				policy, _ := json.Marshal(cl["load_balancing_policy"])
				switch {
				case strings.Contains(string(policy), "envoy.load_balancing_policies.ring_hash"):
					out[name] = "ring hash"
				case strings.Contains(string(policy), "envoy.load_balancing_policies.least_request"):
					out[name] = "least request"
				default:
					out[name] = string(policy)
				}
			}
			return out
		}
		var ring string
		eventually(t, 30*time.Second, "Envoy has the route's ring-hash cluster of apps/api beside the Service's least-request one", func() error {
			got := algorithms()
			ring = ""
			kinds := []string{}
			for name, a := range got {
				kinds = append(kinds, a)
				if a == "ring hash" {
					ring = name
				}
			}
			slices.Sort(kinds)
			if len(got) != 2 || strings.Join(kinds, ",") != "least request,ring hash" {
				return fmt.Errorf("clusters of apps/api: %v", got)
			}
			return nil
		})
		requests := func() map[string]int {
			out := map[string]int{}
			for _, line := range strings.Split(envoyStats(t, envoy, "upstream_rq_total"), "\n") {
				if name, v, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(name, "cluster.service/apps/api/") {
					n, _ := strconv.Atoi(v)
					out[strings.TrimSuffix(strings.TrimPrefix(name, "cluster."), ".upstream_rq_total")] = n
				}
			}
			return out
		}
		before := requests()
		for range 5 {
			if resp, _ := get("/exact", "GET", map[string]string{"X-User": "u1"}); resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "api" {
				t.Fatalf("/exact: %d from %q, want 200 from api", resp.StatusCode, resp.Header.Get("X-Backend"))
			}
		}
		if resp, _ := get("/many/7", "GET", nil); resp.StatusCode != 200 {
			t.Fatalf("/many/7: %d", resp.StatusCode)
		}
		eventually(t, 10*time.Second, "/exact's requests counted on the ring-hash cluster, /many/7's on the other", func() error {
			after := requests()
			for name := range after {
				want := 1
				if name == ring {
					want = 5
				}
				if d := after[name] - before[name]; d != want {
					return fmt.Errorf("cluster %s: %d more requests, want %d (%v -> %v)", name, d, want, before, after)
				}
			}
			return nil
		})
		eventually(t, 30*time.Second, "the route's policy is Accepted on the Gateway", func() error {
			out, _ := kubectl(t, kc, "", "get", "blbp", "-n", "apps", "exact-route", "-o",
				`jsonpath={.status.ancestors[0].ancestorRef.name} {.status.ancestors[0].conditions[?(@.type=="Accepted")].reason} {.status.backends[*].name}`)
			if out != "gw Accepted api:80" {
				return fmt.Errorf("%q, want gw Accepted api:80", out)
			}
			return nil
		})

		// Session persistence is a route's: the policy gives the route a session cookie, and no other route.
		if out, err := kubectl(t, kc, "", "patch", "blbp", "-n", "apps", "exact-route", "--type=merge", "-p",
			`{"spec":{"sessionPersistence":{"name":"exact-session"}}}`); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		eventually(t, 30*time.Second, "/exact sets the policy's session cookie", func() error {
			resp, _ := get("/exact", "GET", nil)
			if c := resp.Header.Get("Set-Cookie"); resp.StatusCode != 200 || !strings.HasPrefix(c, "exact-session=") {
				return fmt.Errorf("%d, Set-Cookie %q", resp.StatusCode, c)
			}
			return nil
		})
		if resp, _ := get("/many/7", "GET", nil); resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("/many/7 sets a cookie: %q", resp.Header.Get("Set-Cookie"))
		}
	})
}

// sameSides tells whether "a=b" has a == b (an observedGeneration and the generation).
func sameSides(s string) bool {
	a, b, ok := strings.Cut(s, "=")
	return ok && a != "" && a == b
}

// dynamicClusters returns the clusters Envoy got over xDS whose names start with prefix, by name, as its config
// dump shows them.
func dynamicClusters(t *testing.T, e *Envoy, prefix string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, sec := range configDumpOf(t, e) {
		list, _ := sec["dynamic_active_clusters"].([]any)
		for _, c := range list {
			m, _ := c.(map[string]any)
			cl, _ := m["cluster"].(map[string]any)
			if name, _ := cl["name"].(string); strings.HasPrefix(name, prefix) {
				out[name] = cl
			}
		}
	}
	return out
}

// dynamicClusterNames lists the names of the clusters Envoy got over xDS.
func dynamicClusterNames(t *testing.T, e *Envoy) []string {
	t.Helper()
	var out []string
	for _, sec := range configDumpOf(t, e) {
		for _, key := range []string{"dynamic_active_clusters", "dynamic_warming_clusters"} {
			list, _ := sec[key].([]any)
			for _, c := range list {
				m, _ := c.(map[string]any)
				cl, _ := m["cluster"].(map[string]any)
				if name, _ := cl["name"].(string); name != "" {
					out = append(out, name)
				}
			}
		}
	}
	return out
}
