package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/internal/backend"
)

// cataloguePolicy is policy "cat" on three Envoys: route "all" to backend stable, and, in a bad change, to
// backend Bad (weight 3) as Endpoint and Extra say; Timeout, when set, is the route's timeout; Port the
// listener's.
const cataloguePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: cat}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  rollout:
    stages: [{envoys: 1}, {percent: 100}]
    bakeTime: {{.Bake}}
    analysis: {minRequests: 20, maxP99Ratio: 50}
  routes:
    - name: all
{{- if .Timeout}}
      timeout: {{.Timeout}}
{{- end}}
      backends:
        - {name: stable, weight: 1}
{{- if .Bad}}
        - {name: {{.Bad}}, weight: 3}
{{- end}}
  backends:
    - name: stable
      endpoints: [{address: 127.0.0.1, port: {{.Stable}}}]
{{- if .Bad}}
    - name: {{.Bad}}
      endpoints: [{address: {{.Endpoint}}}]
{{- if .Extra}}
{{.Extra}}
{{- end}}
{{- end}}
`

// TestRolloutCatalogue pushes, staged, each of the commonest bad changes through three real Envoys under
// load and checks that each is rolled back by lbplane itself within two bake windows (and two stats
// readings), with the failed share of all requests below the first stage's share of the Envoys: every bad
// change sends three quarters of a route to what fails, so a stage of two Envoys of three fails at most
// half of the requests while it lasts. Between cases the good generation is pushed at once.
func TestRolloutCatalogue(t *testing.T) {
	stable := startBackend(t, "stable", 0)
	broken := startBackend(t, "broken", 0)
	broken.FailWith(500)
	slow := startBackend(t, "slow", 400*time.Millisecond)
	sick := startBackend(t, "sick", 0)
	sick.SetHealth(503)
	tlsCfg, err := backend.ServerTLS(certs("backend.internal.crt"), certs("backend.internal.key"), "")
	if err != nil {
		t.Fatal(err)
	}
	secure := startBackendWith(t, "secure", backend.ServeOptions{TLS: tlsCfg})
	closed := reservePort(t) // reserved for this test, and nothing listens on it
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	l := startLbplane(t, "--proxy-stats-interval", "250ms", "--rollout-canary-min-age", canaryMinAge.String())
	var envoys []*Envoy
	for _, n := range []string{"envoy-a", "envoy-b", "envoy-c"} {
		envoys = append(envoys, startEnvoy(t, l, n, true))
	}
	port := reservePort(t)
	const bake = 3 * time.Second
	doc := func(over map[string]any) []byte {
		d := map[string]any{"Port": port, "Stable": stable.Port, "Bake": bake.String(), "Bad": "", "Timeout": "", "Endpoint": "", "Extra": ""}
		for k, v := range over {
			d[k] = v
		}
		return policy(t, cataloguePolicy, d)
	}
	good := doc(nil)
	if _, err := l.Client.ApplyRollout(context.Background(), good, false, "immediate"); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitSynced(t, l, 3)
	waitServing(t, url, "stable")
	// A new connection per request: the kernel spreads them over the three Envoys (SO_REUSEPORT).
	load := startLoadWith(newClient(false), url, 150, 6, 5*time.Minute)
	defer load.Stop()
	load.WaitServed(t, 100)
	waitEveryEnvoyServesPolicy(t, envoys, "cat")
	waitSettledFor(t, l, 3)

	endpoint := func(port int) string { return fmt.Sprintf("127.0.0.1, port: %d", port) }
	for _, tc := range []struct {
		name string
		over map[string]any
		// marker is in the config of an Envoy that runs the bad change.
		marker string
		// verdict is what the rollback's message names.
		verdict string
	}{
		{"a closed port", map[string]any{"Bad": "gone", "Endpoint": endpoint(closed)}, "/cat/gone", "error rate"},
		{"a name that does not resolve", map[string]any{"Bad": "nowhere", "Endpoint": "nowhere.invalid, port: 80"}, "/cat/nowhere", "error rate"},
		{"plain HTTP to a backend that wants TLS", map[string]any{"Bad": "secure", "Endpoint": endpoint(secure.Port)}, "/cat/secure", "4xx rate"},
		{"TLS to a backend that does not speak it", map[string]any{"Bad": "plain", "Endpoint": endpoint(stable.Port),
			"Extra": "      tls: {insecureSkipVerify: true}"}, "/cat/plain", "error rate"},
		{"every endpoint failing its health checks", map[string]any{"Bad": "sick", "Endpoint": endpoint(sick.Port),
			"Extra": "      healthCheck: {active: {type: HTTP, interval: 500ms, unhealthyThreshold: 1, http: {path: /healthz}}}"},
			"/cat/sick", "active health checks"},
		{"a backend answering 500", map[string]any{"Bad": "broken", "Endpoint": endpoint(broken.Port)}, "/cat/broken", "error rate"},
		{"a timeout shorter than the backend's latency", map[string]any{"Bad": "slow", "Endpoint": endpoint(slow.Port), "Timeout": "100ms"},
			"/cat/slow", "error rate"},
		{"a listener port already taken on the Envoy host", map[string]any{"Port": taken.Addr().(*net.TCPAddr).Port},
			fmt.Sprintf(`"port_value": %d`, taken.Addr().(*net.TCPAddr).Port), "rejected the config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			okBefore, failedBefore := load.OK.Load(), load.Failed.Load()
			pushed := time.Now()
			if _, err := l.Client.ApplyRollout(context.Background(), doc(tc.over), false, "staged"); err != nil {
				// Refused before any Envoy has it: caught at admission.
				if !strings.Contains(err.Error(), "spec.") {
					t.Fatalf("the bad change was refused without naming the field: %v", err)
				}
				t.Logf("refused at admission: %v", err)
				return
			}
			r := waitRollout(t, l, "cat", v1alpha1.RolloutRolledBack, 2*bake+30*time.Second)
			took := time.Since(pushed)
			eventually(t, 15*time.Second, "no Envoy runs the bad change", func() error {
				for _, e := range envoys {
					if strings.Contains(e.ConfigDump(t), tc.marker) {
						return fmt.Errorf("%s runs it", e.NodeID)
					}
				}
				return nil
			})
			ok, failed := load.OK.Load()-okBefore, load.Failed.Load()-failedBefore
			share := float64(failed) / float64(max(ok+failed, 1))
			stage := float64(v1alpha1.StageCount([]v1alpha1.RolloutStage{{Envoys: 1}, {Percent: 100}}, 0, len(envoys))) / float64(len(envoys))
			t.Logf("rolled back %s after the push (%s); %d of %d requests failed (%.1f %%), stage share %.0f %%", took.Round(time.Millisecond),
				r.Rollout.Message, failed, ok+failed, 100*share, 100*stage)
			if !strings.Contains(r.Rollout.Message, tc.verdict) || r.Rollout.Stage != 1 {
				t.Errorf("rolled back at stage %d with %q; want it to name %q", r.Rollout.Stage, r.Rollout.Message, tc.verdict)
			}
			// Two bakes and two stats readings, with a margin for a shared, loaded machine.
			if limit := 2*bake + 4*time.Second; took > limit {
				t.Errorf("rolled back %s after the push, more than %s", took, limit)
			}
			if share >= stage {
				t.Errorf("%.1f %% of the requests failed, not below the first stage's share of the Envoys (%.0f %%)", 100*share, 100*stage)
			}
			// Back on the good generation, at once, before the next case; nothing fails then.
			if _, err := l.Client.ApplyRollout(context.Background(), good, false, "immediate"); err != nil {
				t.Fatal(err)
			}
			waitSynced(t, l, 3)
			noFailuresOver(t, load, 150, "requests failed on the good generation after the rollback")
		})
	}
}

// waitRollout waits until policy name's rollout is in phase, and fails at once if it ends in another.
func waitRollout(t *testing.T, l *Lbplane, name, phase string, timeout time.Duration) *apiwire.RolloutResult {
	t.Helper()
	var r *apiwire.RolloutResult
	eventually(t, timeout, name+"'s rollout is "+phase, func() error {
		var err error
		if r, err = l.Client.Rollout(context.Background(), "default", name); err != nil {
			return err
		}
		switch p := r.Rollout.Phase; {
		case p == phase:
			return nil
		case p != v1alpha1.RolloutProgressing && p != v1alpha1.RolloutPaused:
			t.Fatalf("%s's rollout ended %s, not %s: %s", name, p, phase, r.Rollout.Message)
		}
		return fmt.Errorf("%s at stage %d: %s", r.Rollout.Phase, r.Rollout.Stage, r.Rollout.Message)
	})
	return r
}
