package e2e

import (
	"fmt"
	"testing"
	"time"
)

const utilizationPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: orca}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing:
        algorithm: BackendUtilization
        # Reports count at once and weights move every 100ms, so that the test need not wait for the
        # defaults (10s, 1s).
        backendUtilization: {blackoutPeriod: 0s, weightUpdatePeriod: 100ms}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// TestBackendUtilizationFavoursTheIdleBackend: two backends report their utilization in ORCA headers, one
// 90 %, the other 10 %; Envoy weighs them by it, and the busy one gets clearly less of the traffic. Without
// reports the two would get half each (round robin).
func TestBackendUtilizationFavoursTheIdleBackend(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "busy", "idle")
	bs[0].SetUtilization(0.9)
	bs[1].SetUtilization(0.1)
	e := setupWith(t, utilizationPolicy, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "busy", "idle")
	waitSynced(t, e.L, 1)
	c := newClient(true)
	// Weights come from reports: wait until both endpoints have reported and a weight update ran.
	eventually(t, 30*time.Second, "the idle backend gets more than the busy one", func() error {
		counts := c.Spread(t, e.URL, 100, nil)
		if counts["idle"] <= 2*counts["busy"] {
			return fmt.Errorf("%v", counts)
		}
		return nil
	})
	counts := c.Spread(t, e.URL, 1000, nil)
	t.Logf("1000 requests: %v", counts)
	if counts["busy"] >= counts["idle"] {
		t.Errorf("the backend at 90 %% got %d requests, the one at 10 %% %d; want fewer for the busy one", counts["busy"], counts["idle"])
	}
	// At 9 times the weight the busy one gets about 10 %; a third is far from the even split it would get
	// without the reports.
	if counts["busy"] > 1000/3 {
		t.Errorf("the busy backend got %d of 1000 requests; want under a third", counts["busy"])
	}
}
