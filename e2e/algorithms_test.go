package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type env struct {
	L    *Lbplane
	E    *Envoy
	Port int
	URL  string
	B    []*Backend
}

// setup starts backends, lbplane and one Envoy (delta or state of the world), and pushes the policy
// rendered from tmpl with .Port (the listener) and .B (the backends).
func setup(t *testing.T, delta bool, tmpl string, backends ...*Backend) *env {
	t.Helper()
	// Policies name the example certificates, which are outside the default files roots.
	e := &env{L: startLbplane(t, "--files-root", certs("")), Port: reservePort(t), B: backends}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
	e.E = startEnvoy(t, e.L, "envoy-"+strings.ReplaceAll(t.Name(), "/", "."), delta)
	push(t, e.L, policy(t, tmpl, e))
	return e
}

// setupWith is setup (delta) with extra template data; .Port is added to it.
func setupWith(t *testing.T, tmpl string, data map[string]any, backends ...*Backend) *env {
	t.Helper()
	// Policies name the example certificates, which are outside the default files roots.
	e := &env{L: startLbplane(t, "--files-root", certs("")), Port: reservePort(t), B: backends}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
	e.E = startEnvoy(t, e.L, "envoy-"+strings.ReplaceAll(t.Name(), "/", "."), true)
	data["Port"] = e.Port
	push(t, e.L, policy(t, tmpl, data))
	return e
}

// oneBackend renders a policy with one backend over every test backend; lb is its loadBalancing (YAML flow
// style, "" for the default) and weighted gives the endpoints weights 1, 2, 3, ...
func oneBackend(protocol, lb string, weighted bool) string {
	weight := ""
	if weighted {
		weight = ", weight: {{inc $i}}"
	}
	if lb != "" {
		lb = "\n      loadBalancing: " + lb
	}
	return `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: p}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: ` + protocol + `}
  backends:
    - name: app` + lb + `
      endpoints:
{{- range $i, $b := .B}}
        - {address: 127.0.0.1, port: {{$b.Port}}` + weight + `}
{{- end}}
`
}

var roundRobin = oneBackend("HTTP", "", false)

func TestRoundRobinSpreadsEvenly(t *testing.T) {
	t.Parallel()
	for _, delta := range []bool{true, false} {
		t.Run(map[bool]string{true: "delta", false: "sotw"}[delta], func(t *testing.T) {
			bs := startBackends(t, "a", "b", "c")
			e := setup(t, delta, roundRobin, bs...)
			waitServing(t, e.URL, "a", "b", "c")
			waitSynced(t, e.L, 1)
			counts := newClient(true).Spread(t, e.URL, 3000, nil)
			for _, b := range bs {
				within(t, "requests to "+b.Name, counts[b.Name], 1000, 0.05)
			}
			t.Logf("spread: %v", counts)
		})
	}
}

func TestWeightedRoundRobin(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "w1", "w2", "w3")
	e := setup(t, true, oneBackend("HTTP", "", true), bs...)
	waitServing(t, e.URL, "w1", "w2", "w3")
	counts := newClient(true).Spread(t, e.URL, 3000, nil)
	within(t, "w1", counts["w1"], 500, 0.05)
	within(t, "w2", counts["w2"], 1000, 0.05)
	within(t, "w3", counts["w3"], 1500, 0.05)
	t.Logf("spread: %v", counts)
}

func TestRandomSpreads(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "r1", "r2", "r3")
	e := setup(t, true, oneBackend("HTTP", "{algorithm: Random}", false), bs...)
	waitServing(t, e.URL, "r1", "r2", "r3")
	counts := newClient(true).Spread(t, e.URL, 3000, nil)
	for _, b := range bs {
		within(t, b.Name, counts[b.Name], 1000, 0.10)
	}
	t.Logf("spread: %v", counts)
}

func TestLeastRequestAvoidsSlowBackend(t *testing.T) {
	t.Parallel()
	bs := []*Backend{startBackend(t, "fast1", 0), startBackend(t, "fast2", 0), startBackend(t, "slow", 100*time.Millisecond)}
	// Envoy draws choiceCount endpoints with replacement and takes the one with fewest requests in flight, so
	// the slow one is still taken whenever every draw is the slow one: 1 in 9 requests with 2 choices (the
	// fast ones then get 4 in 9 each, a ratio of 4 that a busy machine brings near 2.5: 195 against 502 once),
	// 1 in 27 with 3 (a ratio of 13).
	e := setup(t, true, oneBackend("HTTP", "{algorithm: LeastRequest, leastRequest: {choiceCount: 3}}", false), bs...)
	waitServing(t, e.URL, "fast1", "fast2", "slow")
	// 12 concurrent clients keep requests in flight, so that "least requests" has something to compare.
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	c := newClient(true)
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				req, _ := http.NewRequest(http.MethodGet, e.URL, nil)
				b, code, err := c.Do(req)
				if err != nil || code != 200 {
					t.Errorf("status %d err %v", code, err)
					return
				}
				mu.Lock()
				counts[b]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fast := (counts["fast1"] + counts["fast2"]) / 2
	if counts["slow"]*3 > fast {
		t.Errorf("the slow backend got %d requests, the fast ones %d on average: want clearly fewer (under a third)", counts["slow"], fast)
	}
	t.Logf("spread: %v", counts)
}

func TestTCPListenerRoundRobinsConnections(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "t1", "t2", "t3")
	e := setup(t, true, oneBackend("TCP", "", false), bs...)
	addr := fmt.Sprintf("127.0.0.1:%d", e.Port)
	eventually(t, 30*time.Second, "the TCP listener accepts", func() error {
		_, err := tcpRequest(addr)
		return err
	})
	counts := map[string]int{}
	for i := 0; i < 300; i++ {
		b, err := tcpRequest(addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		counts[b]++
	}
	for _, b := range bs {
		within(t, b.Name, counts[b.Name], 100, 0.05)
	}
	t.Logf("connections: %v", counts)
}

// tcpRequest opens a new connection, sends one HTTP request over the raw TCP proxy and returns who answered.
func tcpRequest(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Backend"), nil
}
