package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

const rateLimitPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: limited}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - name: limited
      match: {path: {value: /limited}}
      backends: [{name: app}]
      # The refill is so slow that the burst alone decides: {{.Burst}} tokens, then 429.
      rateLimit: {requests: 1, interval: 24h, burst: {{.Burst}}}
    - name: free
      backends: [{name: app}]
  backends:
    - name: app
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: limited-tcp}
spec:
  listener:
    address: 127.0.0.1
    port: {{.TCPPort}}
    protocol: TCP
    rateLimit: {requests: 1, interval: 24h, burst: {{.Burst}}}
  backends:
    - name: app
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// TestRateLimitAnswers429ForTheExcess sends a concurrent burst over a route's bucket: exactly the requests
// beyond the bucket get 429 (within 5 %), the rest are served, and a route without a limit is not touched.
// On a TCP listener the bucket counts connections: those beyond it are closed.
func TestRateLimitAnswers429ForTheExcess(t *testing.T) {
	t.Parallel()
	const burst, sent = 50, 200
	bs := startBackends(t, "a", "b")
	data := map[string]any{"Burst": burst, "B": bs, "TCPPort": reservePort(t)}
	e := setupWith(t, rateLimitPolicy, data, bs...)
	waitServing(t, e.URL+"/", "a", "b")
	waitSynced(t, e.L, 1)

	c := newClient(true)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	work := make(chan int, sent)
	for i := 0; i < sent; i++ {
		work <- i
	}
	close(work)
	for w := 0; w < 10; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				req, _ := http.NewRequest(http.MethodGet, e.URL+"/limited", nil)
				_, code, err := c.Do(req)
				if err != nil {
					code = -1
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("HTTP burst of %d over a bucket of %d: %v", sent, burst, codes)
	if codes[200]+codes[429] != sent {
		t.Errorf("only 200 and 429 expected: %v", codes)
	}
	within(t, "429 answers", codes[429], sent-burst, 0.05)
	within(t, "200 answers", codes[200], burst, 0.05)
	// The other route has no limit.
	for i := 0; i < 20; i++ {
		if _, err := requestVia(c, e.URL+"/free", nil); err != nil {
			t.Fatalf("the route without a limit: %v", err)
		}
	}

	addr := fmt.Sprintf("127.0.0.1:%d", data["TCPPort"])
	accepted := 0
	eventually(t, 30*time.Second, "the TCP listener accepts", func() error {
		_, err := tcpRequest(addr)
		if err == nil {
			accepted++
		}
		return err
	})
	refused := 0
	for i := 1; i < sent; i++ {
		if _, err := tcpRequest(addr); err != nil {
			refused++
		} else {
			accepted++
		}
	}
	t.Logf("TCP: %d connections served, %d closed", accepted, refused)
	within(t, "closed connections", refused, sent-burst, 0.05)
	within(t, "served connections", accepted, burst, 0.05)
}
