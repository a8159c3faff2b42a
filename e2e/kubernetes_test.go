package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

func kubectl(t *testing.T, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	bin := tools.Path("kubectl")
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(err.Error(), "no such file") {
		t.Fatalf("kubectl is not installed (%s): run make tools (hack/tools.sh kubectl builds it)", bin)
	}
	return string(out), err
}

const kubeObjects = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
{{- range .Endpoints}}
  - addresses: [{{.IP}}]
    conditions: {ready: {{.Ready}}, terminating: {{.Terminating}}}
{{- if .Zone}}
    zone: {{.Zone}}
{{- end}}
{{- end}}
`

const kubePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}, namespace: default}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: web
      service: {name: web, port: 80}
`

type kubeEndpoint struct {
	IP                 string
	Ready, Terminating bool
	Zone               string
}

// kubeEnv is a real API server, backends in network namespaces, lbplane in Kubernetes mode and one Envoy.
type kubeEnv struct {
	envoy   *Envoy
	cluster *kubetest.Cluster
	hosts   map[string]*netHost
	names   []string
	url     string
	port    int
}

func startKubeEnv(t *testing.T, backends ...string) *kubeEnv {
	t.Helper()
	return startKubeEnvWith(t, nil, backends...)
}

// startKubeEnvWith is startKubeEnv with more lbplane serve flags.
func startKubeEnvWith(t *testing.T, extra []string, backends ...string) *kubeEnv {
	t.Helper()
	k := &kubeEnv{cluster: kubetest.Start(t), hosts: map[string]*netHost{}, names: backends}
	for _, n := range backends {
		k.hosts[n] = newNetHost(t)
		k.hosts[n].backend(t, n, 8080)
	}
	l := startLbplane(t, append([]string{"--kubernetes", "--kubeconfig", k.cluster.Kubeconfig}, extra...)...)
	k.envoy = startEnvoy(t, l, "envoy-k8s", true)
	k.port = reservePort(t)
	k.url = fmt.Sprintf("http://127.0.0.1:%d", k.port)
	return k
}

// apply renders tmpl with data and kubectl-applies it.
func (k *kubeEnv) apply(t *testing.T, tmpl string, data any) {
	t.Helper()
	kubeApply(t, k.cluster.Kubeconfig, tmpl, data)
}

func kubeApply(t *testing.T, kubeconfig, tmpl string, data any) {
	t.Helper()
	if out, err := kubectl(t, kubeconfig, string(policy(t, tmpl, data)), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// endpoints describes the EndpointSlice: one state (ready, terminating, notready) per backend, in order.
func (k *kubeEnv) endpoints(states ...string) map[string]any {
	var eps []kubeEndpoint
	for i, s := range states {
		// Each endpoint in a zone of its own: zones become Envoy localities.
		eps = append(eps, kubeEndpoint{IP: k.hosts[k.names[i]].IP, Ready: s == "ready", Terminating: s == "terminating", Zone: "zone-" + k.names[i]})
	}
	return map[string]any{"Endpoints": eps}
}

func TestKubernetesApplyServesAndReportsStatus(t *testing.T) {
	t.Parallel()
	k := startKubeEnv(t, "k1", "k2", "k3")
	cluster, url, port := k.cluster, k.url, k.port
	apply := func(tmpl string, data any) { t.Helper(); k.apply(t, tmpl, data) }
	endpoints := k.endpoints
	apply(kubeObjects, endpoints("ready", "ready"))
	apply(kubePolicy, map[string]any{"Name": "web", "Port": port})
	waitServing(t, url, "k1", "k2")
	eventually(t, 20*time.Second, "kubectl get lbp shows Accepted and Programmed", func() error {
		out, err := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "web")
		if err != nil {
			return fmt.Errorf("%v %s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "ACCEPTED") || strings.Count(lines[1], "True") != 2 {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp")
	t.Logf("kubectl get lbp:\n%s", out)
	if dump := k.envoy.ConfigDump(t); !strings.Contains(dump, `"zone": "zone-k1"`) || !strings.Contains(dump, `"zone": "zone-k2"`) {
		t.Error("the EndpointSlice zones are not Envoy localities")
	}

	// EndpointSlice changes under load: an endpoint joins, one starts terminating, one becomes not ready.
	load := startLoad(url, 200, 4, 2*time.Minute)
	apply(kubeObjects, endpoints("ready", "ready", "ready"))
	waitServing(t, url, "k3")
	apply(kubeObjects, endpoints("terminating", "ready", "ready"))
	eventually(t, 10*time.Second, "k1 gets no new requests", func() error {
		if got := newClient(false).Spread(t, url, 60, nil); got["k1"] > 0 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	apply(kubeObjects, endpoints("terminating", "ready", "notready"))
	eventually(t, 10*time.Second, "only k2 serves", func() error {
		if got := newClient(false).Spread(t, url, 60, nil); got["k2"] != 60 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	eventually(t, 10*time.Second, "status counts 2 endpoints (the not-ready one left out), 1 healthy (the terminating one is not)", func() error {
		out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "web", "-o", `jsonpath={.status.endpoints.total} {.status.endpoints.healthy}`)
		if out != "2 1" {
			return fmt.Errorf("total, healthy: %q", out)
		}
		return nil
	})
	eventually(t, 15*time.Second, "status.backends has what Envoy reports: k1 draining, k2 healthy, requests counted", func() error {
		out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "web", "-o", `jsonpath={.status.backends}`)
		var bs []v1alpha1.BackendStatus
		if err := json.Unmarshal([]byte(out), &bs); err != nil {
			return fmt.Errorf("%v: %q", err, out)
		}
		if len(bs) != 1 || bs[0].Name != "web" || bs[0].Endpoints.Total != 2 || bs[0].Endpoints.Healthy != 1 || bs[0].Requests == 0 ||
			len(bs[0].Ejected) != 1 || bs[0].Ejected[0].Address != k.hosts["k1"].IP+":8080" || !slices.Contains(bs[0].Ejected[0].Reasons, "draining") {
			return fmt.Errorf("%+v", bs)
		}
		return nil
	})
	load.Stop()
	load.RequireNoFailures(t, 100)
	t.Logf("EndpointSlice changes under load: %d requests, %d failed, served by %v", load.OK.Load(), load.Failed.Load(), load.Backends)

	// A second policy on the same port and host: accepted by the API server, not by lbplane, which says why.
	apply(kubePolicy, map[string]any{"Name": "web-copy", "Port": port})
	eventually(t, 20*time.Second, "web-copy reports the conflict", func() error {
		out, err := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "web-copy", "-o",
			`jsonpath={.status.conditions[?(@.type=="Accepted")].status} {.status.conditions[?(@.type=="Accepted")].reason}: {.status.conditions[?(@.type=="Accepted")].message}`)
		if err != nil || !strings.HasPrefix(out, "False Conflicted:") || !strings.Contains(out, "already served by policy default/web") {
			return fmt.Errorf("%v %s", err, out)
		}
		return nil
	})
	if got := newClient(true).Spread(t, url, 30, nil); got["k2"] != 30 {
		t.Errorf("the older policy stopped serving: %v", got)
	}
}

// The API server down for 30s under load: lbplane and Envoy keep serving; a change made after it returns
// is applied.
func TestKubernetesAPIServerOutage(t *testing.T) {
	t.Parallel()
	k := startKubeEnv(t, "k1", "k2", "k3")
	cluster, url, port := k.cluster, k.url, k.port
	apply := func(tmpl string, data any) { t.Helper(); k.apply(t, tmpl, data) }
	apply(kubeObjects, k.endpoints("ready", "ready"))
	apply(kubePolicy, map[string]any{"Name": "web", "Port": port})
	waitServing(t, url, "k1", "k2")

	load := startLoad(url, 200, 4, 2*time.Minute)
	cluster.Stop()
	time.Sleep(30 * time.Second)
	cluster.Restart(t)
	back := time.Now()
	apply(kubeObjects, k.endpoints("ready", "ready", "ready"))
	// client-go's watches back off up to about 30s while the API server is away, so the change can take
	// that long to arrive; it must arrive.
	eventually(t, 90*time.Second, "the change made after the API server returned is applied", func() error {
		got := newClient(false).Spread(t, url, 30, nil)
		if got["k3"] == 0 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	t.Logf("the change made after the API server returned was applied %s later", time.Since(back).Round(time.Second))
	load.Stop()
	load.RequireNoFailures(t, 3000)
	t.Logf("API server down 30s under 200 req/s: %d requests, %d failed; a change made after it returned was applied", load.OK.Load(), load.Failed.Load())

}

// A policy Envoy rejects shows Programmed=False with Envoy's message; the others stay Programmed and serve.
func TestKubernetesRejectedPolicy(t *testing.T) {
	t.Parallel()
	k := startKubeEnv(t, "k1")
	cluster, url, port := k.cluster, k.url, k.port
	apply := func(tmpl string, data any) { t.Helper(); k.apply(t, tmpl, data) }
	apply(kubeObjects, k.endpoints("ready"))
	apply(kubePolicy, map[string]any{"Name": "web", "Port": port})
	waitServing(t, url, "k1")
	// A port another process holds: Envoy rejects the listener.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	apply(kubePolicy, map[string]any{"Name": "blocked", "Port": taken.Addr().(*net.TCPAddr).Port})
	eventually(t, 30*time.Second, "blocked shows Programmed=False with Envoy's message", func() error {
		out, err := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "blocked", "-o",
			`jsonpath={.status.conditions[?(@.type=="Programmed")].status} {.status.conditions[?(@.type=="Programmed")].reason}: {.status.conditions[?(@.type=="Programmed")].message}`)
		if err != nil || !strings.HasPrefix(out, "False Rejected:") || !strings.Contains(out, "Address already in use") {
			return fmt.Errorf("%v %s", err, out)
		}
		return nil
	})
	out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Programmed")].status}`)
	if out != "True" {
		t.Errorf("the other policy's Programmed is %q, want True", out)
	}
	if got := newClient(true).Spread(t, url, 30, nil); got["k1"] != 30 {
		t.Errorf("the other policy stopped serving: %v", got)
	}
}

// Two replicas, one Envoy on each. Status counts the Envoys of both; the leader is killed under traffic:
// no request fails, the other replica takes over status writing, and a change still reaches its Envoy and
// the policy's status.
func TestKubernetesReplicasAndLeaderFailover(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	hosts := map[string]*netHost{}
	for _, n := range []string{"k1", "k2"} {
		hosts[n] = newNetHost(t)
		hosts[n].backend(t, n, 8080)
	}
	args := []string{"--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--leader-election-namespace", "default"}
	replicas := []*Lbplane{startLbplane(t, args...), startLbplane(t, args...)}
	startEnvoy(t, replicas[0], "envoy-a", true)
	startEnvoy(t, replicas[1], "envoy-b", true)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	apply := func(tmpl string, data any) { t.Helper(); kubeApply(t, cluster.Kubeconfig, tmpl, data) }
	apply(kubeObjects, map[string]any{"Endpoints": []kubeEndpoint{{IP: hosts["k1"].IP, Ready: true}}})
	apply(kubePolicy, map[string]any{"Name": "web", "Port": port})
	// Both Envoys bind the same address and port: the kernel spreads connections between them.
	waitServing(t, url, "k1")
	status := func() string {
		out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "web", "-o",
			`jsonpath={.status.observedGeneration} {.status.proxies.connected} {.status.proxies.synced} {.status.conditions[?(@.type=="Programmed")].status}`)
		return out
	}
	eventually(t, 30*time.Second, "status counts the Envoys of both replicas", func() error {
		if s := status(); s != "1 2 2 True" {
			return fmt.Errorf("generation, connected, synced, programmed: %q", s)
		}
		return nil
	})
	leader, follower := -1, -1
	for i, r := range replicas {
		if b, _ := os.ReadFile(r.log); strings.Contains(string(b), "this replica writes policy status") {
			leader, follower = i, 1-i
		}
	}
	if leader < 0 {
		t.Fatal("no replica says it writes status")
	}
	load := startLoad(url, 200, 4, 2*time.Minute)
	replicas[leader].Kill()
	// A change after the leader is gone: a new generation of the policy, and a new endpoint.
	apply(kubeObjects, map[string]any{"Endpoints": []kubeEndpoint{{IP: hosts["k1"].IP, Ready: true}, {IP: hosts["k2"].IP, Ready: true}}})
	apply(strings.Replace(kubePolicy, "    - name: web\n", "    - name: web\n      loadBalancing: {algorithm: Random}\n", 1), map[string]any{"Name": "web", "Port": port})
	eventually(t, 60*time.Second, "the other replica writes the new generation's status", func() error {
		if s := status(); s != "2 1 1 True" {
			return fmt.Errorf("generation, connected, synced, programmed: %q", s)
		}
		return nil
	})
	if b, _ := os.ReadFile(replicas[follower].log); !strings.Contains(string(b), "this replica writes policy status") {
		t.Error("the surviving replica did not take over status writing")
	}
	// Reading the Envoys' health moved with it: the surviving Envoy reports the backend.
	eventually(t, 30*time.Second, "the new leader reports backend health", func() error {
		out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "web", "-o", `jsonpath={.status.backends[0].proxies} {.status.backends[0].endpoints.healthy}/{.status.backends[0].endpoints.total}`)
		// One Envoy left (the other replica's went with it); every endpoint healthy.
		if f := strings.Fields(out); len(f) != 2 || f[0] != "1" || strings.Split(f[1], "/")[0] != strings.Split(f[1], "/")[1] || f[1] == "0/0" {
			return fmt.Errorf("backends[0] proxies, healthy/total endpoints: %q", out)
		}
		return nil
	})
	load.Stop()
	load.RequireNoFailures(t, 500)
	t.Logf("leader killed under 200 req/s through two Envoys: %d requests, %d failed; status taken over: %s", load.OK.Load(), load.Failed.Load(), status())
}

// A kubernetes.io/tls Secret serves an HTTPS listener.
func TestKubernetesTLSSecret(t *testing.T) {
	t.Parallel()
	k := startKubeEnv(t, "k1")
	k.apply(t, kubeObjects, k.endpoints("ready"))
	if out, err := kubectl(t, k.cluster.Kubeconfig, "", "create", "secret", "tls", "app-tls", "--cert", certs("app.example.com.crt"), "--key", certs("app.example.com.key")); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	k.apply(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: secure, namespace: default}
spec:
  listener:
    address: 127.0.0.1
    port: {{.Port}}
    protocol: HTTPS
    hostnames: [app.example.com]
    tls: {certificates: [{secretName: app-tls}]}
  backends:
    - name: web
      service: {name: web, port: 80}
`, map[string]any{"Port": k.port})
	c := httpsClient(t, k.port)
	eventually(t, 30*time.Second, "https://app.example.com answers with the Secret's certificate", func() error {
		resp, err := c.Get("https://app.example.com/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "k1" || resp.TLS.PeerCertificates[0].DNSNames[0] != "app.example.com" {
			return fmt.Errorf("status %d backend %q", resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		return nil
	})
	eventually(t, 10*time.Second, "ResolvedRefs is True", func() error {
		out, _ := kubectl(t, k.cluster.Kubeconfig, "", "get", "lbp", "secure", "-o", `jsonpath={.status.conditions[?(@.type=="ResolvedRefs")].status}`)
		if out != "True" {
			return fmt.Errorf("ResolvedRefs = %q", out)
		}
		return nil
	})
}
