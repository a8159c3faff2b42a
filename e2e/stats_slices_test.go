package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

const slicedPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 2, http: {path: /healthz}}
      endpoints: [{address: 127.0.0.1, port: {{.B.Port}}}]
`

// lbplane reads an Envoy's /clusters in slices of the group's clusters (--proxy-stats-slice), so that no
// read holds Envoy's main thread, which also applies config, for long. Read one cluster at a time from a
// real Envoy, every policy's endpoint health is still in its status, and a stopped backend shows on its own
// policy alone.
func TestStatsReadInSlicesCoverEveryPolicy(t *testing.T) {
	t.Parallel()
	l := startLbplane(t, "--proxy-stats-slice", "1", "--proxy-stats-interval", "500ms")
	bs := startBackends(t, "s1", "s2", "s3")
	startEnvoy(t, l, "sliced", true)
	names := []string{"sa", "sb", "sc"}
	for i, name := range names {
		port := reservePort(t)
		push(t, l, policy(t, slicedPolicy, map[string]any{"Name": name, "Port": port, "B": bs[i]}))
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), bs[i].Name)
	}
	healthy := func(name string, want int32) func() error {
		return func() error {
			b, err := backendStatus(t, l, name, "app")
			if err != nil {
				return err
			}
			if b.Endpoints.Total != 1 || b.Endpoints.Healthy != want || b.Proxies != 1 {
				return fmt.Errorf("%s: %+v", name, b)
			}
			return nil
		}
	}
	for _, name := range names {
		eventually(t, 15*time.Second, name+"'s endpoint healthy in status", healthy(name, 1))
	}
	bs[1].Stop()
	eventually(t, 15*time.Second, "sb's stopped endpoint shown as failing its check", func() error {
		b, err := backendStatus(t, l, "sb", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Healthy != 0 || !slices.Contains(ejectedReasons(b, fmt.Sprintf("127.0.0.1:%d", bs[1].Port)), "active health check failed") {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})
	for _, name := range []string{"sa", "sc"} {
		if err := healthy(name, 1)(); err != nil {
			t.Errorf("another policy's status moved: %v", err)
		}
	}
}
