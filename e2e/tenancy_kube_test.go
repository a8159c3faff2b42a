package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/kubetest"
)

// tenantPolicy is a policy of namespace .NS on port .Port naming .Hosts (none: every host), served by the
// backend on loopback port .Backend.
const tenantPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}, namespace: {{.NS}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP{{if .Hosts}}, hostnames: [{{.Hosts}}]{{end}}}
  backends:
    - name: web
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`

// TestHostNamesBelongToNamespacesKube is issue 49's first attack, against a real kube-apiserver and Envoy:
// default/demo serves a shared port with no host names; a tenant writing policies in team-a names
// app.example.com, then *.example.com, on the same port. lbplane accepts neither (Accepted=False,
// HostnameConflict, naming default/demo) and demo keeps every host. A tenant that pre-claims a name on a port
// holds it against later policies of other namespaces, until the operator delegates it (--tenancy-file):
// then the delegated namespace gets it, the tenant's policy becomes NotAllowed, and a name delegated to
// team-a under demo's catch-all is carved out of it.
func TestHostNamesBelongToNamespacesKube(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	kc := cluster.Kubeconfig
	demo, tenant := startBackend(t, "demo", 0), startBackend(t, "tenant", 0)
	shared, other := reservePort(t), reservePort(t)
	if out, err := kubectl(t, kc, "", "create", "namespace", "team-a"); err != nil {
		t.Fatalf("kubectl create namespace: %v %s", err, out)
	}
	args := []string{"--kubernetes", "--kubeconfig", kc, "--address-backends-namespaces", "*"}
	l := startLbplane(t, args...)
	envoy := startEnvoy(t, l, "envoy-tenancy", true)
	apply := func(ns, name string, port int, backend *Backend, hosts ...string) {
		t.Helper()
		quoted := make([]string, len(hosts))
		for i, h := range hosts {
			quoted[i] = fmt.Sprintf("%q", h)
		}
		kubeApply(t, kc, tenantPolicy, map[string]any{"NS": ns, "Name": name, "Port": port, "Backend": backend.Port, "Hosts": strings.Join(quoted, ", ")})
	}
	sharedURL, otherURL := fmt.Sprintf("http://127.0.0.1:%d/", shared), fmt.Sprintf("http://127.0.0.1:%d/", other)
	servedBy := func(url, host, want string) {
		t.Helper()
		eventually(t, 20*time.Second, host+" is served by "+want, func() error {
			b, err := requestVia(newClient(false), url, map[string]string{"Host": host})
			if err != nil || b != want {
				return fmt.Errorf("answered by %q: %v", b, err)
			}
			return nil
		})
	}

	apply("default", "demo", shared, demo)
	waitCondition(t, kc, "default", "demo", "Accepted", "True Accepted")
	servedBy(sharedURL, "app.example.com", "demo")
	t.Run("a tenant cannot take a host name or a wildcard from another namespace", func(t *testing.T) {
		apply("team-a", "ta", shared, tenant, "app.example.com")
		apply("team-a", "tw", shared, tenant, "*.example.com")
		waitCondition(t, kc, "team-a", "ta", "Accepted", "False HostnameConflict", `host name "app.example.com" on port`, "held by namespace default: policy default/demo claimed every host name")
		waitCondition(t, kc, "team-a", "tw", "Accepted", "False HostnameConflict", `host name "*.example.com"`, "policy default/demo")
		for _, host := range []string{"app.example.com", "www.example.com", "other.test"} {
			if got := newClient(false).Spread(t, sharedURL, 10, map[string]string{"Host": host}); got["demo"] != 10 {
				t.Errorf("%s: %v, want every request on demo", host, got)
			}
		}
	})
	t.Run("the first to claim a name holds it against later namespaces", func(t *testing.T) {
		apply("team-a", "pre", other, tenant, "new.example.com")
		waitCondition(t, kc, "team-a", "pre", "Accepted", "True Accepted")
		// The first claim is the older creationTimestamp, which has whole seconds; within the same second
		// the namespace/name decides, as Gateway API's tie-break does, and default/later would win it. The
		// later policy is made in a later second.
		createdAfter(t, kc, "team-a", "pre")
		apply("default", "later", other, demo, "new.example.com")
		waitCondition(t, kc, "default", "later", "Accepted", "False HostnameConflict", "held by namespace team-a: policy team-a/pre claimed it first")
		servedBy(otherURL, "new.example.com", "tenant")
	})

	t.Run("the operator delegates names; a delegated name is its namespace's", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "tenancy.yaml")
		doc := fmt.Sprintf("delegations:\n  - {namespace: default, ports: [%d], hostnames: [new.example.com]}\n"+
			"  - {namespace: team-a, ports: [%d], hostnames: ['*.team-a.example.com']}\n", other, shared)
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		// lbplane reads the file at start (the chart rolls its pods when tenancy changes).
		l.Kill()
		envoy.Kill()
		l = startLbplane(t, append(args, "--tenancy-file", file)...)
		startEnvoy(t, l, "envoy-tenancy-2", true)
		waitCondition(t, kc, "team-a", "pre", "Accepted", "False NotAllowed", `spec.listener.hostnames[0]: host name "new.example.com" on port`, "is delegated to namespace default")
		waitCondition(t, kc, "default", "later", "Accepted", "True Accepted")
		servedBy(otherURL, "new.example.com", "demo")
		// Under demo's catch-all, team-a's delegated names are team-a's; the rest stays demo's.
		apply("team-a", "own", shared, tenant, "app.team-a.example.com")
		apply("default", "grab", shared, demo, "x.team-a.example.com")
		waitCondition(t, kc, "team-a", "own", "Accepted", "True Accepted")
		waitCondition(t, kc, "default", "grab", "Accepted", "False NotAllowed", "is delegated to namespace team-a")
		servedBy(sharedURL, "app.team-a.example.com", "tenant")
		servedBy(sharedURL, "app.example.com", "demo")
		waitCondition(t, kc, "team-a", "ta", "Accepted", "False HostnameConflict", "policy default/demo")
	})
}

// createdAfter returns once the clock is past the second the policy ns/name was created in, so that an object
// made next is younger by its creationTimestamp (whole seconds).
func createdAfter(t *testing.T, kubeconfig, ns, name string) {
	t.Helper()
	out, err := kubectl(t, kubeconfig, "", "get", "lbp", "-n", ns, name, "-o", "jsonpath={.metadata.creationTimestamp}")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	created, err := time.Parse(time.RFC3339, strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("creationTimestamp %q: %v", out, err)
	}
	time.Sleep(time.Until(created.Add(time.Second))) // at most a second: the policy was just made
}
