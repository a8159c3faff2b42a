package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostStat reads one counter or the health flags of one host from Envoy's /clusters, e.g.
// hostStat(t, e, "default/p/app", "127.0.0.1:8080", "cx_connect_fail").
func hostStat(t *testing.T, e *Envoy, cluster, host, stat string) string {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, "/clusters")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := cluster + "::" + host + "::" + stat + "::"
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	return ""
}

func hostCounter(t *testing.T, e *Envoy, cluster, host, stat string) int {
	t.Helper()
	n, _ := strconv.Atoi(hostStat(t, e, cluster, host, stat))
	return n
}

// TestDeadBackendEjectedAtOnce: with lbplane's defaults (no health checks written), a backend killed under
// load is ejected after its first refused connects, and no request that reaches it after the kill fails:
// the implicit retry sends the few that hit it to another endpoint.
func TestDeadBackendEjectedAtOnce(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "d1", "d2", "d3")
	e := setup(t, true, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: p}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`, bs...)
	waitServing(t, e.URL, "d1", "d2", "d3")
	const cluster = "default/p/app"
	dead := fmt.Sprintf("127.0.0.1:%d", bs[1].Port)

	load := startLoad(e.URL, 200, deadTailWorkers, time.Minute)
	eventually(t, 10*time.Second, "load reaches every backend", func() error {
		load.mu.Lock()
		defer load.mu.Unlock()
		if len(load.Backends) < 3 {
			return fmt.Errorf("%v", load.Backends)
		}
		return nil
	})
	bs[1].Stop()
	killed := time.Now()
	eventually(t, 10*time.Second, "the dead backend is ejected", func() error {
		if f := hostStat(t, e.E, cluster, dead, "health_flags"); !strings.Contains(f, "failed_outlier_check") {
			return fmt.Errorf("health flags %q", f)
		}
		return nil
	})
	ejectedAfter := time.Since(killed).Round(time.Millisecond)
	failsAtEjection := hostCounter(t, e.E, cluster, dead, "cx_connect_fail")
	// Keep the load on for a while: an ejected endpoint gets no more connects.
	okAtEjection := load.OK.Load()
	eventually(t, 30*time.Second, "another 1000 requests are served", func() error {
		if n := load.OK.Load() - okAtEjection; n < 1000 {
			return fmt.Errorf("%d served", n)
		}
		return nil
	})
	load.Stop()
	fails := hostCounter(t, e.E, cluster, dead, "cx_connect_fail")
	t.Logf("ejected at most %s after the kill, after %d refused connects; %d over %d more requests", ejectedAfter, failsAtEjection, fails, load.OK.Load()-okAtEjection)
	if failsAtEjection > 3 {
		t.Errorf("%d refused connects before the ejection; want at most 3 (the first ones)", failsAtEjection)
	}
	if fails != failsAtEjection {
		t.Errorf("the ejected endpoint got %d more connects", fails-failsAtEjection)
	}
	// A request the killed backend was answering fails: the implicit retry retries only what never reached
	// an endpoint (connect failures, refused streams), as a request cut mid-way may have had effects. At most
	// one per worker can be in flight then; every other request must succeed.
	failed := load.Errors()
	if n := load.Failed.Load(); n > int64(deadTailWorkers) || slices.ContainsFunc(failed, func(e string) bool { return !strings.Contains(e, "status 503") }) {
		t.Errorf("%d of %d requests failed (at most %d, cut in flight by the kill, may): %v", n, n+load.OK.Load(), deadTailWorkers, failed)
	}
	if ok := load.OK.Load(); ok < 1000 {
		t.Errorf("only %d requests succeeded; expected at least 1000", ok)
	}
}

// deadTailWorkers is the number of connections TestDeadBackendEjectedAtOnce's load keeps busy.
const deadTailWorkers = 4
