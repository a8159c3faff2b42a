package e2e

import (
	"fmt"
	"testing"
	"time"
)

const zonePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: zones}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {zoneFailover: [zone-a, zone-b]}
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 2, http: {path: /healthz}}
        passive: {consecutive5xx: 3}
      endpoints:
{{- range $i, $b := .B}}
        - {address: 127.0.0.1, port: {{$b.Port}}, zone: {{index $.Zones $i}}}
{{- end}}
`

// TestZoneFailover: every request goes to the first zone while it is healthy, to the second when the first
// fails, and back when it returns; the unlisted zone gets nothing while a listed one can serve.
func TestZoneFailover(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a1", "b1", "c1")
	e := setupWith(t, zonePolicy, map[string]any{"B": bs, "Zones": []string{"zone-a", "zone-b", "zone-c"}}, bs...)
	waitServing(t, e.URL, "a1")
	// Requests may fail while Envoy finds a zone down; what counts is where traffic settles.
	only := func(want string) func() error {
		return func() error {
			c := newClient(false)
			got := map[string]int{}
			for range 40 {
				b, code, err := doWith(c, e.URL, nil)
				if err != nil || code != 200 {
					return fmt.Errorf("status %d, error %v", code, err)
				}
				got[b]++
			}
			if got[want] != 40 {
				return fmt.Errorf("%v", got)
			}
			return nil
		}
	}
	eventually(t, 10*time.Second, "all traffic in zone-a", only("a1"))
	bs[0].Stop()
	eventually(t, 10*time.Second, "all traffic fails over to zone-b", only("b1"))
	bs[1].Stop()
	eventually(t, 10*time.Second, "then to the unlisted zone-c", only("c1"))
	bs[0].Restart(t)
	eventually(t, 10*time.Second, "back to zone-a once it is healthy", only("a1"))
}
