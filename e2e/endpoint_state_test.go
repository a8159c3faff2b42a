package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// endpointStatePolicy: round robin over the backends, with active health checks (so that Envoy would keep
// a removed endpoint that passes them) whose healthy threshold the test sets (a push that changes it).
const endpointStatePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: states}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: {{.Threshold}}}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// spreadOver sends n requests and counts them by backend; a failure fails the test.
func spreadOver(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	return newClient(false).Spread(t, url, n, nil)
}

// eventuallySpread waits until n requests reach exactly the backends named in want (each at least once, no
// other).
func eventuallySpread(t *testing.T, url, what string, want ...string) {
	t.Helper()
	eventually(t, 20*time.Second, what, func() error {
		got := map[string]int{}
		c := newClient(false)
		for range 30 {
			b, code, err := doWith(c, url, nil)
			if err != nil || code != 200 {
				return fmt.Errorf("status %d, %v", code, err)
			}
			got[b]++
		}
		if len(got) != len(want) {
			return fmt.Errorf("answered by %v, want %v", got, want)
		}
		for _, w := range want {
			if got[w] == 0 {
				return fmt.Errorf("answered by %v, want %v", got, want)
			}
		}
		return nil
	})
}

// TestEndpointDrainAndMaintenance drains and maintains endpoints of a real Envoy through lbctl: a drained
// endpoint gets no new request while requests under way to it finish, one under maintenance leaves Envoy's
// clusters although it passes its active health checks, both hold through a push of the policy and a
// restart of lbplane, show in lbctl status and the policy's status, and ready brings them back. The
// read-only token is refused.
func TestEndpointDrainAndMaintenance(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	l := startLbplane(t)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	doc := func(threshold int) []byte {
		return policy(t, endpointStatePolicy, map[string]any{"B": bs, "Port": port, "Threshold": threshold})
	}
	envoy := startEnvoy(t, l, "envoy-states", true)
	push(t, l, doc(1))
	waitSynced(t, l, 1)
	eventuallySpread(t, url, "every endpoint serves", "a", "b", "c")
	addr := func(b *Backend) string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

	// Six slow requests spread over the three; b is drained while they are under way: they all finish.
	var wg sync.WaitGroup
	slow := map[string]int{}
	var mu sync.Mutex
	var slowErrs []string
	started := make(chan struct{}, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(false)
			started <- struct{}{}
			b, code, err := doWith(c, url+"?delay=3s", nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || code != 200 {
				slowErrs = append(slowErrs, fmt.Sprintf("status %d, %v", code, err))
				return
			}
			slow[b]++
		}()
	}
	for range 6 {
		<-started
	}
	eventually(t, 10*time.Second, "the six slow requests are under way", func() error {
		if n := envoyStatSum(t, envoy, "cluster.default/states/app", ".upstream_rq_active"); n < 6 {
			return fmt.Errorf("%d in flight", n)
		}
		return nil
	})
	out := lbctlOK(t, l, "endpoint", "drain", "states", addr(bs[1]))
	if !strings.Contains(out, "Draining (1 endpoint(s))") {
		t.Errorf("lbctl endpoint drain said:\n%s", out)
	}
	// The answer waited for the Envoy: no new request reaches b from now on.
	if got := spreadOver(t, url, 30); got["b"] != 0 || got["a"] == 0 || got["c"] == 0 {
		t.Errorf("after the drain: %v", got)
	}
	wg.Wait()
	if len(slowErrs) > 0 || slow["b"] != 2 || slow["a"]+slow["c"] != 4 {
		t.Errorf("the requests under way at the drain: answered by %v, errors %v (want 2 by b)", slow, slowErrs)
	}
	if cl := envoy.Clusters(t); !strings.Contains(cl, addr(bs[1])+"::health_flags::/eds_status_draining") {
		t.Errorf("Envoy does not hold %s draining:\n%s", addr(bs[1]), cl)
	}

	// Maintenance of c: it leaves Envoy's clusters, though its health checks pass.
	lbctlOK(t, l, "endpoint", "maintenance", "states", addr(bs[2]))
	eventually(t, 10*time.Second, "c leaves Envoy's cluster", func() error {
		if cl := envoy.Clusters(t); strings.Contains(cl, addr(bs[2])) {
			return fmt.Errorf("Envoy still has %s", addr(bs[2]))
		}
		return nil
	})
	if got := spreadOver(t, url, 30); got["a"] != 30 {
		t.Errorf("with b drained and c under maintenance: %v", got)
	}
	status := lbctlOK(t, l, "status", "states")
	for _, want := range []string{"OVERRIDE", addr(bs[1]) + "  *        Draining", addr(bs[2]) + "  *        Maintenance"} {
		if !strings.Contains(status, want) {
			t.Errorf("lbctl status lacks %q:\n%s", want, status)
		}
	}

	// The read-only token may look, not change.
	ro, err := os.ReadFile(filepath.Join(l.DataDir, "token-readonly"))
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, err := lbctlWithToken(l, strings.TrimSpace(string(ro)), "endpoint", "ready", "states", addr(bs[1]))
	if err == nil || !strings.Contains(errOut, "read-only") {
		t.Errorf("the read-only token: %v\n%s", err, errOut)
	}
	list, _, err := lbctlWithToken(l, strings.TrimSpace(string(ro)), "endpoint", "list")
	if err != nil || !strings.Contains(list, "default/states") {
		t.Errorf("lbctl endpoint list with the read-only token: %v\n%s", err, list)
	}

	// A push of the policy keeps them; so does a restart of lbplane.
	push(t, l, doc(2))
	waitSynced(t, l, 1)
	if got := spreadOver(t, url, 30); got["a"] != 30 {
		t.Errorf("after a push: %v", got)
	}
	l.Kill()
	l.Restart(t)
	waitSynced(t, l, 1)
	p, err := l.Client.Get(context.Background(), "default", "states")
	if err != nil {
		t.Fatal(err)
	}
	if ovs := p.Status.EndpointOverrides; len(ovs) != 2 || ovs[0].State != v1alpha1.OverrideDraining || ovs[1].State != v1alpha1.OverrideMaintenance ||
		ovs[0].Endpoints != 1 || ovs[1].Endpoints != 1 {
		t.Errorf("status after a restart: %+v", ovs)
	}
	if got := spreadOver(t, url, 30); got["a"] != 30 {
		t.Errorf("after a restart: %v", got)
	}
	if cl := envoy.Clusters(t); strings.Contains(cl, addr(bs[2])) || !strings.Contains(cl, addr(bs[1])+"::health_flags::/eds_status_draining") {
		t.Errorf("after a restart Envoy has:\n%s", cl)
	}

	// Ready: both serve again.
	lbctlOK(t, l, "endpoint", "ready", "states", addr(bs[1]))
	lbctlOK(t, l, "endpoint", "ready", "states", addr(bs[2]))
	eventuallySpread(t, url, "every endpoint serves again", "a", "b", "c")
	if out := lbctlOK(t, l, "endpoint", "list"); !strings.Contains(out, "No endpoint is drained") {
		t.Errorf("after ready, lbctl endpoint list says:\n%s", out)
	}
}

// lbctlWithToken runs lbctl against l with another token.
func lbctlWithToken(l *Lbplane, tok string, args ...string) (string, string, error) {
	cmd := exec.Command(filepath.Join(binDir, "lbctl"), append([]string{"--server", l.APIURL, "--token", tok}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// TestEndpointStateOnEtcdReplicas: two replicas share etcd; an endpoint drained through one is drained by
// the Envoy the other feeds, and ready through the other undoes it everywhere.
func TestEndpointStateOnEtcdReplicas(t *testing.T) {
	t.Parallel()
	ec := etcdtest.Start(t, 1)
	keyFile := filepath.Join(t.TempDir(), "etcd-secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{0x5a}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rs []*Lbplane
	for _, id := range []string{"r0", "r1"} {
		rs = append(rs, startLbplane(t, append(ec.Flags(ec.Endpoints()[0]), "--store", "etcd", "--etcd-secret-key-file", keyFile,
			"--replica-id", id, "--etcd-prefix", "/states/")...))
	}
	bs := startBackends(t, "a", "b")
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	push(t, rs[0], policy(t, endpointStatePolicy, map[string]any{"B": bs, "Port": port, "Threshold": 1}))
	// The Envoy is fed by r1 alone.
	startEnvoyFrom(t, envoybootstrap.Params{NodeID: "envoy-r1", Group: "default", XDS: rs[1].XDSAddr, Delta: true,
		TLS: envoyTLS(t, rs[0], "envoy-r1", "default")}, "config:info")
	eventuallySpread(t, url, "both endpoints serve", "a", "b")
	b := "127.0.0.1:" + strconv.Itoa(bs[1].Port)
	res, err := rs[0].Client.SetEndpointState(context.Background(), "default", "states", apiwire.EndpointStateRequest{Endpoint: b, State: "Maintenance"})
	if err != nil || res.Endpoints != 1 {
		t.Fatalf("maintenance through r0: %+v, %v", res, err)
	}
	eventuallySpread(t, url, "the Envoy of r1 sends nothing to b", "a")
	eventually(t, 10*time.Second, "r1's status shows the override", func() error {
		p, err := rs[1].Client.Get(context.Background(), "default", "states")
		if err != nil {
			return err
		}
		if len(p.Status.EndpointOverrides) != 1 || p.Status.EndpointOverrides[0].Endpoint != b {
			return fmt.Errorf("r1: %+v", p.Status.EndpointOverrides)
		}
		return nil
	})
	if _, err := rs[1].Client.SetEndpointState(context.Background(), "default", "states", apiwire.EndpointStateRequest{Endpoint: b, State: "Ready"}); err != nil {
		t.Fatalf("ready through r1: %v", err)
	}
	eventuallySpread(t, url, "both serve again", "a", "b")
	eventually(t, 10*time.Second, "r0 lists no override", func() error {
		l, err := rs[0].Client.EndpointOverrides(context.Background())
		if err != nil || len(l) != 0 {
			return fmt.Errorf("%+v, %v", l, err)
		}
		return nil
	})
}
