package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/internal/kubetest"
	lbctlcmd "github.com/lbplane/lbplane/internal/lbctl"
)

const lbctlKubePolicies = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: web, namespace: default}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: 9001}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: cart, namespace: shop}
spec:
  listener: {address: 127.0.0.1, port: {{.Port2}}, protocol: HTTP}
  backends:
    - name: carts
      loadBalancing: {algorithm: LeastRequest}
      endpoints: [{address: 127.0.0.1, port: 9002}]
`

// lbctlKubeGateways: a Gateway of lbplane's class with an HTTPRoute to a Service, and a Gateway of another
// class.
const lbctlKubeGateways = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: shop}
spec:
  gatewayClassName: lbplane
  listeners: [{name: http, port: 80, protocol: HTTP, hostname: shop.example.com}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: theirs, namespace: shop}
spec:
  gatewayClassName: someone-else
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: web}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /api}}]
      backendRefs: [{name: api, port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec:
  ports: [{name: http, port: 8080, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: api2, namespace: shop}
spec:
  ports: [{name: http, port: 8080, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: api-1, namespace: shop, labels: {kubernetes.io/service-name: api}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [198.51.100.11]}, {addresses: [198.51.100.12]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: api2-1, namespace: shop, labels: {kubernetes.io/service-name: api2}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [198.51.100.21]}]
`

// lbctlKubeRouteNext is the HTTPRoute of lbctlKubeGateways with a quarter of its traffic sent to api2.
const lbctlKubeRouteNext = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: web}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /api}}]
      backendRefs: [{name: api, port: 8080, weight: 3}, {name: api2, port: 8080, weight: 1}]
`

// lbctlKubeChecked is a Service of two endpoints in a network namespace the test makes, one serving and one
// on a port nothing listens on, health-checked by a BackendLoadBalancerPolicy, and a route to it on the
// Gateway web; lbctlKubeCheckedNext sends half of that route's traffic to api.
const lbctlKubeChecked = `
apiVersion: v1
kind: Service
metadata: {name: checked, namespace: shop}
spec:
  ports: [{name: http, port: 8080, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: checked-live, namespace: shop, labels: {kubernetes.io/service-name: checked}}
addressType: IPv4
ports: [{name: http, port: {{.LivePort}}}]
endpoints: [{addresses: [{{.IP}}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: checked-dead, namespace: shop, labels: {kubernetes.io/service-name: checked}}
addressType: IPv4
ports: [{name: http, port: {{.DeadPort}}}]
endpoints: [{addresses: [{{.IP}}]}]
---
apiVersion: lbplane.io/v1alpha1
kind: BackendLoadBalancerPolicy
metadata: {name: checked, namespace: shop}
spec:
  targetRefs: [{group: "", kind: Service, name: checked}]
  backend:
    healthCheck:
      active: {type: TCP, interval: 1s, unhealthyThreshold: 1}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: checked, namespace: shop}
spec:
  parentRefs: [{name: web}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /checked}}]
      backendRefs: [{name: checked, port: 8080}]
`

const lbctlKubeCheckedNext = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: checked, namespace: shop}
spec:
  parentRefs: [{name: web}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /checked}}]
      backendRefs: [{name: checked, port: 8080}, {name: api, port: 8080}]
`

// lbctl in Kubernetes mode against the real API server, with lbplane installed from the chart: the chart's
// objects are applied as helm template renders them, lbplane runs with the chart's arguments (HTTPS push
// API with its own CA, kept in the CA Secret it creates), and its pod exists, running and ready, beside one
// that is not ready. Proven against the API server: reading policies and their status from the CRs,
// finding lbplane by the chart's labels and its ready pod, resolving the api port, reading the token and
// the CA from the chart's Secrets. There is no kubelet, so the port-forward itself is replaced: the test's
// PortForward records which pod and port lbctl asked for and returns lbplane's API address in this
// network namespace; everything after it (TLS verified against the Secret's CA under the Service's name,
// the token, the dashboard served on loopback through it) is real.
func TestLbctlKubernetesMode(t *testing.T) {
	c := kubetest.Start(t)
	for _, ns := range []string{"lbplane", "shop"} {
		if out, err := kubectl(t, c.Kubeconfig, "", "create", "namespace", ns); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	c.InstallCRDs(t, "charts/lbplane/crds/gateway-api")
	rendered, err := helm(t, "template", "demo", chartDir, "-n", "lbplane", "--kube-version", "1.37.1", "--set", "apiToken="+token, "--set", "gatewayAPI.enabled=true")
	if err != nil {
		t.Fatalf("%v\n%s", err, rendered)
	}
	if out, err := kubectl(t, c.Kubeconfig, rendered, "apply", "-n", "lbplane", "-f", "-"); err != nil {
		t.Fatalf("applying the chart's objects: %v\n%s", err, out)
	}
	// The policies name endpoint addresses: the chart's backendAddresses.namespaces allows them there.
	chartArgs, _ := renderedChart(t, "--set", "apiToken="+token, "--set", "backendAddresses.namespaces={default,shop}", "--set", "gatewayAPI.enabled=true")
	l := startLbplane(t, chartLbplaneArgs(t, chartArgs, c.Kubeconfig)...)
	eventually(t, 30*time.Second, "lbplane has made its CA Secret", func() error {
		_, err := getSecret(t, c, "demo-lbplane-ca")
		return err
	})
	ready := lbplanePod(t, c, "demo-lbplane-7c9f8-ready", true)
	lbplanePod(t, c, "demo-lbplane-7c9f8-a-not-ready", false) // first by name: must not be picked

	port, port2 := reservePort(t), reservePort(t)
	kubeApply(t, c.Kubeconfig, lbctlKubePolicies, map[string]any{"Port": port, "Port2": port2})

	var mu sync.Mutex
	var forwards []string
	opts := lbctlcmd.Options{PortForward: func(_ context.Context, cfg *rest.Config, ns, pod string, p int) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		forwards = append(forwards, fmt.Sprintf("%s %s/%s:%d", cfg.Host, ns, pod, p))
		return l.ports.API, nil
	}}
	// No token but the cluster's.
	t.Setenv("LBPLANE_TOKEN", "")
	t.Setenv("LBPLANE_TOKEN_FILE", "")
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb strings.Builder
		code := lbctlcmd.MainWith(opts, append([]string{"--kubeconfig", c.Kubeconfig}, args...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}

	// Policies and status come from the CRs, which lbplane writes.
	eventually(t, 30*time.Second, "lbctl get -A shows both policies Accepted", func() error {
		code, out, errs := run("get", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}={.status.conditions[?(@.type=="Accepted")].status} {end}`)
		if code != 0 || out != "default/web=True shop/cart=True " {
			return fmt.Errorf("exit %d: %q %s", code, out, errs)
		}
		return nil
	})
	// kubectl's Algorithm column is the algorithm in effect: web names none and is served with the default,
	// which lbplane publishes in status (status.algorithm), as lbctl get shows it.
	eventually(t, 30*time.Second, "kubectl get lbp shows each policy's algorithm, the default included", func() error {
		out, err := kubectl(t, c.Kubeconfig, "", "get", "lbp", "-A")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if got := tableColumn(out, "ALGORITHM"); got["web"] != "RoundRobin" || got["cart"] != "LeastRequest" {
			return fmt.Errorf("algorithms %v, want web RoundRobin and cart LeastRequest:\n%s", got, out)
		}
		return nil
	})
	if code, out, errs := run("get", "-A"); code != 0 || tableColumn(out, "ALGORITHM")["web"] != "RoundRobin" {
		t.Errorf("lbctl get -A does not show web's default algorithm: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("get"); code != 0 || !strings.Contains(out, "web") || strings.Contains(out, "cart") {
		t.Errorf("get in the context's namespace (default): exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("get", "-n", "shop", "-o", "wide"); code != 0 || !strings.Contains(out, "LeastRequest") || strings.Contains(out, "web") {
		t.Errorf("get -n shop -o wide: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("status", "cart", "-n", "shop"); code != 0 || !strings.Contains(out, "Policy shop/cart") || !strings.Contains(out, "Accepted      True") {
		t.Errorf("status cart: exit %d\n%s%s", code, out, errs)
	}
	mu.Lock()
	if len(forwards) != 0 {
		t.Errorf("reading CRs opened a port-forward: %v", forwards)
	}
	mu.Unlock()

	// The push API through the port-forward: the Envoys, the server's version, explain.
	if code, out, errs := run("status"); code != 0 || out != "" || !strings.Contains(errs, "No Envoy connected.") {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("version", "-o", "json"); code != 0 || !strings.Contains(out, `"serverVersion"`) {
		t.Errorf("version: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("explain", "cart", "-n", "shop"); code != 0 || !strings.Contains(out, "Policy shop/cart, proxy group default (served)") {
		t.Errorf("explain: exit %d\n%s%s", code, out, errs)
	}
	// Predictions are answered by lbplane through the same port-forward, about the one policy asked.
	if code, out, errs := run("trace", "cart", "-n", "shop"); code != 0 || !strings.Contains(out, "Backend carts") ||
		!strings.Contains(out, "(not predicted: least request: under concurrent requests") {
		t.Errorf("trace: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("whatif", "cart", "-n", "shop", "--down", "endpoint=127.0.0.1:9002"); code != 0 || !strings.Contains(out, "Policy shop/cart") ||
		!strings.Contains(out, "down: what-if: endpoint down") {
		t.Errorf("whatif: exit %d\n%s%s", code, out, errs)
	}
	mu.Lock()
	want := fmt.Sprintf("%s lbplane/%s:18001", c.Config.Host, ready)
	if len(forwards) == 0 || forwards[0] != want {
		t.Errorf("port-forwards %v, want to %s", forwards, want)
	}
	for _, f := range forwards {
		if f != want {
			t.Errorf("port-forward to %s, want %s", f, want)
		}
	}
	mu.Unlock()

	// diff: the cluster's policies are what runs.
	next := filepath.Join(t.TempDir(), "cart.yaml")
	os.WriteFile(next, []byte(strings.ReplaceAll(string(policy(t, lbctlKubePolicies, map[string]any{"Port": port, "Port2": port2})), "LeastRequest", "Random")), 0o600)
	if code, out, errs := run("diff", "-f", next); code != 1 || !strings.Contains(out, "~ Cluster shop/cart/carts") || strings.Contains(out, "default/web") {
		t.Errorf("diff: exit %d\n%s%s", code, out, errs)
	}
	// diff --traffic asks lbplane, which previews the file's policies against the cluster's: each one
	// endpoint keeps everything, and least request's caveat is gone with cart's change.
	if code, out, errs := run("diff", "--traffic", "-f", next); code != 0 || !strings.Contains(out, "Policy shop/cart: predicted share") ||
		!strings.Contains(out, "Policy default/web: predicted share") || strings.Contains(out, "least request") {
		t.Errorf("diff --traffic: exit %d\n%s%s", code, out, errs)
	}

	// A Gateway's policies are lbplane's, not the cluster's: trace, status and get of gateway/NAME ask lbplane
	// through the port-forward, get of such a policy's name too, and what lbplane serves nothing of is
	// explained from the Gateway's object in the cluster.
	kubeApply(t, c.Kubeconfig, lbctlKubeGateways, nil)
	eventually(t, 30*time.Second, "lbctl trace gateway/web names the HTTPRoute rule", func() error {
		code, out, errs := run("trace", "gateway/web", "-n", "shop", "http://shop.example.com/api/cart")
		if code != 0 || !strings.Contains(out, "Gateway shop/web, listener http (port 80), host name shop.example.com: policy shop/gateway.web.80.") ||
			!strings.Contains(out, "made of HTTPRoute shop/web spec.rules[0].matches[0]") || !strings.Contains(out, "Backend api-8080-") {
			return fmt.Errorf("exit %d: %s%s", code, out, errs)
		}
		return nil
	})
	code, out, errs := run("status", "gateway/web", "-n", "shop")
	if code != 0 || !strings.Contains(out, "  Gateway       shop/web, listener http (port 80), host name shop.example.com\n") {
		t.Errorf("status gateway/web: exit %d\n%s%s", code, out, errs)
	}
	gwPolicy := strings.TrimPrefix(strings.Fields(strings.TrimSpace(out))[1], "shop/")
	if code, out, errs := run("get", gwPolicy, "-n", "shop", "-o", "wide"); code != 0 || !strings.Contains(out, "shop/web") {
		t.Errorf("get %s (a Gateway's policy, not a CR): exit %d\n%s%s", gwPolicy, code, out, errs)
	}
	// The list of a namespace with a Gateway: the cluster's policies and, asked of lbplane, the Gateway's.
	if code, out, errs := run("get", "-n", "shop"); code != 0 || !strings.Contains(out, "\ncart ") || !strings.Contains(out, "\n"+gwPolicy+" ") {
		t.Errorf("get -n shop: exit %d, want cart and %s listed\n%s%s", code, gwPolicy, out, errs)
	}
	for args, want := range map[string]string{
		"gateway/nope http://shop.example.com/":   "error: gateway shop/nope: lbplane serves no listener of it: the cluster has no Gateway shop/nope",
		"gateway/theirs http://shop.example.com/": "error: gateway shop/theirs: lbplane serves no listener of it: lbplane wrote no status on it: is its GatewayClass someone-else one with controllerName lbplane.io/gateway-controller?",
		"gateway/web http://other.example.com/":   `error: host "other.example.com": gateway shop/web does not serve it on port 80 (its host names there: shop.example.com): Envoy answers 404`,
	} {
		if code, _, errs := run(append([]string{"trace", "-n", "shop"}, strings.Fields(args)...)...); code != 1 || !strings.Contains(errs, want) {
			t.Errorf("trace %s: exit %d, %q; want %q", args, code, errs, want)
		}
	}

	// diff --traffic of a changed HTTPRoute: what runs is read from the cluster (its Gateway API objects, Services
	// and EndpointSlices) and compared here, as with --from: api's two endpoints go from half to 37.5 % each,
	// and api2's is added with a quarter.
	routeNext := filepath.Join(t.TempDir(), "httproute.yaml")
	os.WriteFile(routeNext, []byte(lbctlKubeRouteNext), 0o600)
	code, out, errs = run("diff", "--traffic", "-f", routeNext)
	if code != 1 || !strings.Contains(out, "Gateway shop/web, listener http (port 80), host name shop.example.com: policy shop/gateway.web.80.") {
		t.Errorf("diff --traffic of an HTTPRoute: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"198.51.100.11:8080  -     0      50.0%   37.5%", "198.51.100.21:8080  -     0      -       25.0%  added", "shop/web spec.rules[0].matches[0]"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff --traffic of an HTTPRoute: output lacks %q:\n%s", want, out)
		}
	}

	// With an Envoy connected, that preview models what it reports, as lbctl trace does: the endpoint that
	// fails its health check takes no traffic before or after, so the live one goes from all of the route's
	// to half (every endpoint counted as healthy: from half to a quarter).
	ca, err := getSecret(t, c, "demo-lbplane-ca")
	if err != nil {
		t.Fatal(err)
	}
	httpsAPI(t, l, ca.Data["ca.crt"]) // the chart's push API is HTTPS, for the Envoy's certificate
	startEnvoy(t, l, "envoy-lbctl", true)
	checked := startGWBackend(t, "checked")
	kubeApply(t, c.Kubeconfig, lbctlKubeChecked, map[string]any{"IP": checked.ip, "LivePort": checked.port, "DeadPort": 1})
	checkedNext := filepath.Join(t.TempDir(), "checked.yaml")
	os.WriteFile(checkedNext, []byte(lbctlKubeCheckedNext), 0o600)
	live, dead := fmt.Sprintf("%s:%d", checked.ip, checked.port), checked.ip+":1"
	eventually(t, 60*time.Second, "diff --traffic of the checked route shows the Envoy's failed health check", func() error {
		code, out, errs := run("diff", "--traffic", "-f", checkedNext)
		// Each endpoint's row, from its ENDPOINT column on: zone, level, before, after, and what it is.
		rows := map[string][]string{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if i := slices.IndexFunc(f, func(x string) bool { return x == live || x == dead }); i >= 0 {
				rows[f[i]] = f[i:]
			}
		}
		l, d := rows[live], rows[dead]
		if code != 1 || len(l) < 5 || len(d) < 6 || l[3] != "100.0%" || l[4] != "50.0%" || d[3] != "0.0%" || d[4] != "0.0%" ||
			!strings.Contains(strings.Join(d[5:], " "), "down: active health check failed (on 1 of 1 Envoys)") {
			return fmt.Errorf("exit %d, rows %q and %q\n%s%s", code, l, d, out, errs)
		}
		return nil
	})

	// Completion lists the cluster's names.
	if code, out, errs := run("__complete", "get", "-n", "shop", ""); code != 0 || !strings.HasPrefix(out, "cart\n") {
		t.Errorf("completion: exit %d %q %s", code, out, errs)
	}

	// The dashboard, served on loopback through the port-forward until --timeout.
	dashOut := &lockedBuffer{}
	dashDone := make(chan int, 1)
	go func() {
		var errb strings.Builder
		dashDone <- lbctlcmd.MainWith(opts, []string{"--kubeconfig", c.Kubeconfig, "dashboard", "--timeout", "15s"}, strings.NewReader(""), dashOut, &errb)
	}()
	var link string
	eventually(t, 30*time.Second, "lbctl dashboard prints its link", func() error {
		if link = strings.TrimSpace(dashOut.String()); !strings.HasPrefix(link, "http://127.0.0.1:") || !strings.Contains(link, "/dashboard/?code=") {
			return fmt.Errorf("output %q", link)
		}
		return nil
	})
	page := func(hc *http.Client, u string) string {
		t.Helper()
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", u, resp.Status, b)
		}
		return string(b)
	}
	base := link[:strings.Index(link, "/dashboard/")] + "/dashboard/"
	loginPage := page(&http.Client{Timeout: 10 * time.Second}, base)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Timeout: 10 * time.Second, Jar: jar}
	page(browser, link) // the one-time code for a session cookie
	if app := page(browser, base); app == loginPage {
		t.Error("after the login link, the dashboard still shows its login page: the session cookie did not come back over the local hop")
	}
	select {
	case code := <-dashDone:
		if code != 0 {
			t.Errorf("lbctl dashboard: exit %d", code)
		}
	case <-time.After(60 * time.Second):
		t.Error("lbctl dashboard --timeout 15s still serving after a minute")
	}

	// The token is the Secret's: a wrong one there, and the API refuses lbctl.
	tok := &corev1.Secret{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: "lbplane", Name: "demo-lbplane-api-token"}, tok); err != nil {
		t.Fatal(err)
	}
	tok.Data["token"] = []byte("not-the-token")
	if err := c.Client.Update(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run("status"); code == 0 || !strings.Contains(errs, "missing or wrong bearer token") {
		t.Errorf("status with a wrong token in the Secret: exit %d %s", code, errs)
	}

	// Writes go through kubectl in Kubernetes mode.
	if code, _, errs := run("apply", "-f", next); code == 0 || !strings.Contains(errs, "kubectl apply") {
		t.Errorf("apply in Kubernetes mode: exit %d %s", code, errs)
	}
}

// lockedBuffer is written by a command running in another goroutine while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lbplanePod makes a pod from the chart's Deployment template, as the ReplicaSet controller would, and sets
// its status as the kubelet would: running and ready, or pending.
func lbplanePod(t *testing.T, c *kubetest.Cluster, name string, ready bool) string {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "lbplane", Name: "demo-lbplane"}, d); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lbplane", Labels: d.Spec.Template.Labels},
		Spec: d.Spec.Template.Spec}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	if ready {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = "127.0.0.1"
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	}
	if err := c.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return name
}

// tableColumn reads one column of a kubectl-style table (a column starts where its header does) by the value
// of the NAME column.
func tableColumn(table, column string) map[string]string {
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	out := map[string]string{}
	starts := map[string]int{}
	for i := 0; i < len(lines[0]); {
		if lines[0][i] == ' ' {
			i++
			continue
		}
		end := strings.IndexByte(lines[0][i:], ' ')
		if end < 0 {
			end = len(lines[0]) - i
		}
		starts[lines[0][i:i+end]] = i
		i += end
	}
	at, ok := starts[column]
	nameAt, nameOK := starts["NAME"]
	if !ok || !nameOK {
		return out
	}
	field := func(line string, from int) string {
		if from >= len(line) || line[from] == ' ' {
			return ""
		}
		return strings.Fields(line[from:])[0]
	}
	for _, l := range lines[1:] {
		out[field(l, nameAt)] = field(l, at)
	}
	return out
}
