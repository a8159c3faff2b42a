package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// expectedShares waits until the policy's status shows these expected shares (address: share) and marks
// backup as a backup endpoint of priority 1: the traffic model's reading of what was built and of the
// health the Envoy reports.
func expectedShares(t *testing.T, l *Lbplane, policy, backend, backup string, want map[string]float64) {
	t.Helper()
	eventually(t, 15*time.Second, fmt.Sprintf("status expects %v", want), func() error {
		b, err := backendStatus(t, l, policy, backend)
		if err != nil {
			return err
		}
		got := map[string]v1alpha1.EndpointStatus{}
		for _, ep := range b.PerEndpoint {
			got[ep.Address] = ep
		}
		for a, share := range want {
			if got[a].ExpectedShare != share {
				return fmt.Errorf("%s expected %v, want %v: %+v", a, got[a].ExpectedShare, share, b.PerEndpoint)
			}
		}
		if ep := got[backup]; !ep.Backup || ep.Priority != 1 {
			return fmt.Errorf("backup %s not marked: %+v", backup, ep)
		}
		return nil
	})
}

// TestBackupEndpoint: the backup gets no request while the primaries are healthy, every request once they
// are killed, and none again once they are back.
func TestBackupEndpoint(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "prim1", "prim2", "backup")
	e := setup(t, true, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: backup}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      healthCheck:
        active: {type: HTTP, interval: 500ms, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 1, http: {path: /healthz}}
      endpoints:
{{- range $i, $b := .B}}
        - {address: 127.0.0.1, port: {{$b.Port}}{{if eq $i 2}}, backup: true{{end}}}
{{- end}}
`, bs...)
	waitServing(t, e.URL, "prim1", "prim2")
	c := newClient(false)
	spread := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			b, code, err := doWith(c, e.URL, nil)
			if err != nil || code != 200 {
				got[fmt.Sprintf("failed %d %v", code, err)]++
				continue
			}
			got[b]++
		}
		return got
	}
	// Both primaries healthy: give the health checks time to pass on every endpoint, backup included.
	eventually(t, 10*time.Second, "both primaries serve", func() error {
		if s := spread(20); s["prim1"] == 0 || s["prim2"] == 0 {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	if s := spread(200); s["backup"] > 0 || s["prim1"]+s["prim2"] != 200 {
		t.Errorf("primaries healthy: %v; want none on the backup and no failure", s)
	} else {
		t.Logf("primaries healthy: %v", s)
	}
	addr := func(b *Backend) string { return fmt.Sprintf("127.0.0.1:%d", b.Port) }
	expectedShares(t, e.L, "backup", "app", addr(bs[2]), map[string]float64{addr(bs[0]): 0.5, addr(bs[1]): 0.5, addr(bs[2]): 0})
	if text := lbctlOK(t, e.L, "status", "backup"); !strings.Contains(text, addr(bs[2])+"  -     1 (backup)") {
		t.Errorf("lbctl status does not mark the backup:\n%s", text)
	}

	bs[0].Stop()
	bs[1].Stop()
	// The switch itself may cost a request (seen: one 503 in 2 of 5 runs on a loaded machine): the first
	// requests after the kill meet both dead primaries before their ejections, decided on Envoy's main thread,
	// reach its worker, and with every pick still going to the primaries' level the last retry lands on one
	// of them again. The eventual spread below is what the issue asks for.
	eventually(t, 10*time.Second, "every request goes to the backup", func() error {
		if s := spread(50); s["backup"] != 50 {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	s := spread(200)
	// Every request, with no failure: both dead primaries are ejected, so none is left in rotation to take
	// a share of the first tries and of the retries. With an ejection cap of 50 % (Envoy counts it over all
	// three endpoints) one dead primary stayed in rotation until the active checks failed it, and about 1
	// request in 100 failed (see defaultEjectionCap).
	if s["backup"] != 200 {
		t.Errorf("primaries dead: %v; want every request on the backup\n%s", s, e.E.Clusters(t))
	}
	t.Logf("primaries dead: %v", s)
	expectedShares(t, e.L, "backup", "app", addr(bs[2]), map[string]float64{addr(bs[0]): 0, addr(bs[1]): 0, addr(bs[2]): 1})

	bs[0].Restart(t)
	bs[1].Restart(t)
	eventually(t, 15*time.Second, "the primaries take the traffic back", func() error {
		if s := spread(50); s["backup"] > 0 || s["prim1"] == 0 || s["prim2"] == 0 {
			return fmt.Errorf("%v", s)
		}
		return nil
	})
	s = spread(200)
	if s["backup"] > 0 || s["prim1"] < 50 || s["prim2"] < 50 {
		t.Errorf("primaries back: %v; want none on the backup and both primaries serving", s)
	}
	t.Logf("primaries back: %v", s)
}
