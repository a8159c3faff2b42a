package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

const statusPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: st}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 2, http: {path: /healthz}}
        passive: {consecutive5xx: 3, interval: 1s, baseEjectionTime: 30s, maxEjectionPercent: 50}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// lbctlOK runs lbctl and fails the test unless it exits 0.
func lbctlOK(t *testing.T, l *Lbplane, args ...string) string {
	t.Helper()
	out, errOut, err := lbctl(t, l, "", args...)
	if err != nil {
		t.Fatalf("lbctl %v: %v\n%s", args, err, errOut)
	}
	return out
}

// listItems decodes the items of a list lbctl printed with -o json: every command that lists prints kind List
// with the rows under items, as kubectl does.
func listItems(out string, items any) error {
	var l struct {
		Kind  string          `json:"kind"`
		Items json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		return err
	}
	if !strings.HasSuffix(l.Kind, "List") {
		return fmt.Errorf("kind %q, not a list", l.Kind)
	}
	return json.Unmarshal(l.Items, items)
}

func backendStatus(t *testing.T, l *Lbplane, policy, backend string) (v1alpha1.BackendStatus, error) {
	// lbctl status NAME -o json prints the policy, as lbctl get NAME -o json does.
	var pol v1alpha1.LoadBalancerPolicy
	if err := json.Unmarshal([]byte(lbctlOK(t, l, "status", policy, "-o", "json")), &pol); err != nil {
		t.Fatal(err)
	}
	st := pol.Status
	for _, b := range st.Backends {
		if b.Name == backend {
			return b, nil
		}
	}
	return v1alpha1.BackendStatus{}, fmt.Errorf("no backend %q reported yet: %+v", backend, st.Backends)
}

func ejectedReasons(b v1alpha1.BackendStatus, addr string) []string {
	for _, e := range b.Ejected {
		if e.Address == addr {
			return e.Reasons
		}
	}
	return nil
}

// TestStatusShowsEndpointHealth stops a backend, brings it back, and makes another answer 5xx, and reads
// what lbctl status says each time, from a real Envoy's stats port.
func TestStatusShowsEndpointHealth(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	e := setupWith(t, statusPolicy, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "a", "b", "c")
	load := startLoad(e.URL, 100, 4, 2*time.Minute)
	defer load.Stop()

	eventually(t, 15*time.Second, "all three healthy, with requests and a p99", func() error {
		b, err := backendStatus(t, e.L, "st", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Total != 3 || b.Endpoints.Healthy != 3 || b.Requests == 0 || b.LatencyP99Ms == nil || b.Proxies != 1 {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})

	addr := func(b *Backend) string { return fmt.Sprintf("127.0.0.1:%d", b.Port) }
	stopped := time.Now()
	bs[1].Stop()
	eventually(t, 10*time.Second, "b shown as ejected by the active check", func() error {
		b, err := backendStatus(t, e.L, "st", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Healthy != 2 || b.Endpoints.Ejected != 1 || !slices.Contains(ejectedReasons(b, addr(bs[1])), "active health check failed") {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})
	t.Logf("stopped backend shown as ejected after %s", time.Since(stopped).Round(100*time.Millisecond))
	text := lbctlOK(t, e.L, "status", "st")
	for _, want := range []string{"BACKEND", "app", addr(bs[1]), "active health check failed", "Programmed    True", "Ready         True  Ready: every backend has an endpoint that takes traffic"} {
		if !strings.Contains(text, want) {
			t.Errorf("lbctl status st lacks %q:\n%s", want, text)
		}
	}

	bs[1].Restart(t)
	eventually(t, 10*time.Second, "b healthy again", func() error {
		b, err := backendStatus(t, e.L, "st", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Healthy != 3 || len(b.Ejected) != 0 {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})

	// c answers 500 to traffic (its health endpoint stays fine): outlier detection ejects it.
	bs[2].FailWith(500)
	eventually(t, 10*time.Second, "c shown as ejected by outlier detection", func() error {
		b, err := backendStatus(t, e.L, "st", "app")
		if err != nil {
			return err
		}
		if !slices.Contains(ejectedReasons(b, addr(bs[2])), "outlier detection: consecutive 5xx") || b.Errors == 0 {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})
	bs[2].FailWith(0)
}
