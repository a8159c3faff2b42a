package e2e

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"
)

const sessionPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: session}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - backends: [{name: app}]
      sessionPersistence: {type: Cookie, name: sticky}
  backends:
    - name: app
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

func jarClient() *Client {
	jar, _ := cookiejar.New(nil)
	return &Client{HTTP: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

func TestSessionPersistenceSurvivesNewEndpoints(t *testing.T) {
	t.Parallel()
	all := startBackends(t, "s1", "s2", "s3", "s4", "s5")
	e := setup(t, true, sessionPolicy, all[:3]...)
	waitServing(t, e.URL, "s1", "s2", "s3")
	clients := make([]*Client, 30)
	pinned := map[int]string{}
	for i := range clients {
		clients[i] = jarClient()
		b, err := requestVia(clients[i], e.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		pinned[i] = b
	}
	if s := spreadOf(pinned); len(s) < 3 {
		t.Errorf("30 new clients were balanced onto %v only", s)
	}
	// Two endpoints join.
	push(t, e.L, policy(t, sessionPolicy, map[string]any{"Port": e.Port, "B": all}))
	eventually(t, 20*time.Second, "the new endpoints serve new clients", func() error {
		seen := map[string]bool{}
		for i := 0; i < 50; i++ {
			b, _ := requestVia(newClient(false), e.URL, nil)
			seen[b] = true
		}
		if !seen["s4"] || !seen["s5"] {
			return fmt.Errorf("new clients saw %v", seen)
		}
		return nil
	})
	moved := 0
	for i, c := range clients {
		for j := 0; j < 20; j++ {
			b, err := requestVia(c, e.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if b != pinned[i] {
				moved++
			}
		}
	}
	if moved > 0 {
		t.Errorf("%d of 600 requests from pinned clients left their endpoint after two endpoints were added", moved)
	}
}

func TestSessionPersistenceAcrossWeightedBackends(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "blue", "green")
	e := setup(t, true, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: split}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - backends: [{name: blue, weight: 80}, {name: green, weight: 20}]
      sessionPersistence: {name: sess, acrossBackends: true}
  backends:
    - name: blue
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
    - name: green
      endpoints: [{address: 127.0.0.1, port: {{(index .B 1).Port}}}]
`, bs...)
	waitServing(t, e.URL, "blue", "green")
	first := map[string]int{}
	switched := 0
	const n = 300
	for i := 0; i < n; i++ {
		c := jarClient()
		b0, err := requestVia(c, e.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		first[b0]++
		for j := 0; j < 5; j++ {
			if b, _ := requestVia(c, e.URL, nil); b != b0 {
				switched++
			}
		}
	}
	if switched > 0 {
		t.Errorf("%d of %d later requests switched backend", switched, n*5)
	}
	if share := float64(first["green"]) / n; share < 0.12 || share > 0.28 {
		t.Errorf("new clients on green: %.0f%%, want the weight's 20%% (12-28%%)", share*100)
	}
	t.Logf("%d new clients: %v; every one stayed on its backend for 5 more requests", n, first)
}
