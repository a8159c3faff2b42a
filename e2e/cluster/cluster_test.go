//go:build cluster

// Package cluster tests the Helm chart as users install it, on a real cluster: real pods from the chart's
// images, Services, cluster DNS, kube-proxy, the kubelet's probes. It runs against any cluster the
// KUBECONFIG environment variable names: `make test-cluster` starts the one-node cluster of hack/cluster,
// runs it and stops the cluster; e2e/kind/run.sh does the same on a kind cluster where Docker runs.
//
//	KUBECONFIG=$(hack/cluster/cluster.sh kubeconfig) go test -tags cluster -race -count=1 -v ./e2e/cluster
//
// Images are not pulled: the cluster must have them (hack/cluster imports them; run.sh loads them into kind).
// LBPLANE_CLUSTER_K6_IMAGE and LBPLANE_CLUSTER_CLIENT_IMAGE (bash and cat, the in-cluster HTTP client) name
// the k6 and client images when they differ from this cluster's; LBPLANE_CLUSTER_NODE_ADDRESS is where the
// host reaches NodePorts (default: the node's InternalIP). The docs' cluster blocks, TestCluster's install,
// name make cluster's kubeconfig (.run/cluster/kubeconfig of the checkout) and node address: on another
// cluster the test fails saying so.
package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/docblocks"
	"github.com/lbplane/lbplane/internal/tools"
)

const (
	namespace = "lbplane"
	release   = "lbplane"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type cluster struct {
	kubeconfig string
	helm       string
	kubectl    string
	root       string
	dumped     bool
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		t.Fatal("KUBECONFIG is not set: run `make test-cluster`, or `make cluster` and export the KUBECONFIG line it prints")
	}
	c := &cluster{kubeconfig: kc, helm: tools.Require(t, "helm"), kubectl: tools.Require(t, "kubectl"), root: tools.RepoRoot()}
	if out, err := c.run("", "get", "--raw", "/readyz"); err != nil {
		t.Fatalf("the cluster in KUBECONFIG=%s does not answer: %v\n%s", kc, err, out)
	}
	return c
}

func (c *cluster) run(stdin string, args ...string) (string, error) {
	cmd := exec.Command(c.kubectl, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *cluster) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := c.run(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *cluster) helmRun(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.helm, append(args, "--kubeconfig", c.kubeconfig)...)
	cmd.Dir = c.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cleanup registers f to run when t ends, after dump: what failed is logged before f deletes it.
func (c *cluster) cleanup(t *testing.T, f func()) {
	t.Cleanup(func() {
		c.dump(t)
		f()
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("timed out after %s waiting until %s: %v", timeout, what, err)
}

// dump logs what a failed test needs, once: the pods, events and the logs of the release's pods.
func (c *cluster) dump(t *testing.T) {
	if !t.Failed() || c.dumped {
		return
	}
	c.dumped = true
	out, _ := c.run("", "get", "pods", "-A", "-o", "wide")
	t.Logf("kubectl get pods -A:\n%s", out)
	out, _ = c.run("", "-n", namespace, "get", "events", "--sort-by=.lastTimestamp")
	t.Logf("events in %s:\n%s", namespace, out)
	for _, sel := range []string{"app.kubernetes.io/component=control-plane", "app.kubernetes.io/component=envoy"} {
		out, _ = c.run("", "-n", namespace, "logs", "-l", sel, "--tail=40", "--all-containers", "--prefix")
		t.Logf("logs of %s:\n%s", sel, out)
	}
	// The test's own pods: backends, peers, k6 Jobs.
	for _, sel := range []string{"app", "job-name"} {
		out, _ = c.run("", "-n", "default", "logs", "-l", sel, "--tail=20", "--all-containers", "--prefix")
		t.Logf("logs of the pods in default with label %s:\n%s", sel, out)
	}
}

// fresh removes what an earlier run left (a policy would show the status an earlier lbplane wrote) and
// registers the removal of what this test installs: the release's namespace and the sample backends.
func (c *cluster) fresh(t *testing.T) {
	t.Helper()
	backends := filepath.Join(c.root, "e2e", "kind", "backends.yaml")
	c.run("", "delete", "-f", backends, "--ignore-not-found", "--wait=true", "--timeout=120s")
	c.helmUninstall()
	c.run("", "delete", "namespace", namespace, "--ignore-not-found", "--wait=true", "--timeout=120s")
	t.Cleanup(func() { c.dump(t) })
	c.cleanup(t, func() {
		c.run("", "delete", "-f", backends, "--wait=false")
		c.helmUninstall()
		c.run("", "delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
	})
}

func (c *cluster) helmUninstall() {
	cmd := exec.Command(c.helm, "uninstall", release, "-n", namespace, "--ignore-not-found", "--wait", "--timeout", "2m", "--kubeconfig", c.kubeconfig)
	cmd.Run()
}

// installed checks what the docs' install left: every pod of the release Ready (the chart's defaults: 2 lbplane
// replicas and 2 Envoys), the sample backends Available and the policy demo Programmed.
func (c *cluster) installed(t *testing.T) {
	t.Helper()
	eventually(t, 5*time.Minute, "every pod of the release is Ready", func() error {
		out, err := c.run("", "-n", namespace, "get", "pods", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return fmt.Errorf("%v %s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 {
			return fmt.Errorf("want 4 pods:\n%s", out)
		}
		for _, l := range lines {
			if !strings.HasSuffix(l, " True") {
				return fmt.Errorf("not Ready: %s", l)
			}
		}
		return nil
	})
	c.must(t, "", "wait", "--for=condition=Available", "deployment/demo-backend", "--timeout=180s")
	eventually(t, 2*time.Minute, "kubectl get lbp shows demo Programmed", func() error {
		out, err := c.run("", "get", "lbp", "demo", "-o", `jsonpath={.status.conditions[?(@.type=="Programmed")].status}`)
		if err != nil || out != "True" {
			return fmt.Errorf("Programmed=%q %v", out, err)
		}
		return nil
	})
	c.demoHealthy(t)
	out, _ := c.run("", "get", "lbp")
	t.Logf("kubectl get lbp:\n%s", out)
}

// demoHealthy waits until the demo policy's status, summed up from every Envoy's stats, has its 3 backend
// pods healthy and none ejected: the active health checks pass against the real pods.
func (c *cluster) demoHealthy(t *testing.T) {
	t.Helper()
	eventually(t, 2*time.Minute, "every Envoy reports the 3 demo backends healthy", func() error {
		out, err := c.run("", "get", "lbp", "demo", "-o", `jsonpath={.status.backends[0].endpoints}`)
		if err != nil {
			return fmt.Errorf("%v %s", err, out)
		}
		var eps struct{ Total, Healthy, Ejected int }
		if err := json.Unmarshal([]byte(out), &eps); err != nil {
			return fmt.Errorf("status.backends[0].endpoints %q: %v", out, err)
		}
		if eps.Total != 3 || eps.Healthy != 3 || eps.Ejected != 0 {
			ejected, _ := c.run("", "get", "lbp", "demo", "-o", `jsonpath={.status.backends[0].ejected}`)
			return fmt.Errorf("endpoints %s; ejected %s", out, ejected)
		}
		return nil
	})
}

// spread counts the X-Backend lines in out (curl -D - style, one header block per request).
func spread(out string) map[string]int {
	got := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && strings.EqualFold(k, "x-backend") {
			got[strings.TrimSpace(v)]++
		}
	}
	return got
}

func checkSpread(t *testing.T, from string, got map[string]int, n int) {
	t.Helper()
	total := 0
	for _, v := range got {
		total += v
	}
	if total != n || len(got) != 3 {
		t.Fatalf("%s: %d requests answered by %v; want all %d answered, by the 3 backends", from, total, got, n)
	}
	t.Logf("%s: %d requests over %v", from, n, got)
}

// fromPod sends n requests to host:port from a pod of its own (the client image's bash, whose /dev/tcp is
// the client) and returns the backends that answered. The pod runs to completion and its log is read after:
// `kubectl run -i` attaches only once the container runs, and loses what a short-lived client wrote before.
func (c *cluster) fromPod(t *testing.T, host string, port, n int) map[string]int {
	t.Helper()
	if host == "" {
		t.Fatal("fromPod: no host to send requests to")
	}
	// Bash built-ins and cat only (the image has no seq); set -e: a command that fails fails the pod.
	script := fmt.Sprintf(`set -e; for ((i = 0; i < %d; i++)); do exec 3<>/dev/tcp/%s/%d
printf 'GET / HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n' >&3; cat <&3; exec 3<&-; echo; done`, n, host, port)
	image := env("LBPLANE_CLUSTER_CLIENT_IMAGE", "lbplane.local/client:dev")
	name := fmt.Sprintf("client-%d", time.Now().UnixNano()%1000000)
	c.must(t, "", "run", name, "-n", "default", "--restart=Never", "--image", image, "--image-pull-policy=Never",
		"--command", "--", "bash", "-c", script)
	defer c.run("", "-n", "default", "delete", "pod", name, "--wait=false")
	var phase string
	eventually(t, 3*time.Minute, "the client pod "+name+" has ended", func() error {
		out, err := c.run("", "-n", "default", "get", "pod", name, "-o", "jsonpath={.status.phase}")
		if phase = strings.TrimSpace(out); err != nil || (phase != "Succeeded" && phase != "Failed") {
			return fmt.Errorf("phase %q %v", phase, err)
		}
		return nil
	})
	out := c.must(t, "", "-n", "default", "logs", name)
	if phase != "Succeeded" {
		t.Fatalf("the client pod %s failed (to %s:%d):\n%s", name, host, port, out)
	}
	return spread(out)
}

// envoyPods are the release's Envoy pods that run (name to pod IP).
func (c *cluster) envoyPods(t *testing.T) map[string]string {
	t.Helper()
	out := c.must(t, "", "-n", namespace, "get", "pods", "-l", envoySelector, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.metadata.deletionTimestamp}{"\n"}{end}`)
	pods := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			pods[f[0]] = f[1]
		}
	}
	if len(pods) == 0 {
		t.Fatalf("no Envoy pod runs:\n%s", out)
	}
	return pods
}

// answer sends one request to url with Host host and returns the backend that answered and the status.
func answer(url, host string) (string, int, error) {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	return resp.Header.Get("X-Backend"), resp.StatusCode, nil
}

func (c *cluster) nodeAddress(t *testing.T) string {
	if a := os.Getenv("LBPLANE_CLUSTER_NODE_ADDRESS"); a != "" {
		return a
	}
	return strings.TrimSpace(c.must(t, "", "get", "nodes", "-o", `jsonpath={.items[0].status.addresses[?(@.type=="InternalIP")].address}`))
}

func fromHost(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < n; i++ {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
		got[resp.Header.Get("X-Backend")]++
	}
	return got
}

// TestCluster: the docs' cluster blocks as typed (README.md's Kubernetes quick start: helm install, the sample
// backends and policy applied with kubectl, a request through the NodePort; docs/kubernetes.md's look at the
// pods), every pod Ready and the policy Programmed; traffic through the Envoy Service from a pod (cluster DNS,
// ClusterIP) and from the host (NodePort); the Envoy image without a shell (envoy-image); then k6 as a Job in
// the cluster through Envoy, nginx and HAProxy in
// front of the same backends; then faults under k6 load (a backend pod deleted, the lbplane leader pod deleted,
// a helm upgrade that rolls lbplane, a rolling restart of the Envoys with their preStop drain, a node drain that
// the PodDisruptionBudgets hold), each reporting its failed requests; then an Envoy that starts while lbplane
// is down waits for it without being restarted; then issue 49's attacks of a namespace tenant (tenants), and
// a staged rollout rolled back as lbplane's scraped metrics and the chart's alert rules see it
// (rollback-alert); then issue 45's cookie sessions kept on a deleted pod that its preStop hook keeps
// terminating and serving, its request rate in status falling to 0 once its clients stop
// (draining-sessions); last, docs/kubernetes-reference.md's blocks as typed on a
// fresh release (the image built and imported, install, first policy, a request, the CRD handed to the release),
// then its "In any cluster" block as a reader elsewhere types it (runAnyClusterDocBlocks).
func TestCluster(t *testing.T) {
	c := newCluster(t)
	c.fresh(t)
	ran := map[string]bool{"README.md": true, "docs/kubernetes.md": true, "docs/kubernetes-reference.md": true}
	c.runDocBlocks(t, append(c.clusterDocBlocks(t, "README.md"), c.clusterDocBlocks(t, "docs/kubernetes.md")...))
	c.installed(t)

	t.Run("traffic", func(t *testing.T) {
		// From a pod: by the Service's cluster DNS name (CoreDNS, then kube-proxy's ClusterIP rules), and by
		// the ClusterIP itself.
		svc := fmt.Sprintf("%s-envoy.%s.svc.cluster.local", release, namespace)
		checkSpread(t, "from a pod to "+svc+":80", c.fromPod(t, svc, 80, 30), 30)
		ip := strings.TrimSpace(c.must(t, "", "-n", namespace, "get", "service", release+"-envoy", "-o", "jsonpath={.spec.clusterIP}"))
		if ip == "" || ip == "None" {
			t.Fatalf("the Envoy Service has no ClusterIP: %q", ip)
		}
		checkSpread(t, "from a pod to the Envoy Service's ClusterIP "+ip+":80", c.fromPod(t, ip, 80, 30), 30)

		// The docs install the Envoy Service as a NodePort (nothing here provides load balancers); a
		// LoadBalancer Service, the chart's default, would have one too.
		var s struct {
			Spec struct {
				Type  string
				Ports []struct{ Port, NodePort int }
			}
		}
		if err := json.Unmarshal([]byte(c.must(t, "", "-n", namespace, "get", "service", release+"-envoy", "-o", "json")), &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].NodePort == 0 {
			t.Fatalf("the Envoy Service has no NodePort: %+v", s.Spec)
		}
		url := fmt.Sprintf("http://%s:%d/", c.nodeAddress(t), s.Spec.Ports[0].NodePort)
		checkSpread(t, "from the host to "+url+" ("+s.Spec.Type+" Service's NodePort)", fromHost(t, url, 30), 30)
		t.Logf("kubectl get pods -A:\n%s", c.must(t, "", "get", "pods", "-A"))
	})

	t.Run("envoy-image", func(t *testing.T) { c.envoyImageHasNoShell(t) })
	t.Run("k6", func(t *testing.T) { c.k6Comparison(t) })
	t.Run("faults", func(t *testing.T) { c.faults(t) })
	t.Run("envoy-waits-for-lbplane", func(t *testing.T) { c.envoyWaitsForLbplane(t) })
	t.Run("tenants", func(t *testing.T) { c.tenants(t) })
	t.Run("rollback-alert", func(t *testing.T) { c.rollbackAlert(t) })
	t.Run("draining-sessions", func(t *testing.T) { c.drainingSessions(t) })

	// The reference page is read on its own: its install is the README's, so the release and the sample
	// backends are removed first, as a reader who starts from that page has neither. The Kubernetes blocks
	// of every page must be run here (allClusterBlocksRun).
	t.Run("kubernetes-reference", func(t *testing.T) {
		order, sessions := docblocks.Sessions(c.clusterDocBlocks(t, "docs/kubernetes-reference.md"))
		if len(order) != 2 || order[0] != "main" || sessions["any-cluster"] == nil {
			t.Fatalf("docs/kubernetes-reference.md's cluster blocks: want the sessions main and any-cluster, have %v", order)
		}
		c.run("", "delete", "-f", filepath.Join(c.root, "e2e", "kind", "backends.yaml"), "--ignore-not-found", "--wait=true", "--timeout=120s")
		c.helmUninstall()
		c.runDocBlocks(t, sessions["main"])
		c.installed(t)
		// "In any cluster": a reader elsewhere, with the chart's default values, on a cluster without the
		// release (its pods gone too: the Envoys' preStop drain outlives helm uninstall).
		c.run("", "delete", "-f", filepath.Join(c.root, "e2e", "kind", "backends.yaml"), "--ignore-not-found", "--wait=true", "--timeout=120s")
		c.helmUninstall()
		if out, err := c.run("", "-n", namespace, "wait", "--for=delete", "pods", "--all", "--timeout=120s"); err != nil {
			t.Fatalf("the release's pods did not go after helm uninstall: %v\n%s", err, out)
		}
		c.runAnyClusterDocBlocks(t, sessions["any-cluster"])
	})
	allClusterBlocksRun(t, c.root, ran)
}
