package e2e

import (
	"fmt"
	"github.com/lbplane/lbplane/internal/backend"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// watch sends requests at a steady pace and records, per backend, when it last answered and how many
// requests failed and when.
type watch struct {
	mu          sync.Mutex
	last        map[string]time.Time
	first       map[string]time.Time
	failures    int
	lastFailure time.Time
	stop        chan struct{}
	done        chan struct{}
}

func startWatch(url string, every time.Duration) *watch {
	w := &watch{last: map[string]time.Time{}, first: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	c := newClient(false) // a new connection per request, so that nothing rides on an old connection
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			b, code, err := doWith(c, url, nil)
			now := time.Now()
			w.mu.Lock()
			if err != nil || code != 200 {
				w.failures++
				w.lastFailure = now
			} else {
				w.last[b] = now
				if _, ok := w.first[b]; !ok {
					w.first[b] = now
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *watch) Stop() { close(w.stop); <-w.done }

func (w *watch) lastServed(b string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[b]
}

// resetFirst forgets when backends first answered, to time a return.
func (w *watch) resetFirst() {
	w.mu.Lock()
	w.first = map[string]time.Time{}
	w.mu.Unlock()
}

// expectBack runs recover and checks that backend b gets traffic again within backBound.
func (w *watch) expectBack(t *testing.T, b string, recover func()) {
	t.Helper()
	w.resetFirst()
	backAt := time.Now()
	recover()
	eventually(t, backBound+2*time.Second, b+" serves again", func() error {
		if w.firstServed(b).IsZero() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if back := w.firstServed(b).Sub(backAt); back > backBound {
		t.Errorf("%s got traffic %s after recovering; want at most %s", b, back.Round(time.Millisecond), backBound)
	} else {
		t.Logf("%s back in rotation %s after recovering (bound %s)", b, back.Round(time.Millisecond), backBound)
	}
}

func (w *watch) firstServed(b string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first[b]
}

const healthPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: hc}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
{{- if .HTTP2}}
      connection: {protocol: HTTP2}
{{- end}}
      healthCheck:
        active: {type: {{.Type}}, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 2{{.Extra}}}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// The bound the feature promises: a failing endpoint is out within interval x unhealthyThreshold + one
// interval, and back within interval x healthyThreshold + one interval.
const (
	hcInterval = time.Second
	outBound   = hcInterval*2 + hcInterval
	backBound  = hcInterval*2 + hcInterval
)

func TestActiveHTTPHealthCheck(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	data := map[string]any{"Type": "HTTP", "Extra": ", http: {path: /healthz}", "B": bs}
	e := setupWith(t, healthPolicy, data, bs...)
	waitServing(t, e.URL, "a", "b", "c")
	eventually(t, 10*time.Second, "c is probed", func() error {
		if bs[2].Probes.Load() == 0 {
			return fmt.Errorf("no probe yet")
		}
		return nil
	})
	if h := bs[2].LastProbeHost(); h != fmt.Sprintf("127.0.0.1:%d", bs[2].Port) {
		t.Errorf("probes carried Host %q, want the endpoint's own address", h)
	}
	w := startWatch(e.URL, 20*time.Millisecond)
	defer w.Stop()
	time.Sleep(500 * time.Millisecond)

	failAt := time.Now()
	bs[2].SetHealth(http.StatusServiceUnavailable)
	time.Sleep(outBound + 2*time.Second)
	if gone := w.lastServed("c").Sub(failAt); gone > outBound {
		t.Errorf("c answered traffic %s after its health check failed; want at most %s", gone.Round(time.Millisecond), outBound)
	} else {
		t.Logf("c out of rotation %s after its health endpoint turned 503 (bound %s)", gone.Round(time.Millisecond), outBound)
	}

	w.expectBack(t, "c", func() { bs[2].SetHealth(http.StatusOK) })
}

func TestActiveTCPHealthCheck(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	e := setupWith(t, healthPolicy, map[string]any{"Type": "TCP", "Extra": "", "B": bs}, bs...)
	waitServing(t, e.URL, "a", "b", "c")
	w := startWatch(e.URL, 20*time.Millisecond)
	defer w.Stop()
	time.Sleep(500 * time.Millisecond)

	closedAt := time.Now()
	bs[2].Stop() // connections to c are refused from now on
	time.Sleep(outBound + 2*time.Second)
	w.mu.Lock()
	lastFailure, failures := w.lastFailure, w.failures
	w.mu.Unlock()
	if d := lastFailure.Sub(closedAt); failures > 0 && d > outBound {
		t.Errorf("requests still failed %s after c closed; want none after %s", d.Round(time.Millisecond), outBound)
	}
	t.Logf("c closed: %d requests failed in the first %s, none after", failures, lastFailure.Sub(closedAt).Round(time.Millisecond))

	w.expectBack(t, "c", func() { bs[2].Restart(t) })
}

// grpcBackend serves the gRPC health service and, for everything else, the sample backend, over h2c.
type grpcBackend struct {
	*Backend
	health *health.Server
}

func startGRPCBackend(t *testing.T, name string) *grpcBackend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{Backend: backend.New(name, 1024, 0), Port: lis.Addr().(*net.TCPAddr).Port, lis: lis}
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			gs.ServeHTTP(w, r)
			return
		}
		b.Backend.ServeHTTP(w, r)
	})
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // h2c, as gRPC backends speak it
	b.srv = &http.Server{Handler: h, Protocols: &protocols}
	go b.srv.Serve(lis)
	t.Cleanup(func() { b.srv.Close(); gs.Stop() })
	return &grpcBackend{Backend: b, health: hs}
}

func TestActiveGRPCHealthCheck(t *testing.T) {
	t.Parallel()
	gb := []*grpcBackend{startGRPCBackend(t, "a"), startGRPCBackend(t, "b"), startGRPCBackend(t, "c")}
	bs := []*Backend{gb[0].Backend, gb[1].Backend, gb[2].Backend}
	e := setupWith(t, healthPolicy, map[string]any{"Type": "GRPC", "Extra": "", "HTTP2": true, "B": bs}, bs...)
	waitServing(t, e.URL, "a", "b", "c")
	w := startWatch(e.URL, 20*time.Millisecond)
	defer w.Stop()
	time.Sleep(500 * time.Millisecond)

	failAt := time.Now()
	gb[2].health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	time.Sleep(outBound + 2*time.Second)
	if gone := w.lastServed("c").Sub(failAt); gone > outBound {
		t.Errorf("c answered traffic %s after reporting NOT_SERVING; want at most %s\n%s", gone.Round(time.Millisecond), outBound, e.E.Clusters(t))
	}
	w.expectBack(t, "c", func() { gb[2].health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) })
}

func TestOutlierDetectionWithRetriesHidesA5xxBackend(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "good1", "good2", "bad")
	bs[2].FailWith(http.StatusInternalServerError)
	e := setup(t, true, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: outlier}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - backends: [{name: app}]
      retry: {conditions: [5xx], attempts: 2}
  backends:
    - name: app
      healthCheck:
        passive: {consecutive5xx: 3, interval: 1s, baseEjectionTime: 30s, maxEjectionPercent: 50}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`, bs...)
	waitServing(t, e.URL, "good1", "good2")
	before := bs[2].Served.Load()
	got := newClient(true).Spread(t, e.URL, 300, nil) // fails the test on any non-200
	hits := bs[2].Served.Load() - before
	if hits > 4 {
		t.Errorf("the 5xx backend got %d requests; want it ejected after 3 consecutive 5xx", hits)
	}
	if got["bad"] != 0 {
		t.Errorf("the client got answers from the bad backend: %v", got)
	}
	t.Logf("300 requests, all 200 (%v); the 500-answering backend saw %d before it was ejected", got, hits)
}

func TestRetriesOnConnectFailureHideAStoppedBackend(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "r1", "r2", "r3")
	e := setup(t, true, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: retry}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - backends: [{name: app}]
      retry: {conditions: [connect-failure, reset], attempts: 2}
  backends:
    - name: app
      connectTimeout: 250ms
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`, bs...)
	waitServing(t, e.URL, "r1", "r2", "r3")
	load := startLoad(e.URL, 300, 6, time.Minute)
	time.Sleep(time.Second)
	bs[2].Stop()
	time.Sleep(3 * time.Second)
	load.Stop()
	load.RequireNoFailures(t, 500)
	t.Logf("%d requests, one of three backends stopped halfway, %d failed; served by %v", load.OK.Load(), load.Failed.Load(), load.Backends)
}

func TestCircuitBreakerShedsOverflow(t *testing.T) {
	t.Parallel()
	slow := startBackend(t, "slow", 300*time.Millisecond)
	e := setup(t, true, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: cb}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      circuitBreakers: {maxConnections: 1, maxPendingRequests: 1, maxRequests: 1}
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
`, slow)
	waitServing(t, e.URL, "slow")
	var ok, overloaded, other atomic.Int64
	var wg sync.WaitGroup
	c := newClient(false)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.HTTP.Get(e.URL)
			if err != nil {
				other.Add(1)
				return
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode == 200:
				ok.Add(1)
			case resp.StatusCode == 503 && resp.Header.Get("x-envoy-overloaded") == "true":
				overloaded.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() == 0 || overloaded.Load() == 0 || other.Load() != 0 {
		t.Errorf("10 concurrent requests: %d ok, %d 503 overloaded, %d other; want some of each of the first two and none else",
			ok.Load(), overloaded.Load(), other.Load())
	}
	t.Logf("10 concurrent requests to a slow backend capped at 1 request + 1 pending: %d ok, %d shed with 503 x-envoy-overloaded", ok.Load(), overloaded.Load())
}
