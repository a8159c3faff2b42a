//go:build cluster

package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/envoysidecar"
	"github.com/lbplane/lbplane/internal/promseries"
)

// tenantNS is the namespace the tenant may write in; tenantUser is who the tenant is to the API server: a
// ServiceAccount whose Role allows LoadBalancerPolicies, Services, EndpointSlices, Secrets and Deployments
// in tenantNS only (kubectl --as, as the API server authorizes that ServiceAccount's own token).
const (
	tenantNS   = "team-a"
	tenantUser = "system:serviceaccount:team-a:tenant"
)

const tenantSetup = `
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: tenant, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: tenant, namespace: team-a}
rules:
  - {apiGroups: [lbplane.io], resources: [loadbalancerpolicies], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [""], resources: [services, secrets], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [apps], resources: [deployments, deployments/scale], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: tenant, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: tenant}
subjects: [{kind: ServiceAccount, name: tenant, namespace: team-a}]
`

// tenantBackend is a Deployment of lbplane-backend answering as NAME, and its Service, in team-a.
const tenantBackend = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: team-a}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: backend
          image: ghcr.io/lbplane/lbplane:dev
          imagePullPolicy: Never
          command: [/lbplane-backend, --listen, "0.0.0.0:8080", --name, NAME]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 2}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: NAME, namespace: team-a}
spec:
  selector: {app: NAME}
  ports: [{name: http, port: 80, targetPort: http}]
`

// asTenant runs kubectl as the tenant.
func (c *cluster) asTenant(stdin string, args ...string) (string, error) {
	return c.run(stdin, append([]string{"--as", tenantUser}, args...)...)
}

func (c *cluster) mustTenant(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := c.asTenant(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl as the tenant %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// condition reads a policy's condition as "status reason: message".
func (c *cluster) condition(ns, name, typ string) string {
	q := fmt.Sprintf(`{.status.conditions[?(@.type==%q)]`, typ)
	out, err := c.run("", "-n", ns, "get", "lbp", name, "-o", "jsonpath="+q+".status} "+q+".reason}: "+q+".message}")
	if err != nil {
		return fmt.Sprintf("kubectl: %v %s", err, out)
	}
	return out
}

// waitCondition waits until a policy's condition starts with want ("False HostnameConflict", or "False" for
// any reason) and its message holds every part.
func (c *cluster) waitCondition(t *testing.T, ns, name, typ, want string, parts ...string) string {
	t.Helper()
	var got string
	eventually(t, 2*time.Minute, fmt.Sprintf("%s/%s is %s %s", ns, name, typ, want), func() error {
		got = c.condition(ns, name, typ)
		if !strings.HasPrefix(got, want+":") && !strings.HasPrefix(got, want+" ") {
			return fmt.Errorf("%s", got)
		}
		for _, p := range parts {
			if !strings.Contains(got, p) {
				return fmt.Errorf("%s (no %q)", got, p)
			}
		}
		return nil
	})
	t.Logf("%s/%s %s: %s", ns, name, typ, got)
	return got
}

// policyStatus reads a policy's status.
func (c *cluster) policyStatus(t *testing.T, ns, name string) v1alpha1.LoadBalancerPolicyStatus {
	t.Helper()
	var st v1alpha1.LoadBalancerPolicyStatus
	out := c.must(t, "", "-n", ns, "get", "lbp", name, "-o", "jsonpath={.status}")
	if out != "" {
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status of %s/%s %q: %v", ns, name, out, err)
		}
	}
	return st
}

// envoyRestarts are the restart counts of the containers of each of the release's Envoy pods ("init/main").
func (c *cluster) envoyRestarts(t *testing.T) map[string]string {
	t.Helper()
	out := c.must(t, "", "-n", namespace, "get", "pods", "-l", envoySelector, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.initContainerStatuses[*].restartCount}/{.status.containerStatuses[*].restartCount}{"\n"}{end}`)
	counts := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, n, ok := strings.Cut(l, " "); ok {
			counts[name] = n
		}
	}
	return counts
}

// restarted names the pods of after that restarted a container since before (new pods: since they started).
func restarted(before, after map[string]string) []string {
	var out []string
	for name, n := range after {
		if was, ok := before[name]; (ok && was != n) || (!ok && strings.Trim(n, "0 /") != "") {
			out = append(out, name+" "+before[name]+" -> "+n)
		}
	}
	slices.Sort(out)
	return out
}

// waitAnswers waits until a request to url (Host host) is answered 200 by a backend whose name starts with
// prefix.
func waitAnswers(t *testing.T, url, host, prefix string) {
	t.Helper()
	eventually(t, 90*time.Second, url+" (Host "+host+") is answered by "+prefix, func() error {
		b, code, err := answer(url, host)
		if err != nil || code != 200 || !strings.HasPrefix(b, prefix) {
			return fmt.Errorf("answered %d by %q: %v", code, b, err)
		}
		return nil
	})
}

// tenants: issue 49's attacks that have a Kubernetes form, made by a namespace tenant against the chart as
// the README installs it, each asserted on what a client sees: status conditions, requests through the
// Envoy pods, the Envoy pods' readiness and restarts, and the sidecars' logs.
func (c *cluster) tenants(t *testing.T) {
	c.must(t, tenantSetup, "apply", "-f", "-")
	c.cleanup(t, func() {
		c.run("", "delete", "namespace", tenantNS, "--ignore-not-found", "--wait=true", "--timeout=120s")
	})
	// The tenant's rights: its namespace, not default's.
	for _, q := range []struct{ ns, want string }{{tenantNS, "yes"}, {"default", "no"}, {namespace, "no"}} {
		out, _ := c.run("", "auth", "can-i", "patch", "loadbalancerpolicies.lbplane.io", "-n", q.ns, "--as", tenantUser)
		if strings.TrimSpace(out) != q.want {
			t.Fatalf("can the tenant patch LoadBalancerPolicies in %s: %q, want %s", q.ns, out, q.want)
		}
	}
	c.mustTenant(t, strings.NewReplacer("NAME", "tenant", "REPLICAS", "1").Replace(tenantBackend), "apply", "-f", "-")
	c.mustTenant(t, "", "-n", tenantNS, "rollout", "status", "deployment/tenant", "--timeout=180s")
	envoys := c.envoyPods(t)
	restartsBefore := c.envoyRestarts(t)
	nodePort := strings.TrimSpace(c.must(t, "", "-n", namespace, "get", "service", release+"-envoy", "-o", `jsonpath={.spec.ports[?(@.port==80)].nodePort}`))
	shared := fmt.Sprintf("http://%s:%s/", c.nodeAddress(t), nodePort)

	t.Run("host-names", func(t *testing.T) {
		// default/demo serves every host name on the shared port 10080 (the Envoy Service's port 80). The
		// tenant names app.example.com, then *.example.com, on the same port.
		for _, p := range []struct{ name, host string }{{"ta", "app.example.com"}, {"tw", "*.example.com"}} {
			c.mustTenant(t, fmt.Sprintf(`
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: %s, namespace: team-a}
spec:
  listener: {port: 10080, protocol: HTTP, hostnames: [%q]}
  backends: [{name: app, service: {name: tenant, port: 80}}]
`, p.name, p.host), "apply", "-f", "-")
		}
		c.waitCondition(t, tenantNS, "ta", "Accepted", "False HostnameConflict", `host name "app.example.com" on port 10080`, "policy default/demo")
		c.waitCondition(t, tenantNS, "tw", "Accepted", "False HostnameConflict", `host name "*.example.com"`, "policy default/demo")
		// Requests for those names still reach default/demo's backends, through the NodePort and each Envoy.
		targets := []string{shared}
		for _, ip := range envoys {
			targets = append(targets, fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "10080")))
		}
		for _, url := range targets {
			for _, host := range []string{"app.example.com", "www.example.com"} {
				for i := 0; i < 10; i++ {
					if b, code, err := answer(url, host); err != nil || code != 200 || !strings.HasPrefix(b, "demo-backend-") {
						t.Fatalf("%s with Host %s: answered %d by %q (%v), want default/demo's backends", url, host, code, b, err)
					}
				}
			}
		}
	})

	t.Run("rollouts-apart", func(t *testing.T) { c.tenantRolloutsApart(t) })

	t.Run("no-loops", func(t *testing.T) {
		// A Service of the tenant's whose EndpointSlice names an Envoy pod's address, and a policy naming
		// that address itself (the README's install allows address backends in no namespace).
		var pod, ip string
		for pod, ip = range envoys {
			break
		}
		c.mustTenant(t, fmt.Sprintf(`
apiVersion: v1
kind: Service
metadata: {name: self, namespace: team-a}
spec:
  ports: [{name: http, port: 80, targetPort: 10080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: self-1, namespace: team-a, labels: {kubernetes.io/service-name: self}}
addressType: IPv4
ports: [{name: http, port: 10080, protocol: TCP}]
endpoints: [{addresses: [%q], conditions: {ready: true}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: loop, namespace: team-a}
spec:
  listener: {port: 10096, protocol: HTTP}
  backends: [{name: app, service: {name: self, port: 80}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: loop-address, namespace: team-a}
spec:
  listener: {port: 10097, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: %q, port: 10080}]}]
`, ip, ip), "apply", "-f", "-")
		c.waitCondition(t, tenantNS, "loop", "ResolvedRefs", "False BackendNotFound", "Service team-a/self: "+ip+" is an address of the Envoy's or lbplane's own host")
		c.waitCondition(t, tenantNS, "loop-address", "Accepted", "False", "spec.backends[0].endpoints[0].address")
		// Envoy serves the loop policy's port with no endpoint: 503 at once, no request goes round.
		c.waitCondition(t, tenantNS, "loop", "Programmed", "True Programmed")
		for name, ip := range envoys {
			url := fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "10096"))
			for i := 0; i < 20; i++ {
				if b, code, err := answer(url, "loop"); err != nil || code != http.StatusServiceUnavailable {
					t.Fatalf("Envoy %s, the loop policy's port: answered %d by %q (%v), want 503 (no endpoint)", name, code, b, err)
				}
			}
		}
		t.Logf("the Envoy pod %s (%s) is not a backend of the tenant's", pod, ip)
	})

	t.Run("programmed-means-served", func(t *testing.T) { c.tenantProgrammedMeansServed(t, envoys) })

	t.Run("identity", func(t *testing.T) { c.podIdentity(t, shared) })

	// The Envoys never restarted; every one is Ready and serves demo.
	if t.Failed() {
		return
	}
	now := c.envoyPods(t)
	for name, ip := range now {
		c.must(t, "", "-n", namespace, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s")
		waitAnswers(t, fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "10080")), "demo", "demo-backend-")
	}
	if r := restarted(restartsBefore, c.envoyRestarts(t)); len(r) > 0 {
		t.Errorf("Envoy pods restarted during the tenant's attacks: %v", r)
	}
}

// stagedPolicy is a policy with staged rollouts over the Service svc: a change goes to one Envoy first and
// bakes 10 minutes, so that it is under way while the test looks. gen1 is applied at once (rollout-mode).
const stagedPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata:
  name: NAME
  namespace: NS
  annotations: {ANNOTATIONS}
spec:
  listener: {port: PORT, protocol: HTTP}
  rollout:
    stages: [{envoys: 1}, {percent: 100}]
    bakeTime: 10m
    analysis: {minRequests: 20}
  backends:
    - name: app
      loadBalancing: {algorithm: ALGORITHM}
      service: {name: SVC, port: 80}
`

func staged(name, ns, port, svc, algorithm, annotations string) string {
	return strings.NewReplacer("NAME", name, "NS", ns, "PORT", port, "SVC", svc, "ALGORITHM", algorithm, "ANNOTATIONS", annotations).Replace(stagedPolicy)
}

// tenantRolloutsApart: the tenant's policy and one of default's both have a staged change under way; the
// tenant aborts its own with the lbplane.io/rollout-abort annotation. Its rollout ends Aborted; default's
// stays as it was (phase, stage, its start, canaries, conditions), and the tenant cannot annotate
// default's policy.
func (c *cluster) tenantRolloutsApart(t *testing.T) {
	c.mustTenant(t, staged("tr", tenantNS, "10098", "tenant", "RoundRobin", `lbplane.io/rollout-mode: "1"`), "apply", "-f", "-")
	c.must(t, staged("dr", "default", "10099", "demo-backend", "RoundRobin", `lbplane.io/rollout-mode: "1"`), "apply", "-f", "-")
	c.cleanup(t, func() { c.run("", "-n", "default", "delete", "lbp", "dr", "--ignore-not-found") })
	for _, p := range [][2]string{{tenantNS, "tr"}, {"default", "dr"}} {
		c.waitCondition(t, p[0], p[1], "Programmed", "True Programmed")
	}
	// The staged changes: both go to their first stage's canary and bake.
	c.mustTenant(t, staged("tr", tenantNS, "10098", "tenant", "LeastRequest", ""), "apply", "-f", "-")
	c.must(t, staged("dr", "default", "10099", "demo-backend", "LeastRequest", ""), "apply", "-f", "-")
	var before v1alpha1.LoadBalancerPolicyStatus
	for _, p := range [][2]string{{tenantNS, "tr"}, {"default", "dr"}} {
		eventually(t, 2*time.Minute, p[0]+"/"+p[1]+"'s staged change is at its first stage", func() error {
			st := c.policyStatus(t, p[0], p[1])
			if r := st.Rollout; r == nil || r.CandidateGeneration != 2 || r.Phase != v1alpha1.RolloutProgressing || r.Stage != 1 || len(r.Canaries) != 1 || r.StageStarted == nil {
				return fmt.Errorf("status.rollout %+v", st.Rollout)
			}
			before = st
			return nil
		})
	}
	drConditions := func(st v1alpha1.LoadBalancerPolicyStatus) string {
		var out []string
		for _, cnd := range st.Conditions {
			out = append(out, cnd.Type+"="+string(cnd.Status)+"/"+cnd.Reason)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	// The tenant cannot touch default's policy; it aborts its own.
	if out, err := c.asTenant("", "-n", "default", "annotate", "lbp", "dr", "lbplane.io/rollout-abort=2"); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("the tenant annotated default/dr: %v %s", err, out)
	}
	c.mustTenant(t, "", "-n", tenantNS, "annotate", "lbp", "tr", "lbplane.io/rollout-abort=2")
	eventually(t, time.Minute, "team-a/tr's rollout is aborted", func() error {
		if r := c.policyStatus(t, tenantNS, "tr").Rollout; r == nil || r.Phase != v1alpha1.RolloutAborted {
			return fmt.Errorf("status.rollout %+v", r)
		}
		return nil
	})
	// Several of the elected replica's one-second rounds after the abort: default/dr is untouched.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		after := c.policyStatus(t, "default", "dr")
		a, b := after.Rollout, before.Rollout
		if a == nil || a.Phase != v1alpha1.RolloutProgressing || a.CandidateGeneration != 2 || a.Stage != 1 || !slices.Equal(a.Canaries, b.Canaries) ||
			a.StageStarted == nil || !a.StageStarted.Equal(b.StageStarted) || drConditions(after) != drConditions(before) {
			t.Fatalf("the tenant's abort changed default/dr: before %+v %s, after %+v %s", b, drConditions(before), a, drConditions(after))
		}
		time.Sleep(time.Second)
	}
	if got := c.condition("default", "demo", "Programmed"); !strings.HasPrefix(got, "True Programmed:") {
		t.Errorf("default/demo after the tenant's abort: Programmed %s", got)
	}
	t.Logf("team-a/tr aborted; default/dr still %s at stage %d since %s, canaries %v", before.Rollout.Phase, before.Rollout.Stage,
		before.Rollout.StageStarted, before.Rollout.Canaries)
}

// selfSigned writes a certificate and key for host into dir and returns their paths and a pool trusting it.
func selfSigned(t *testing.T, dir, host string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// tenantProgrammedMeansServed: a policy whose TLS Secret is missing is not Programmed, and its port does not
// answer, until the tenant creates the Secret; a policy whose backend has no ready pod is Programmed but not
// Ready, the condition the README waits for, and right after kubectl wait --for=condition=Ready returns, the
// next request through every Envoy is answered by the backend.
func (c *cluster) tenantProgrammedMeansServed(t *testing.T, envoys map[string]string) {
	const host = "secure.team-a.test"
	c.mustTenant(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: secure, namespace: team-a}
spec:
  listener:
    port: 10443
    protocol: HTTPS
    hostnames: [secure.team-a.test]
    tls: {certificates: [{secretName: secure-tls}]}
  backends: [{name: app, service: {name: tenant, port: 80}}]
`, "apply", "-f", "-")
	c.waitCondition(t, tenantNS, "secure", "ResolvedRefs", "False InvalidReference", "secure-tls")
	c.waitCondition(t, tenantNS, "secure", "Programmed", "False NotServed", "secure-tls")
	c.waitCondition(t, tenantNS, "secure", "Ready", "False")
	certFile, keyFile, pool := selfSigned(t, t.TempDir(), host)
	httpsGet := func(ip string) (string, int, error) {
		client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{ServerName: host, RootCAs: pool},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(ip, "10443"))
			}}}
		resp, err := client.Get("https://" + host + "/")
		if err != nil {
			return "", 0, err
		}
		resp.Body.Close()
		return resp.Header.Get("X-Backend"), resp.StatusCode, nil
	}
	for name, ip := range envoys {
		if b, code, err := httpsGet(ip); err == nil {
			t.Fatalf("Envoy %s answers the policy whose Secret is missing: %d by %q", name, code, b)
		}
	}
	c.mustTenant(t, "", "-n", tenantNS, "create", "secret", "tls", "secure-tls", "--cert", certFile, "--key", keyFile)
	c.waitCondition(t, tenantNS, "secure", "Programmed", "True Programmed")
	for name, ip := range envoys {
		eventually(t, time.Minute, "Envoy "+name+" serves https://"+host, func() error {
			if b, code, err := httpsGet(ip); err != nil || code != 200 || b != "tenant" {
				return fmt.Errorf("answered %d by %q: %v", code, b, err)
			}
			return nil
		})
	}

	// No ready pod behind the Service yet: Programmed, not Ready.
	c.mustTenant(t, strings.NewReplacer("NAME", "late", "REPLICAS", "0").Replace(tenantBackend)+`
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: late, namespace: team-a}
spec:
  listener: {port: 10095, protocol: HTTP}
  backends:
    - name: app
      healthCheck: {active: {type: HTTP, interval: 2s, http: {path: /healthz}}}
      service: {name: late, port: 80}
`, "apply", "-f", "-")
	c.waitCondition(t, tenantNS, "late", "Programmed", "True Programmed")
	c.waitCondition(t, tenantNS, "late", "Ready", "False")
	c.mustTenant(t, "", "-n", tenantNS, "scale", "deployment/late", "--replicas=1")
	// As the README waits; then at once one request through each Envoy.
	c.must(t, "", "-n", tenantNS, "wait", "lbp/late", "--for=condition=Ready", "--timeout=3m")
	for name, ip := range envoys {
		if b, code, err := answer(fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "10095")), "late"); err != nil || code != 200 || b != "late" {
			t.Errorf("Envoy %s right after kubectl wait --for=condition=Ready: answered %d by %q (%v)", name, code, b, err)
		}
	}
}

// lbctl builds lbctl into a folder of the test's.
func (c *cluster) lbctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lbctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/lbctl")
	build.Dir = c.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lbctl: %v\n%s", err, out)
	}
	return bin
}

// sidecarLog is the identity lines of an Envoy pod's init container and sidecar.
func (c *cluster) sidecarLog(t *testing.T, pod string) string {
	t.Helper()
	var out []string
	for _, ctr := range []string{"envoy-identity", "envoy-sidecar"} {
		l, _ := c.run("", "-n", namespace, "logs", pod, "-c", ctr)
		for _, line := range strings.Split(l, "\n") {
			if strings.Contains(line, "certificate") {
				out = append(out, ctr+": "+line)
			}
		}
	}
	return strings.Join(out, "\n")
}

// podIdentity: each Envoy pod runs with a certificate for its own pod; a token cannot obtain another pod's
// identity, and the tenant's own token none; revoking the group gives every pod a new certificate without a
// restart; revoking one pod cuts off that pod alone.
func (c *cluster) podIdentity(t *testing.T, shared string) {
	lbctl := c.lbctl(t)
	lbctlRun := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(lbctl, append([]string{"--kubeconfig", c.kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("lbctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	envoys := c.envoyPods(t)
	names := make([]string, 0, len(envoys))
	for name := range envoys {
		names = append(names, name)
		if l := c.sidecarLog(t, name); !strings.Contains(l, "obtained this Envoy's certificate") || !strings.Contains(l, `"node":"`+name+`"`) {
			t.Fatalf("Envoy pod %s's sidecar did not obtain a certificate for its own pod:\n%s", name, l)
		}
	}
	slices.Sort(names)
	if len(names) < 2 {
		t.Fatalf("Envoy pods %v: revoking one pod alone needs another that keeps serving (the chart's envoy.replicas is 2)", names)
	}
	// With per-pod identity there is no group certificate: lbplane's Role does not let it write its Secret
	// (read it may, as any Secret a policy could name).
	lbplaneSA := "system:serviceaccount:" + namespace + ":" + release
	for secret, want := range map[string]string{release + "-envoy-tls": "no", release + "-ca": "yes"} {
		if out, _ := c.run("", "-n", namespace, "auth", "can-i", "update", "secret/"+secret, "--as", lbplaneSA); strings.TrimSpace(out) != want {
			t.Errorf("may lbplane update the Secret %s: %q, want %s", secret, strings.TrimSpace(out), want)
		}
	}

	// What lbplane issues against a pod's token: the pod's name, whatever the request; nothing for another
	// service account's token (the tenant's backend pod's) or a token bound to no pod.
	lbplanePod := c.podNames(t, namespace, lbplaneSelector)[0]
	lbplaneIP := strings.TrimSpace(c.must(t, "", "-n", namespace, "get", "pod", lbplanePod, "-o", "jsonpath={.status.podIP}"))
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, []byte(c.must(t, "", "-n", namespace, "get", "configmap", release+"-ca", "-o", `jsonpath={.data.ca\.crt}`)), 0o600); err != nil {
		t.Fatal(err)
	}
	obtain := func(ns, sa string, bound ...string) (*x509.Certificate, error) {
		args := []string{"-n", ns, "create", "token", sa, "--audience", "lbplane", "--duration", "10m"}
		if len(bound) == 2 {
			args = append(args, "--bound-object-kind", "Pod", "--bound-object-name", bound[0], "--bound-object-uid", bound[1])
		}
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(strings.TrimSpace(c.must(t, "", args...))), 0o600); err != nil {
			t.Fatal(err)
		}
		a := &envoysidecar.Identity{URL: "https://" + net.JoinHostPort(lbplaneIP, "18001"), TokenFile: tokenFile, CAFile: caFile,
			ServerName: release + "-xds." + namespace + ".svc", Dir: t.TempDir()}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return a.Obtain(ctx)
	}
	uid := func(ns, pod string) string {
		return strings.TrimSpace(c.must(t, "", "-n", ns, "get", "pod", pod, "-o", "jsonpath={.metadata.uid}"))
	}
	cert, err := obtain(namespace, release+"-envoy", names[0], uid(namespace, names[0]))
	if err != nil || cert.Subject.CommonName != names[0] || !slices.Equal(cert.Subject.OrganizationalUnit, []string{"default"}) {
		t.Fatalf("pod %s's token: %v, %+v; want a certificate for node %s of group default", names[0], err, cert, names[0])
	}
	tenantPod := c.podNames(t, tenantNS, "app=tenant")[0]
	if _, err := obtain(tenantNS, "default", tenantPod, uid(tenantNS, tenantPod)); err == nil || !strings.Contains(err.Error(), "not an Envoy service account") {
		t.Errorf("the tenant's backend pod's token: %v, want a refusal (not an Envoy service account)", err)
	}
	if _, err := obtain(namespace, release+"-envoy"); err == nil || !strings.Contains(err.Error(), "not bound to a pod") {
		t.Errorf("an Envoy service account token bound to no pod: %v, want a refusal (not bound to a pod)", err)
	}

	// A new policy of the tenant's on port PORT: every Envoy in want answers it, and (after those) none in
	// notWant does.
	served := func(name, port string, want, notWant []string) {
		t.Helper()
		c.mustTenant(t, fmt.Sprintf(`
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: %s, namespace: team-a}
spec:
  listener: {port: %s, protocol: HTTP}
  backends: [{name: app, service: {name: tenant, port: 80}}]
`, name, port), "apply", "-f", "-")
		for _, pod := range want {
			waitAnswers(t, fmt.Sprintf("http://%s/", net.JoinHostPort(envoys[pod], port)), name, "tenant")
		}
		for _, pod := range notWant {
			if b, code, err := answer(fmt.Sprintf("http://%s/", net.JoinHostPort(envoys[pod], port)), name); err == nil {
				t.Errorf("the revoked Envoy %s got the policy made after its revocation: %d by %q", pod, code, b)
			}
		}
	}

	// The group revoked: every sidecar sees its certificate refused at its next check (30 s), gets a new
	// one, and its Envoy reconnects with it without a restart.
	restarts := c.envoyRestarts(t)
	lbctlRun("revoke", "--group", "default")
	for _, name := range names {
		eventually(t, 2*time.Minute, "pod "+name+"'s sidecar replaces its revoked certificate", func() error {
			l := c.sidecarLog(t, name)
			i := strings.Index(l, "replacing this Envoy's certificate")
			if i < 0 || !strings.Contains(l[i:], "obtained this Envoy's certificate") || !strings.Contains(l[i:], `"node":"`+name+`"`) {
				return fmt.Errorf("identity log:\n%s", l)
			}
			return nil
		})
	}
	served("after-group", "10100", names, nil)
	if r := restarted(restarts, c.envoyRestarts(t)); len(r) > 0 {
		t.Errorf("the Envoy pods restarted for their new certificates: %v", r)
	}

	// One pod revoked: it alone is cut off (it keeps what it has, gets nothing new); the other gets changes.
	revoked, other := names[0], names[1:]
	targets := c.metricsTargets(t)
	inForce := func(samples []promseries.Sample) float64 {
		for _, s := range samples {
			if s.Name == "lbplane_revocations_in_force" {
				return s.Value
			}
		}
		return -1
	}
	before, err := scrapeAll(targets)
	if err != nil {
		t.Fatal(err)
	}
	lbctlRun("revoke", "--node", revoked)
	// Every replica reads the revocation (each reads them every 2 s; until then one may take the node's
	// reconnection and serve it what it has) and closes its connection: each counts one more revocation in
	// force, and none reports the node connected.
	eventually(t, time.Minute, "every lbplane replica enforces the revocation of "+revoked+" and none has it connected", func() error {
		scrapes, err := scrapeAll(targets)
		if err != nil {
			return err
		}
		for tg, samples := range scrapes {
			if n, was := inForce(samples), inForce(before[tg]); n <= was {
				return fmt.Errorf("%s has %v revocations in force, %v before", tg, n, was)
			}
			for _, s := range samples {
				if s.Name == "lbplane_proxy_sync" && s.Labels["node"] == revoked && s.Value == 1 {
					return fmt.Errorf("%s reports it %s", tg, s.Labels["state"])
				}
			}
		}
		return nil
	})
	served("after-node", "10101", other, []string{revoked})
	for _, pod := range other {
		waitAnswers(t, fmt.Sprintf("http://%s/", net.JoinHostPort(envoys[pod], "10080")), "demo", "demo-backend-")
	}
	for i := 0; i < 10; i++ {
		if b, code, err := answer(shared, "demo"); err != nil || code != 200 {
			t.Fatalf("through the NodePort after revoking %s: %d by %q: %v", revoked, code, b, err)
		}
	}
	if l := c.sidecarLog(t, revoked); !strings.Contains(l, "revoked") {
		t.Logf("the revoked pod's sidecar (its next check is within 30 s):\n%s", l)
	}
	// The revoked pod is replaced by a pod of another name, which gets its own certificate.
	c.must(t, "", "-n", namespace, "delete", "pod", revoked, "--wait=false")
	c.must(t, "", "-n", namespace, "rollout", "status", "deployment/"+release+"-envoy", "--timeout=180s")
	eventually(t, 2*time.Minute, "the revoked pod is gone", func() error {
		if _, ok := c.envoyPods(t)[revoked]; ok {
			return fmt.Errorf("%s still there", revoked)
		}
		return nil
	})
	for name, ip := range c.envoyPods(t) {
		c.must(t, "", "-n", namespace, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=180s")
		waitAnswers(t, fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "10101")), "after-node", "tenant")
	}
}
