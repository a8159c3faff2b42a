package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// A port another process holds passes every check lbplane can make, and Envoy rejects the listener when it
// fails to bind. The NACK must show on the proxy and on that policy only, must not be answered by re-sending
// the same config, and must not stop other policies from changing.
// pushBlocked pushes policy "blocked", whose listener port another socket holds (until the test ends):
// everything lbplane checks passes, and Envoy rejects the listener when it fails to bind.
func pushBlocked(t *testing.T, l *Lbplane, backendPort int) {
	t.Helper()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	port := taken.Addr().(*net.TCPAddr).Port
	push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: blocked}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]}]
`, map[string]any{"Port": port, "Backend": backendPort}))
}

func TestEnvoyRejectionIsReportedAndContained(t *testing.T) {
	t.Parallel()
	for _, delta := range []bool{true, false} {
		t.Run(map[bool]string{true: "delta", false: "sotw"}[delta], func(t *testing.T) {
			bs := startBackends(t, "ok1", "ok2")
			l := startLbplane(t)
			startEnvoy(t, l, "envoy-1", delta)
			goodPort := reservePort(t)
			good := `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: good}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: {{.Name}}, endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]}]
`
			push(t, l, policy(t, good, map[string]any{"Port": goodPort, "Backend": bs[0].Port, "Name": "app"}))
			url := fmt.Sprintf("http://127.0.0.1:%d", goodPort)
			waitServing(t, url, "ok1")
			pushBlocked(t, l, bs[0].Port)

			var nack xdsserver.ProxyStatus
			eventually(t, 30*time.Second, "the proxy is NACKED", func() error {
				ps, err := l.Client.Proxies(context.Background())
				if err != nil || len(ps) != 1 {
					return fmt.Errorf("%v %v", ps, err)
				}
				if ps[0].State != xdsserver.Nacked {
					return fmt.Errorf("state %s", ps[0].State)
				}
				nack = ps[0]
				return nil
			})
			t.Logf("NACK: %s", nack.Message)
			if !strings.Contains(nack.Message, "http-") {
				t.Errorf("the NACK message does not name the listener: %q", nack.Message)
			}
			// The NACK is put on the blocked listener and, by the IR's sources, on its policy only.
			for _, ts := range nack.Types {
				if ts.Nacked && (!slices.Equal(ts.NackedPolicies, []apiwire.PolicyRef{{Namespace: "default", Name: "blocked"}}) || len(ts.NackedResources) != 1 || !strings.HasPrefix(ts.NackedResources[0], "http-")) {
					t.Errorf("%s NACK put on resources %v, policies %v; want the blocked listener, default/blocked", ts.TypeURL, ts.NackedResources, ts.NackedPolicies)
				}
			}
			blocked, err := l.Client.Get(context.Background(), "default", "blocked")
			if err != nil {
				t.Fatal(err)
			}
			if c := cond(blocked, v1alpha1.ConditionProgrammed); c.Status != "False" || c.Reason != "Rejected" || !strings.Contains(c.Message, "envoy-1") {
				t.Errorf("blocked policy Programmed = %+v, want False/Rejected with Envoy's message", c)
			}
			goodP, _ := l.Client.Get(context.Background(), "default", "good")
			if c := cond(goodP, v1alpha1.ConditionProgrammed); c.Status != "True" {
				t.Errorf("good policy Programmed = %+v, want True: the rejection is not about it", c)
			}

			// No resend loop: over two seconds, the rejected version is not sent again.
			before := sentCount(t, l)
			time.Sleep(2 * time.Second)
			if after := sentCount(t, l); after != before {
				t.Errorf("lbplane sent %d more responses while nothing changed (a NACK resend loop)", after-before)
			}

			// Other policies still update, promptly, even a change staged in three steps (a new cluster, the
			// route to it, the old cluster's removal) that waits for the proxy to answer each step.
			start := time.Now()
			push(t, l, policy(t, good, map[string]any{"Port": goodPort, "Backend": bs[1].Port, "Name": "next"}))
			waitServing(t, url, "ok2")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the good policy took %s to change while another was rejected", d)
			}
			out, _, _ := lbctl(t, l, "", "status")
			if !strings.Contains(out, "NACKED") {
				t.Errorf("lbctl status does not show the NACK:\n%s", out)
			}
		})
	}
}

func cond(p *v1alpha1.LoadBalancerPolicy, typ string) (c struct{ Status, Reason, Message string }) {
	for _, x := range p.Status.Conditions {
		if x.Type == typ {
			c.Status, c.Reason, c.Message = string(x.Status), x.Reason, x.Message
		}
	}
	return c
}

// sentCount is how many responses the only proxy has been sent.
func sentCount(t *testing.T, l *Lbplane) int64 {
	t.Helper()
	ps, err := l.Client.Proxies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps[0].Responses
}
