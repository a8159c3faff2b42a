package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"
)

const hashPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: hash}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing:
        algorithm: {{.Algorithm}}
        hashKeys: [{{.Key}}]
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

type hashCase struct {
	name, key string
	// request sends client i's request and returns who answered.
	request func(t *testing.T, url string, i int) string
}

func hashCases(t *testing.T) []hashCase {
	plain := newClient(true)
	byHeader := func(t *testing.T, url string, i int) string {
		b, err := requestVia(plain, url, map[string]string{"x-user": fmt.Sprintf("user-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	byQuery := func(t *testing.T, url string, i int) string {
		b, err := requestVia(plain, fmt.Sprintf("%s/?user=u%d&other=%d", url, i, time.Now().UnixNano()), nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	byCookie := func(t *testing.T, url string, i int) string {
		b, err := requestVia(plain, url, map[string]string{"Cookie": fmt.Sprintf("sid=s%d; theme=dark", i)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Each source-IP client connects from its own loopback address, 127.0.1.i.
	ipClients := map[int]*Client{}
	bySourceIP := func(t *testing.T, url string, i int) string {
		c, ok := ipClients[i]
		if !ok {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(i+1))}, Timeout: 5 * time.Second}
			c = &Client{HTTP: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}}
			ipClients[i] = c
		}
		b, err := requestVia(c, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []hashCase{
		{"header", "{header: {name: x-user}}", byHeader},
		{"cookie", "{cookie: {name: sid}}", byCookie},
		{"sourceIP", "{sourceIP: {}}", bySourceIP},
		{"queryParameter", "{queryParameter: {name: user}}", byQuery},
	}
}

// assignments sends `rounds` requests for each of `clients` clients and returns where each landed; it fails
// the test if a client does not always land on the same backend.
func assignments(t *testing.T, url string, clients, rounds int, request func(*testing.T, string, int) string) map[int]string {
	t.Helper()
	got := map[int]string{}
	moved := 0
	for r := 0; r < rounds; r++ {
		for i := 0; i < clients; i++ {
			b := request(t, url, i)
			if prev, ok := got[i]; ok && prev != b {
				moved++
			}
			got[i] = b
		}
	}
	if moved > 0 {
		t.Errorf("%d of %d requests left their client's backend: hashing is not sticky", moved, clients*rounds)
	}
	return got
}

func spreadOf(a map[int]string) map[string]int {
	s := map[string]int{}
	for _, b := range a {
		s[b]++
	}
	return s
}

func TestHashingIsStickyForEveryKey(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "h1", "h2", "h3", "h4", "h5")
	for _, hc := range hashCases(t) {
		t.Run(hc.name, func(t *testing.T) {
			e := &env{L: startLbplane(t), Port: reservePort(t), B: bs}
			e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
			startEnvoy(t, e.L, "envoy-"+hc.name, true)
			push(t, e.L, policy(t, hashPolicy, map[string]any{"Port": e.Port, "B": bs, "Algorithm": "RingHash", "Key": hc.key}))
			waitServing(t, e.URL, "h1", "h2", "h3", "h4", "h5")
			a := assignments(t, e.URL, 100, 20, hc.request)
			spread := spreadOf(a)
			if len(spread) < 4 {
				t.Errorf("100 clients landed on only %d of 5 backends: %v (is the key hashed at all?)", len(spread), spread)
			}
			t.Logf("100 clients x 20 requests, 100%% sticky; clients per backend: %v", spread)
		})
	}
}

func TestRemovingAnEndpointRemapsFewClients(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "m1", "m2", "m3", "m4", "m5")
	header := hashCases(t)[0]
	for _, algo := range []string{"RingHash", "Maglev"} {
		t.Run(algo, func(t *testing.T) {
			e := &env{L: startLbplane(t), Port: reservePort(t), B: bs}
			e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
			startEnvoy(t, e.L, "envoy-"+algo, true)
			data := map[string]any{"Port": e.Port, "B": bs, "Algorithm": algo, "Key": header.key}
			push(t, e.L, policy(t, hashPolicy, data))
			waitServing(t, e.URL, "m1", "m2", "m3", "m4", "m5")
			// 500 clients: with 100, chance alone would put more than 30 % on one of 5 endpoints about once in 200 runs.
			const clients = 500
			before := assignments(t, e.URL, clients, 2, header.request)

			data["B"] = bs[:4] // m5 leaves
			push(t, e.L, policy(t, hashPolicy, data))
			eventually(t, 20*time.Second, "m5 gets no traffic", func() error {
				if s := spreadOf(assignments(t, e.URL, clients, 1, header.request)); s["m5"] > 0 {
					return fmt.Errorf("m5 still serves %d clients", s["m5"])
				}
				return nil
			})
			after := assignments(t, e.URL, clients, 2, header.request)
			remapped, lost := 0, 0
			for i := range before {
				if before[i] == "m5" {
					lost++
				}
				if before[i] != after[i] {
					remapped++
				}
			}
			pct := func(n int) float64 { return 100 * float64(n) / clients }
			if pct(remapped) > 30 {
				t.Errorf("%s remapped %.1f%% of clients when 1 of 5 endpoints left; want at most 30%% (ideal 20%%)", algo, pct(remapped))
			}
			t.Logf("%s: 1 of 5 endpoints left: %.1f%% of %d clients remapped (%.1f%% were on it; ideal 20%%)", algo, pct(remapped), clients, pct(lost))
		})
	}
}

func TestGeneratedCookie(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "c1", "c2", "c3")
	e := setup(t, true, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: cookie}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing:
        algorithm: Maglev
        hashKeys: [{cookie: {name: lb, generate: {ttl: 1h, path: /app, secure: true, sameSite: Strict}}}]
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`, bs...)
	waitServing(t, e.URL, "c1", "c2", "c3")
	resp, err := http.Get(e.URL + "/app")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"lb=", "Max-Age=3600", "Path=/app", "Secure", "SameSite=Strict", "HttpOnly"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	first := resp.Header.Get("X-Backend")
	// Sending the cookie back sticks. Envoy derives a new cookie from the client's address, so new clients
	// come from addresses of their own (127.0.2.i) to spread.
	spread := map[string]int{}
	for i := 0; i < 30; i++ {
		jar, _ := cookiejar.New(nil)
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 2, byte(i+1))}, Timeout: 5 * time.Second}
		c := &Client{HTTP: &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}}
		seen := map[string]bool{}
		for j := 0; j < 10; j++ {
			// http.Client drops Secure cookies over plain HTTP, so send it by hand.
			b, code, err := doWith(c, e.URL+"/app", cookieFrom(jar, e.URL+"/app"))
			if err != nil || code != 200 {
				t.Fatalf("%v %d", err, code)
			}
			seen[b] = true
			if j == 0 {
				spread[b]++
			}
		}
		if len(seen) != 1 {
			t.Errorf("client %d was served by %v: the cookie did not stick", i, seen)
		}
	}
	if len(spread) < 2 {
		t.Errorf("30 new clients all landed on %v", spread)
	}
	t.Logf("Set-Cookie: %s (first served by %s); 30 new clients spread %v, each sticky over 10 requests", set, first, spread)
}
