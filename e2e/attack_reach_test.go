package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/internal/dnstest"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// A policy's author is not trusted with the Envoy's host: these tests play that author against the real
// binaries and a real Envoy, as docs/security.md ("What a policy can reach") states the rules.

// reachPolicy is a policy whose backend "app" is the attacker's target, mirrored or not; good is the port of
// a backend that really serves, in a network namespace of the test (198.51.100.0/24), not on loopback.
const reachPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - backends: [{name: {{if .Mirror}}good{{else}}app{{end}}}]
{{- if .Mirror}}
      mirrors: [{backend: app}]
{{- end}}
  backends:
    - name: app
      endpoints: [{address: "{{.Address}}", port: {{.TargetPort}}}]
    - name: good
      endpoints: [{address: {{.GoodIP}}, port: 8080}]
`

// TestAttackReachBackendOnTheEnvoyHost: with lbplane's defaults, a policy naming the Envoy's own host as a
// backend, directly, by the name localhost, as a mirror target, or a link-local (cloud metadata) or
// unspecified address, is refused with an error naming the field and the reason, by the push API and by
// lbctl lint alike; the good policy already served keeps serving. With --allow-backend-cidrs 127.0.0.0/8,
// lint accepts the loopback one, as the server would.
func TestAttackReachBackendOnTheEnvoyHost(t *testing.T) {
	t.Parallel()
	far := newNetHost(t)
	far.backend(t, "far", 8080)
	l := startLbplaneDefaults(t)
	startEnvoy(t, l, "envoy-reach", true)
	port := reservePort(t)
	push(t, l, policy(t, reachPolicy, map[string]any{"Name": "good", "Port": port, "Address": far.IP, "TargetPort": 8080, "GoodIP": far.IP}))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitServing(t, url, "far")

	_, apiPort, _ := strings.Cut(strings.TrimPrefix(l.APIURL, "http://"), ":")
	target, _ := strconv.Atoi(apiPort)
	cases := []struct {
		name, address string
		mirror        bool
		field, reason string
	}{
		{"loopback", "127.0.0.1", false, "spec.backends[0].endpoints[0].address", "127.0.0.1 is a loopback address"},
		{"loopback-other", "127.0.0.2", false, "spec.backends[0].endpoints[0].address", "127.0.0.2 is a loopback address"},
		{"ipv6-loopback", "::1", false, "spec.backends[0].endpoints[0].address", "::1 is a loopback address"},
		{"mapped-loopback", "::ffff:127.0.0.1", false, "spec.backends[0].endpoints[0].address", "127.0.0.1 is a loopback address"},
		{"localhost", "localhost", false, "spec.backends[0].endpoints[0].address", `"localhost" names this host`},
		{"localhost-subdomain", "admin.localhost", false, "spec.backends[0].endpoints[0].address", `"admin.localhost" names this host`},
		{"numeric-name", "2130706433", false, "spec.backends[0].endpoints[0].address", "looks like a numeric address"},
		{"mirror", "127.0.0.1", true, "spec.backends[0].endpoints[0].address", "mirror target of spec.routes[0].mirrors[0]"},
		{"link-local", "169.254.169.254", false, "spec.backends[0].endpoints[0].address", "169.254.169.254 is a link-local address"},
		{"ipv6-link-local", "fe80::1", false, "spec.backends[0].endpoints[0].address", "fe80::1 is a link-local address"},
		{"unspecified", "0.0.0.0", false, "spec.backends[0].endpoints[0].address", "0.0.0.0 is an unspecified (this host) address"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		doc := policy(t, reachPolicy, map[string]any{"Name": "attack-" + c.name, "Port": reservePort(t), "Address": c.address,
			"TargetPort": target, "Mirror": c.mirror, "GoodIP": far.IP})
		_, err := l.Client.Apply(context.Background(), doc, false)
		if err == nil || !strings.Contains(err.Error(), c.field+": ") || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: the push API must refuse %s naming %s and %q, got %v", c.name, c.address, c.field, c.reason, err)
		}
		file := filepath.Join(dir, c.name+".yaml")
		if err := os.WriteFile(file, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := lbctl(t, l, "", "lint", "-f", file)
		if err == nil || !strings.Contains(errOut, c.field) || !strings.Contains(errOut, c.reason) {
			t.Errorf("%s: lbctl lint must refuse it as the server does: %v\n%s%s", c.name, err, out, errOut)
		}
	}
	// The operator's opt-in is honoured offline too.
	loop := filepath.Join(dir, "loopback.yaml")
	if out, errOut, err := lbctl(t, l, "", "lint", "--allow-backend-cidrs", "127.0.0.0/8", "-f", loop); err != nil {
		t.Errorf("lbctl lint --allow-backend-cidrs 127.0.0.0/8 refuses a loopback backend: %v\n%s%s", err, out, errOut)
	}
	ps, err := l.Client.List(context.Background())
	if err != nil || len(ps) != 1 {
		t.Fatalf("the store must hold the good policy alone, got %d (%v)", len(ps), err)
	}
	if s := newClient(false).Spread(t, url, 20, nil); s["far"] != 20 {
		t.Errorf("the good policy stopped serving: %v", s)
	}
	// lbctl status lists no relaxed setting: none was given.
	if _, errOut, err := lbctl(t, l, "", "status"); err != nil || strings.Contains(errOut, "allow-backend-cidrs") {
		t.Errorf("lbctl status without opt-ins: %v %s", err, errOut)
	}
}

// TestAttackReachEnvoyAdminIsNotOnTheDataPath: even where loopback backends are allowed (the worst setting
// an operator can choose), Envoy's admin has no TCP port to route to: it is a Unix socket of mode 0600, and
// the only TCP ports Envoy listens on are its traffic listeners and the read-only stats listener. A policy
// that routes and mirrors to that listener is refused (it is an Envoy's own port), and the listener itself
// answers POST /quitquitquit, POST /drain_listeners and GET /config_dump with 404: none reaches admin, and
// Envoy keeps running and serving.
func TestAttackReachEnvoyAdminIsNotOnTheDataPath(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "own")
	l := startLbplane(t) // with --allow-backend-cidrs 127.0.0.0/8,::1/128
	if _, errOut, err := lbctl(t, l, "", "status"); err != nil || !strings.Contains(errOut, "--allow-backend-cidrs 127.0.0.0/8,::1/128") {
		t.Errorf("lbctl status must list the loopback opt-in: %v\n%s", err, errOut)
	}
	e := startEnvoy(t, l, "envoy-admin", true)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: own}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.B}}}]}]
`, map[string]any{"Port": port, "B": bs[0].Port}))
	waitServing(t, url, "own")

	fi, err := os.Stat(e.AdminSocket)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Envoy's admin must be a Unix socket of mode 0600: %v %v", fi.Mode(), err)
	}
	ports := envoyListeningPorts(t, e)
	delete(ports, port)
	if len(ports) != 1 || !ports[e.StatsPort] {
		t.Fatalf("Envoy listens on TCP ports %v besides its traffic listener; want the stats port %d alone (admin is a socket)", ports, e.StatsPort)
	}

	// A policy that routes or mirrors to the stats listener is refused: it is an Envoy's own port.
	attack := policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: attack}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - match: {headers: [{name: x-mirror, type: Exact, value: "yes"}]}
      backends: [{name: own}]
      mirrors: [{backend: stats}]
    - backends: [{name: stats}]
  backends:
    - {name: stats, endpoints: [{address: 127.0.0.1, port: {{.Stats}}}]}
    - {name: own, endpoints: [{address: 127.0.0.1, port: {{.B}}}]}
`, map[string]any{"Port": reservePort(t), "Stats": e.StatsPort, "B": bs[0].Port})
	eventually(t, 10*time.Second, "a policy naming the stats port is refused", func() error {
		err := applyErr(l, attack)
		if err == nil || !strings.Contains(err.Error(), "spec.backends[0].endpoints[0].address: 127.0.0.1 port "+strconv.Itoa(e.StatsPort)+" is an Envoy's stats port") ||
			!strings.Contains(err.Error(), "mirror target of spec.routes[0].mirrors[0]") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	// And the stats listener itself, which anything on the host reaches, answers only its three paths.
	c := newClient(false)
	statsURL := fmt.Sprintf("http://127.0.0.1:%d", e.StatsPort)
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/quitquitquit"}, {http.MethodPost, "/drain_listeners?graceful"}, {http.MethodGet, "/config_dump"},
		{http.MethodPost, "/runtime_modify?overload.premature_reset_total_stream_count=1"}, {http.MethodPost, "/healthcheck/fail"},
	} {
		req, _ := http.NewRequest(r.method, statsURL+r.path, nil)
		resp, err := c.HTTP.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", r.method, r.path, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "configs") {
			t.Errorf("%s %s reached more than the stats listener: %d %.200s", r.method, r.path, resp.StatusCode, body)
		}
	}
	// Envoy is alive, has not drained, and serves.
	time.Sleep(500 * time.Millisecond)
	select {
	case <-e.done:
		t.Fatal("Envoy exited")
	default:
	}
	if s := adminGet(t, e, "/server_info"); !strings.Contains(s, `"state": "LIVE"`) {
		t.Errorf("Envoy is not LIVE after the attack: %.300s", s)
	}
	if s := newClient(false).Spread(t, url, 20, nil); s["own"] != 20 {
		t.Errorf("the policy stopped serving: %v", s)
	}
	if n := envoyStatSum(t, e, "listener_manager.", "listener_stopped"); n != 0 {
		t.Errorf("listeners were stopped: %d", n)
	}
	if s := adminGet(t, e, "/stats?filter=server.live"); !strings.Contains(s, "server.live: 1") {
		t.Errorf("Envoy fails its health checks after the attack: %s", s)
	}
}

// envoyListeningPorts lists the TCP ports Envoy's process listens on, from /proc.
func envoyListeningPorts(t *testing.T, e *Envoy) map[int]bool {
	t.Helper()
	pid := e.cmd.Process.Pid
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if ino, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st ... inode (10th)
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				ports[int(p)] = true
			}
		}
		f.Close()
	}
	if len(ports) == 0 {
		t.Fatal("found no listening socket of Envoy in /proc")
	}
	return ports
}

// TestAttackReachPprofNeedsTheTokenOnLoopback: --pprof answers nobody without the admin token, loopback
// included: a local process, or a request a proxy on this host is made to send, reads no heap.
func TestAttackReachPprofNeedsTheTokenOnLoopback(t *testing.T) {
	t.Parallel()
	l := startLbplane(t, "--pprof")
	base := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", l.metricsPort)
	for _, tc := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer wrong", 401}, {"Bearer " + token, 200}} {
		for _, path := range []string{"", "cmdline", "heap", "goroutine?debug=1"} {
			req, _ := http.NewRequest(http.MethodGet, base+path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with %q: %d, want %d", base+path, tc.auth, resp.StatusCode, tc.want)
			}
		}
	}
}

const reachKubeObjects = `
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
{{- range .Namespaces}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: {{.}}}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: {{.}}, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [{{$.IP}}], conditions: {ready: true}}]
{{- end}}
---
apiVersion: v1
kind: Service
metadata: {name: external, namespace: team-a}
spec: {type: ExternalName, externalName: localhost, ports: [{name: http, port: 80}]}
`

const reachKubePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}, namespace: team-a}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
{{- if .Service}}
      service: {name: {{or .ServiceName "web"}}, namespace: {{.Service}}, port: 80}
{{- else}}
      endpoints: [{address: "{{.Address}}", port: 8080}]
{{- end}}
`

// TestAttackReachKubernetes: in Kubernetes mode a namespace's policy reaches Services of its own namespace
// only. An endpoint address (even one a pod has) or a host name is refused by default, with the field in
// the policy's Accepted condition, and a Service of another namespace stays unresolved until that
// Service's namespace grants it (annotation lbplane.io/allow-policies-from naming the policy's namespace),
// and again once the grant is withdrawn; the operator's --address-backends-namespaces and
// --allow-cross-namespace-refs (the chart's backendAddresses.namespaces and allowCrossNamespaceRefs) let
// them through, and the traffic then flows.
func TestAttackReachKubernetes(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	far := newNetHost(t)
	far.backend(t, "far", 8080)
	kubeApply(t, cluster.Kubeconfig, reachKubeObjects, map[string]any{"Namespaces": []string{"team-a", "team-b"}, "IP": far.IP})
	l := startLbplane(t, "--kubernetes", "--kubeconfig", cluster.Kubeconfig)
	startEnvoy(t, l, "envoy-kube-reach", true)
	ports := map[string]int{}
	for _, p := range []struct{ name, address, service, serviceName string }{
		{"own-service", "", "team-a", ""}, {"raw-address", far.IP, "", ""}, {"host-name", "far.example.com", "", ""}, {"other-namespace", "", "team-b", ""},
		{"external-name", "", "team-a", "external"},
	} {
		ports[p.name] = reservePort(t)
		kubeApply(t, cluster.Kubeconfig, reachKubePolicy, map[string]any{"Name": p.name, "Port": ports[p.name], "Address": p.address,
			"Service": p.service, "ServiceName": p.serviceName})
	}
	condition := func(name, typ string) string {
		out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "-n", "team-a", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="`+typ+`")].status}: {.status.conditions[?(@.type=="`+typ+`")].message}`)
		return out
	}
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports["own-service"]), "far")
	for name, want := range map[string]string{
		"raw-address": `False: spec.backends[0].endpoints[0].address: endpoint addresses are not allowed in namespace "team-a"`,
		"host-name":   `False: spec.backends[0].endpoints[0].address: host names are not allowed in namespace "team-a"`,
	} {
		eventually(t, 60*time.Second, name+" is refused with the field", func() error {
			if got := condition(name, "Accepted"); !strings.HasPrefix(got, want) {
				return fmt.Errorf("Accepted %s", got)
			}
			return nil
		})
	}
	eventually(t, 60*time.Second, "the other namespace's Service stays unresolved", func() error {
		if got := condition("other-namespace", "ResolvedRefs"); !strings.HasPrefix(got, "False: spec.backends[0].service: Service team-b/web is in another namespace, which is not allowed without a grant") {
			return fmt.Errorf("ResolvedRefs %s", got)
		}
		return nil
	})
	eventually(t, 60*time.Second, "the ExternalName Service (localhost) is not followed", func() error {
		if got := condition("external-name", "ResolvedRefs"); !strings.HasPrefix(got, "False: spec.backends[0].service: Service team-a/external is of type ExternalName") {
			return fmt.Errorf("ResolvedRefs %s", got)
		}
		return nil
	})
	for _, name := range []string{"raw-address", "host-name", "other-namespace", "external-name"} {
		if _, code, err := doWith(newClient(false), fmt.Sprintf("http://127.0.0.1:%d/", ports[name]), nil); err == nil && code == 200 {
			t.Errorf("%s: traffic reached a backend (%d)", name, code)
		}
	}

	// team-b grants team-c, not team-a: still refused. Then team-a: served.
	if out, err := kubectl(t, cluster.Kubeconfig, "", "annotate", "--overwrite", "service", "-n", "team-b", "web", translate.GrantAnnotation+"=team-c"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	time.Sleep(2 * time.Second) // time for a wrong grant to take effect, were it taken
	if got := condition("other-namespace", "ResolvedRefs"); !strings.HasPrefix(got, "False:") {
		t.Errorf("a grant to team-c let team-a in: %s", got)
	}
	if out, err := kubectl(t, cluster.Kubeconfig, "", "annotate", "--overwrite", "service", "-n", "team-b", "web", translate.GrantAnnotation+"=team-c,team-a"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports["other-namespace"]), "far")
	// Withdrawn: the traffic stops.
	if out, err := kubectl(t, cluster.Kubeconfig, "", "annotate", "service", "-n", "team-b", "web", translate.GrantAnnotation+"-"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	eventually(t, 30*time.Second, "the withdrawn grant stops the traffic", func() error {
		if _, code, err := doWith(newClient(false), fmt.Sprintf("http://127.0.0.1:%d/", ports["other-namespace"]), nil); err == nil && code == 200 {
			return fmt.Errorf("still served")
		}
		return nil
	})

	// The operator allows addresses in team-a and references across namespaces: the same policies serve.
	// The Envoy reconnects to the restarted lbplane.
	l.Kill()
	l.extraArg = append(l.extraArg, "--address-backends-namespaces", "team-a", "--allow-cross-namespace-refs")
	l.Restart(t)
	for _, name := range []string{"raw-address", "other-namespace", "own-service"} {
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports[name]), "far")
	}
	if _, errOut, err := lbctl(t, l, "", "status"); err != nil || !strings.Contains(errOut, "endpoint addresses and host names allowed in namespaces team-a") {
		t.Errorf("lbctl status must list the Kubernetes address setting: %v\n%s", err, errOut)
	}
}

// applyErr pushes doc and returns the push API's refusal, or nil.
func applyErr(l *Lbplane, doc []byte) error {
	_, err := l.Client.Apply(context.Background(), doc, false)
	return err
}

// TestAttackReachHostNamesAreJudgedByTheirAnswers: with lbplane's defaults, a backend named by a host name
// is judged by every address it resolves to when it is pushed: the machine's own host name (in /etc/hosts,
// or this host's addresses), and names answering loopback in its IPv4-compatible, NAT64 and 6to4 forms,
// the metadata address or the unspecified address, are refused naming the field, the name and the
// address; the same forms written as addresses are refused too. A name answering an allowed address
// serves. The DNS server is the test's, on loopback (--dns-resolver).
func TestAttackReachHostNamesAreJudgedByTheirAnswers(t *testing.T) {
	t.Parallel()
	far := newNetHost(t)
	far.backend(t, "far", 8080)
	ns := dnstest.Start(t)
	ns.Set("good.attack.test", 0, far.IP)
	answers := map[string][]string{
		"compat.attack.test": {"::127.0.0.1"}, "nat64.attack.test": {"64:ff9b::7f00:1"}, "sixtofour.attack.test": {"2002:7f00:1::"},
		"metadata.attack.test": {"169.254.169.254"}, "unspecified.attack.test": {"0.0.0.0"}, "mixed.attack.test": {far.IP, "127.0.0.1"},
		"teredo.attack.test": {"2001:0:7f00:1::1"},
	}
	for name, a := range answers {
		ns.Set(name, 0, a...)
	}
	l := startLbplaneDefaults(t, "--dns-resolver", ns.Addr)
	startEnvoy(t, l, "envoy-names", true)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	const field = "spec.backends[0].endpoints[0].address: "
	cases := map[string]string{hostname: fmt.Sprintf("%q resolves to ", hostname)}
	for name, a := range answers {
		cases[name] = fmt.Sprintf("%q resolves to %s", name, netip.MustParseAddr(a[len(a)-1]))
	}
	for _, literal := range []string{"::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "::ffff:0:127.0.0.1", "64:ff9b::a9fe:a9fe"} {
		cases[literal] = "carries "
	}
	for address, reason := range cases {
		family := "All"
		doc := policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: attack}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
{{- if .Name}}
      dns: {lookupFamily: {{.Family}}}
{{- end}}
      endpoints: [{address: "{{.Address}}", port: 8080}]
`, map[string]any{"Port": reservePort(t), "Address": address, "Name": net.ParseIP(address) == nil, "Family": family})
		err := applyErr(l, doc)
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: the push API must refuse it naming %q and %q, got %v", address, field, reason, err)
		}
	}
	port := reservePort(t)
	push(t, l, policy(t, reachPolicy, map[string]any{"Name": "good", "Port": port, "Address": "good.attack.test", "TargetPort": 8080, "GoodIP": far.IP}))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "far")
	if ps, err := l.Client.List(context.Background()); err != nil || len(ps) != 1 {
		t.Errorf("the store must hold the good policy alone, got %d (%v)", len(ps), err)
	}
}

// TestAttackReachDNSRebinding: a name that answered a real backend and then rebinds to loopback and the
// metadata address (the attack of issue 41: 25 s of a good answer, then 127.0.0.1) never sends a request
// there: at the next refresh those addresses are left out, the policy says so (ResolvedRefs False,
// ForbiddenAddress, naming the field and the addresses), and a server on 127.0.0.1 at the backend's port
// gets nothing. When the name answers the real backend again, it serves again.
func TestAttackReachDNSRebinding(t *testing.T) {
	t.Parallel()
	// What the attacker is after: a server on this host's loopback, on the backend's port.
	secret := startBackend(t, "secret", 0)
	target := secret.Port
	far := newNetHost(t)
	far.backend(t, "far", target)
	const name = "rebind.attack.test"
	ns := dnstest.Start(t)
	ns.Set(name, 0, far.IP)
	l := startLbplaneDefaults(t, "--dns-resolver", ns.Addr)
	startEnvoy(t, l, "envoy-rebind", true)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: rebind}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      dns: {refreshInterval: 200ms}
      endpoints: [{address: `+name+`, port: {{.Target}}}]
`, map[string]any{"Port": port, "Target": target}))
	waitServing(t, url, "far")

	ns.Set(name, 0, "127.0.0.1", "169.254.169.254")
	eventually(t, 30*time.Second, "the rebound answer is left out and said so", func() error {
		out := lbctlOK(t, l, "get", "rebind", "-o", "json")
		want := `spec.backends[0].endpoints[0].address: \"` + name + `\" resolves to 127.0.0.1, 169.254.169.254, left out`
		if !strings.Contains(out, "ForbiddenAddress") || !strings.Contains(out, want) {
			return fmt.Errorf("status does not say it: %.600s", out)
		}
		return nil
	})
	// Many refreshes (200 ms each) while requests keep coming: none reaches the loopback server.
	noneReaches(t, url, secret, 40)
	ns.Set(name, 0, far.IP)
	waitServing(t, url, "far")
}

// noneReaches sends n requests to url, 50 ms apart (spread over several DNS refreshes; not
// synchronisation): none may be answered 200, and secret, the server on loopback a rebound name points at,
// must get none of them.
func noneReaches(t *testing.T, url string, secret *Backend, n int) {
	t.Helper()
	c := newClient(false)
	for i := 0; i < n; i++ {
		if _, code, err := doWith(c, url+"/", nil); err == nil && code == 200 {
			t.Errorf("request %d was answered 200 after the name rebound to loopback", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := secret.Served.Load(); got != 0 {
		t.Errorf("the server on 127.0.0.1:%d got %d requests", secret.Port, got)
	}
}

// TestAttackReachOwnPorts: even with loopback re-admitted (--allow-backend-cidrs 127.0.0.0/8,::1/128), no
// backend may name lbplane's own ports (xDS, push API and dashboard, metrics: bound on port 0 here) nor an
// Envoy's stats port, by a loopback address, localhost, the unspecified address, or a name that resolves
// there; another port on loopback is still allowed.
func TestAttackReachOwnPorts(t *testing.T) {
	t.Parallel()
	ns := dnstest.Start(t)
	ns.Set("own.attack.test", 0, "127.0.0.1")
	l := startLbplane(t, "--dns-resolver", ns.Addr)
	e := startEnvoy(t, l, "envoy-own", true)
	waitSynced(t, l, 0)
	portOf := func(hostport string) int {
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(hostport, "http://"))
		n, _ := strconv.Atoi(p)
		return n
	}
	targets := map[string]int{"lbplane's xDS port": portOf(l.XDSAddr), "lbplane's push API and dashboard port": portOf(l.APIURL),
		"lbplane's metrics port": l.metricsPort, "an Envoy's stats port": e.StatsPort}
	doc := func(address string, port int) []byte {
		return policy(t, reachPolicy, map[string]any{"Name": "attack", "Port": reservePort(t), "Address": address, "TargetPort": port, "GoodIP": "198.51.100.250"})
	}
	for what, port := range targets {
		for _, address := range []string{"127.0.0.1", "127.0.0.7", "::1", "localhost", "own.attack.test", "::ffff:127.0.0.1"} {
			// The Envoy's stats port is learned when it connects (within a second).
			eventually(t, 10*time.Second, fmt.Sprintf("%s:%d is refused", address, port), func() error {
				err := applyErr(l, doc(address, port))
				if err == nil || !strings.Contains(err.Error(), "spec.backends[0].endpoints[0].address") || !strings.Contains(err.Error(), what) {
					return fmt.Errorf("the push API must refuse %s:%d (%s), got %v", address, port, what, err)
				}
				return nil
			})
		}
	}
	bs := startBackends(t, "own")
	push(t, l, doc("127.0.0.1", bs[0].Port))
}

// TestAttackReachLoopIntoTheEnvoyItself: a backend on the Envoy host's own non-loopback address (the host
// side of a network the test creates, 198.51.100.0/24) at its own listener is refused by default. Where the
// operator re-admits that address, the loop it makes is stopped by the hop limit: the request is answered
// 508 with a body that says so after 10 hops, not after thousands (on a route that retries 5xx too), and
// Envoy keeps serving.
func TestAttackReachLoopIntoTheEnvoyItself(t *testing.T) {
	t.Parallel()
	h := newNetHost(t)
	l := startLbplane(t)
	e := startEnvoy(t, l, "envoy-loop", true)
	port := reservePort(t)
	loop := policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: loop}
spec:
  listener: {address: {{.IP}}, port: {{.Port}}, protocol: HTTP}
  routes:
    # Retrying 5xx would multiply the loop at every hop; the 508 is never retried.
    - backends: [{name: self}]
      retry: {conditions: [5xx], attempts: 1}
  backends: [{name: self, endpoints: [{address: {{.IP}}, port: {{.Port}}}]}]
`, map[string]any{"IP": h.hostIP, "Port": port})
	eventually(t, 10*time.Second, "a backend on the Envoy's own address is refused", func() error {
		err := applyErr(l, loop)
		if err == nil || !strings.Contains(err.Error(), h.hostIP+" is an address of the Envoy's or lbplane's own host") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})

	l.Kill()
	l.extraArg = append(l.extraArg, "--allow-backend-cidrs", "127.0.0.0/8,::1/128,"+h.hostIP+"/32")
	l.Restart(t)
	push(t, l, loop)
	url := fmt.Sprintf("http://%s:%d/", h.hostIP, port)
	before := envoyStatSum(t, e, "http.", ".downstream_rq_total")
	var body string
	eventually(t, 30*time.Second, "the looping request is stopped by the hop limit", func() error {
		resp, err := newClient(false).HTTP.Get(url)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if body = string(b); resp.StatusCode != 508 || !strings.Contains(body, "loop detected") {
			return fmt.Errorf("%d %.200s", resp.StatusCode, body)
		}
		return nil
	})
	hops := envoyStatSum(t, e, "http.", ".downstream_rq_total") - before
	// Each try of the eventually above is one loop of at most 10 hops (1,024 if each hop retried once).
	if hops > 200 {
		t.Errorf("the loops took %d requests through Envoy; each must stop after 10 hops", hops)
	}
	t.Logf("508 %q after %d requests through Envoy", strings.TrimSpace(body), hops)
	if s := adminGet(t, e, "/server_info"); !strings.Contains(s, `"state": "LIVE"`) {
		t.Errorf("Envoy is not LIVE after the loop: %.300s", s)
	}
}

// TestAttackReachKubernetesOwnHost: the rules on what addresses resolve to hold in Kubernetes mode. A
// Service whose EndpointSlice names the Envoy host's own address stays unresolved; in a namespace allowed
// address backends, a literal in an IPv6 form of loopback and the Envoy host's address are refused in
// Accepted, and a host name that answers a real backend serves until it rebinds to loopback and the
// metadata address, which are left out with ResolvedRefs False (ForbiddenAddress), while a server on
// 127.0.0.1 at the backend's port gets nothing.
func TestAttackReachKubernetesOwnHost(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	own := newNetHost(t) // its host side is an address of the Envoy's or lbplane's own host
	secret := startBackend(t, "secret", 0)
	target := secret.Port
	far := newNetHost(t)
	far.backend(t, "far", target)
	const name = "rebind.kube.test"
	ns := dnstest.Start(t)
	ns.Set(name, 0, far.IP)
	kubeApply(t, cluster.Kubeconfig, `
apiVersion: v1
kind: Namespace
metadata: {name: edge}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Service
metadata: {name: self, namespace: team-a}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: self-1, namespace: team-a, labels: {kubernetes.io/service-name: self}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [{{.Own}}], conditions: {ready: true}}]
`, map[string]any{"Own": own.hostIP})
	l := startLbplaneDefaults(t, "--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--address-backends-namespaces", "edge", "--dns-resolver", ns.Addr)
	startEnvoy(t, l, "envoy-kube-own", true)
	ports := map[string]int{}
	for _, p := range []struct{ name, namespace, address, service string }{
		{"self-service", "team-a", "", "self"}, {"compat", "edge", "::127.0.0.1", ""}, {"own-host", "edge", own.hostIP, ""},
		{"rebind", "edge", name, ""},
	} {
		ports[p.name] = reservePort(t)
		kubeApply(t, cluster.Kubeconfig, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}, namespace: {{.Namespace}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
{{- if .Service}}
      service: {name: {{.Service}}, port: 80}
{{- else}}
{{- if .Named}}
      dns: {refreshInterval: 200ms}
{{- end}}
      endpoints: [{address: "{{.Address}}", port: {{.Target}}}]
{{- end}}
`, map[string]any{"Name": p.name, "Namespace": p.namespace, "Port": ports[p.name], "Address": p.address, "Service": p.service, "Target": target,
			"Named": p.address == name})
	}
	condition := func(ns, name, typ string) string {
		out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "-n", ns, name, "-o",
			`jsonpath={.status.conditions[?(@.type=="`+typ+`")].status} {.status.conditions[?(@.type=="`+typ+`")].reason}: {.status.conditions[?(@.type=="`+typ+`")].message}`)
		return out
	}
	for _, c := range []struct{ ns, name, typ, want string }{
		{"team-a", "self-service", "ResolvedRefs", "False BackendNotFound: spec.backends[0].service: Service team-a/self: " + own.hostIP + " is an address of the Envoy's or lbplane's own host"},
		{"edge", "compat", "Accepted", "False Invalid: spec.backends[0].endpoints[0].address: ::7f00:1 carries 127.0.0.1 is a loopback address"},
		{"edge", "own-host", "Accepted", "False Invalid: spec.backends[0].endpoints[0].address: " + own.hostIP + " is an address of the Envoy's or lbplane's own host"},
	} {
		eventually(t, 60*time.Second, c.ns+"/"+c.name+" is refused", func() error {
			if got := condition(c.ns, c.name, c.typ); !strings.HasPrefix(got, c.want) {
				return fmt.Errorf("%s %s", c.typ, got)
			}
			return nil
		})
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", ports["rebind"])
	waitServing(t, url, "far")
	ns.Set(name, 0, "127.0.0.1", "169.254.169.254")
	eventually(t, 60*time.Second, "the rebound answer is left out and said so", func() error {
		want := `False ForbiddenAddress: spec.backends[0].endpoints[0].address: "` + name + `" resolves to 127.0.0.1, 169.254.169.254, left out`
		if got := condition("edge", "rebind", "ResolvedRefs"); !strings.HasPrefix(got, want) {
			return fmt.Errorf("ResolvedRefs %s", got)
		}
		return nil
	})
	noneReaches(t, url, secret, 20)
	for _, name := range []string{"self-service", "compat", "own-host"} {
		if _, code, err := doWith(newClient(false), fmt.Sprintf("http://127.0.0.1:%d/", ports[name]), nil); err == nil && code == 200 {
			t.Errorf("%s: traffic reached a backend", name)
		}
	}
}
