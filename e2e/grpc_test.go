package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"github.com/lbplane/lbplane/internal/grpcfleet"
)

func startTestServiceBackend(t *testing.T, name string) *grpcfleet.Backend {
	t.Helper()
	b, err := grpcfleet.StartBackend(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

const grpcPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP, hostnames: [{{.Name}}.grpc.test]}
  backends:
    - name: app
      loadBalancing:
        algorithm: {{.Algorithm}}
{{- if .Hash}}
        hashKeys: [{header: {name: x-user}}]
{{- end}}
{{- if .TLS}}
      tls: {sni: app.internal, insecureSkipVerify: true}
{{- end}}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// grpcClient dials xds:///target through lbplane with the bootstrap lbctl bootstrap --grpc wrote for node.
func grpcClient(t *testing.T, l *Lbplane, node, target string) testgrpc.TestServiceClient {
	t.Helper()
	dir := filepath.Join(t.TempDir(), node)
	out, stderr, err := lbctl(t, l, "", "bootstrap", "--grpc", "--node-id", node, "--xds-address", l.XDSAddr, "--out-dir", dir)
	if err != nil {
		t.Fatalf("lbctl bootstrap --grpc: %v: %s", err, stderr)
	}
	t.Logf("bootstrap of %s:\n%s", node, out)
	c, err := grpcfleet.NewClient([]byte(out), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestProxylessGRPC runs real grpc-go xDS clients (google.golang.org/grpc/xds, xds:///host:port, each with
// the bootstrap lbctl bootstrap --grpc wrote) against lbplane's xDS server and three grpc-go backends.
func TestProxylessGRPC(t *testing.T) {
	t.Parallel()
	l := startLbplane(t)
	bs := []*grpcfleet.Backend{startTestServiceBackend(t, "g0"), startTestServiceBackend(t, "g1"), startTestServiceBackend(t, "g2")}
	type pol struct {
		Name, Algorithm string
		Hash, TLS       bool
		Port            int
		B               []*grpcfleet.Backend
	}
	pols := []*pol{
		{Name: "rr", Algorithm: "RoundRobin"},
		{Name: "ring", Algorithm: "RingHash", Hash: true},
		{Name: "maglev", Algorithm: "Maglev", Hash: true},
		{Name: "lr", Algorithm: "LeastRequest"},
		{Name: "random", Algorithm: "Random"},
	}
	for _, p := range pols {
		p.Port, p.B = reservePort(t), bs
		push(t, l, policy(t, grpcPolicy, p))
	}
	clients := map[string]testgrpc.TestServiceClient{}
	for _, p := range pols {
		clients[p.Name] = grpcClient(t, l, "grpc-"+p.Name, fmt.Sprintf("%s.grpc.test:%d", p.Name, p.Port))
	}
	for _, p := range pols {
		eventually(t, 30*time.Second, p.Name+" answers through xDS", func() error {
			_, err := grpcfleet.Call(clients[p.Name], "u")
			return err
		})
	}

	t.Run("RoundRobinWithin5Percent", func(t *testing.T) {
		got, err := spread(3000, func(int) (string, error) { return grpcfleet.Call(clients["rr"], "") })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("3,000 RPCs: %v", got)
		for _, b := range bs {
			within(t, b.Name, got[b.Name], 1000, 0.05)
		}
	})
	for _, name := range []string{"ring", "maglev"} {
		// Maglev is served to gRPC clients with ring hash after it, which they take.
		t.Run("HeaderHashSticky/"+name, func(t *testing.T) {
			var mu sync.Mutex
			first := map[string]string{}
			// Each key 5 times; the keys are called side by side.
			_, err := spread(500, func(i int) (string, error) {
				user := fmt.Sprintf("user-%d", i%100)
				b, err := grpcfleet.Call(clients[name], user)
				if err != nil {
					return "", err
				}
				mu.Lock()
				defer mu.Unlock()
				if was, ok := first[user]; ok && was != b {
					return "", fmt.Errorf("%s went to %s, then to %s", user, was, b)
				}
				first[user] = b
				return b, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			keys := map[string]int{}
			for _, b := range first {
				keys[b]++
			}
			t.Logf("100 keys over the backends: %v", keys)
			if len(first) != 100 || len(keys) < 2 {
				t.Fatalf("%d keys, spread %v: the requests are not hashed", len(first), keys)
			}
		})
	}
	t.Run("LeastRequestAndRandomAccepted", func(t *testing.T) {
		for _, name := range []string{"lr", "random"} {
			got, err := spread(300, func(int) (string, error) { return grpcfleet.Call(clients[name], "") })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %v", name, got)
			if len(got) != 3 {
				t.Fatalf("%s: 300 RPCs reached %v, want all 3 backends", name, got)
			}
		}
	})
	t.Run("NoNACKsAndStatusSaysGRPC", func(t *testing.T) {
		eventually(t, 30*time.Second, "every gRPC client is SYNCED", func() error {
			ps, err := l.Client.Proxies(context.Background())
			if err != nil {
				return err
			}
			return grpcProxiesSynced(ps, len(pols))
		})
	})
	t.Run("ChangeReachesTheClient", func(t *testing.T) {
		p := *pols[0]
		p.B = bs[:2]
		start := time.Now()
		push(t, l, policy(t, grpcPolicy, &p))
		pushed := time.Since(start)
		deadline := time.Now().Add(10 * time.Second)
		for streak := 0; streak < 20; {
			if time.Now().After(deadline) {
				t.Fatalf("the client still reached %s 10s after the push", bs[2].Name)
			}
			b, err := grpcfleet.Call(clients["rr"], "")
			if err != nil {
				t.Fatal(err)
			}
			streak++
			if b == bs[2].Name {
				streak = 0
			}
		}
		// Not asserted (the machine is shared): recorded for the log.
		t.Logf("the removed endpoint was out of the client's picks %s after the push (the push itself took %s)", time.Since(start), pushed)
		push(t, l, policy(t, grpcPolicy, pols[0]))
		eventually(t, 10*time.Second, "the third backend is back", func() error {
			for range 30 {
				if b, _ := grpcfleet.Call(clients["rr"], ""); b == bs[2].Name {
					return nil
				}
			}
			return fmt.Errorf("30 RPCs missed %s", bs[2].Name)
		})
	})
	t.Run("RefusedPartsAreNamedInStatus", func(t *testing.T) {
		// Upstream TLS cannot be served to gRPC clients: the policy says so, field by field, while one is
		// connected, and nothing is sent that they would NACK (counted below).
		p := &pol{Name: "tls", Algorithm: "RoundRobin", TLS: true, Port: reservePort(t), B: bs}
		push(t, l, policy(t, grpcPolicy, p))
		eventually(t, 30*time.Second, "the policy's status names the refused field", func() error {
			got, err := l.Client.Get(context.Background(), "default", "tls")
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(got.Status.Warnings, func(w string) bool { return strings.HasPrefix(w, "grpc-refused: spec.backends[0].tls: ") }) {
				return fmt.Errorf("warnings %v", got.Status.Warnings)
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgrammed)
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not served to the gRPC clients") {
				return fmt.Errorf("programmed: %+v", c)
			}
			return nil
		})
		if _, err := grpcfleet.Call(clients["rr"], ""); err != nil {
			t.Fatalf("the other policies' clients: %v", err)
		}
	})
	t.Run("KilledBackendCostsAtMostOneRPC", func(t *testing.T) {
		var (
			mu       sync.Mutex
			failures []error
			done     = make(chan struct{})
			ok       int
		)
		killAt := 100
		go func() {
			defer close(done)
			for i := range 500 {
				if i == killAt {
					bs[2].Stop()
				}
				_, err := grpcfleet.Call(clients["rr"], "")
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					ok++
				}
				mu.Unlock()
			}
		}()
		<-done
		t.Logf("%d RPCs succeeded, %d failed around the kill: %v", ok, len(failures), failures)
		if len(failures) > 1 {
			t.Fatalf("%d RPCs failed after a backend was killed, want at most 1: %v", len(failures), failures)
		}
		eventually(t, 30*time.Second, "every gRPC client is SYNCED after the kill", func() error {
			ps, err := l.Client.Proxies(context.Background())
			if err != nil {
				return err
			}
			return grpcProxiesSynced(ps, len(pols))
		})
	})
	noNacks(t, l)
	if t.Failed() {
		b, _ := os.ReadFile(l.log)
		t.Logf("lbplane log (last 4 KiB): %s", tail(string(b), 4096))
	}
}

// spread makes n calls, 8 at a time, and counts who answered each; it stops at the first error.
func spread(n int, call func(i int) (string, error)) (map[string]int, error) {
	var (
		mu    sync.Mutex
		got   = map[string]int{}
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b, err := call(i)
				mu.Lock()
				switch {
				case err == nil:
					got[b]++
				case first == nil:
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return got, first
}

// noNacks fails the test unless lbplane's lbplane_xds_nacks_total, of every group and type, is 0: every
// answer of the run, not only the last, counts.
func noNacks(t *testing.T, l *Lbplane) {
	t.Helper()
	nacks := 0.0
	for k, v := range scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", l.metricsPort)) {
		if strings.HasPrefix(k, "lbplane_xds_nacks_total{") {
			nacks += v
		}
	}
	if nacks != 0 {
		t.Errorf("lbplane counted %v NACKs from the gRPC clients, want 0", nacks)
	}
}

// grpcProxiesSynced checks that n gRPC clients are connected, said to be gRPC clients, SYNCED, with no
// NACK of any type.
func grpcProxiesSynced(ps []apiwire.ProxyStatus, n int) error {
	count := 0
	for _, p := range ps {
		if p.Client != "grpc" || !strings.HasPrefix(p.UserAgent, "gRPC Go") {
			return fmt.Errorf("%s: client %q, user agent %q; want grpc, gRPC Go", p.NodeID, p.Client, p.UserAgent)
		}
		for _, ty := range p.Types {
			if ty.Nacked {
				return fmt.Errorf("%s NACKed %s: %s", p.NodeID, ty.TypeURL, ty.NackMessage)
			}
		}
		if p.State != xdsserver.Synced {
			return fmt.Errorf("%s is %s: %s", p.NodeID, p.State, p.Message)
		}
		count++
	}
	if count != n {
		return fmt.Errorf("%d gRPC clients connected, want %d", count, n)
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
