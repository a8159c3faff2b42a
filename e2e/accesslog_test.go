package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

const accessLogPolicies = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: shop}
spec:
  listener: {address: 127.0.0.1, port: {{.JSON}}, protocol: HTTP}
  routes:
    - name: carts
      match: {path: {type: Prefix, value: /carts}}
      backends: [{name: carts}]
  backends:
    - name: carts
      endpoints: [{address: 127.0.0.1, port: {{.B0}}}, {address: 127.0.0.1, port: {{.B1}}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: plain}
spec:
  listener: {address: 127.0.0.1, port: {{.Text}}, protocol: HTTP, accessLog: {format: Text}}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{.B0}}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: quiet}
spec:
  listener: {address: 127.0.0.1, port: {{.Off}}, protocol: HTTP, accessLog: {disabled: true}}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{.B0}}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: half}
spec:
  listener: {address: 127.0.0.1, port: {{.Half}}, protocol: HTTP, accessLog: {samplePercent: 50}}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{.B1}}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: db}
spec:
  listener: {address: 127.0.0.1, port: {{.TCP}}, protocol: TCP}
  backends:
    - name: primary
      endpoints: [{address: 127.0.0.1, port: {{.B1}}}]
`

// accessLine is a JSON access log line as docs/operations.md lists its fields.
type accessLine struct {
	Listener      string `json:"listener"`
	Policy        string `json:"policy"`
	Route         string `json:"route"`
	Backend       string `json:"backend"`
	Cluster       string `json:"cluster"`
	Endpoint      string `json:"endpoint"`
	Client        string `json:"client"`
	Method        string `json:"method"`
	Path          string `json:"path"`
	Status        int    `json:"status"`
	ResponseFlags string `json:"response_flags"`
	BytesSent     int    `json:"bytes_sent"`
}

// accessLines reads Envoy's output (its log file: stdout and stderr) and returns its JSON access log lines
// and its text access log lines (those with lbplane's "policy=" field).
func accessLines(t *testing.T, e *Envoy) ([]accessLine, []string) {
	t.Helper()
	f, err := os.Open(e.Process.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var js []accessLine
	var text []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "{"):
			var a accessLine
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatalf("a line of Envoy's output that starts with { is not JSON: %v: %s", err, line)
			}
			js = append(js, a)
		case strings.Contains(line, " policy="):
			text = append(text, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return js, text
}

// TestAccessLogNamesPolicyRouteBackendAndEndpoint sends requests through a real Envoy fed by an lbplane with
// its default access log (JSON) and checks each line Envoy writes to its standard output: it names the policy,
// the route, the backend and the endpoint that answered. A listener whose policy asks for text writes text
// lines with the same names, one that turns the log off writes none, one that samples half writes about half,
// and a TCP listener writes one line per connection.
func TestAccessLogNamesPolicyRouteBackendAndEndpoint(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "al0", "al1")
	l := startLbplane(t)
	e := startEnvoy(t, l, "envoy-accesslog", true)
	ports := map[string]any{"JSON": reservePort(t), "Text": reservePort(t), "Off": reservePort(t), "Half": reservePort(t),
		"TCP": reservePort(t), "B0": bs[0].Port, "B1": bs[1].Port}
	push(t, l, policy(t, accessLogPolicies, ports))
	base := func(k string) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[k]) }
	waitServing(t, base("JSON")+"/carts", "al0", "al1")
	waitServing(t, base("Text"), "al0")
	waitServing(t, base("Off"), "al0")
	waitServing(t, base("Half"), "al1")
	waitSynced(t, l, 1)

	// waitServing's requests are logged too: the requests counted below have paths of their own.
	c := newClient(true)
	counts := c.Spread(t, base("JSON")+"/carts/42", 20, nil)
	if counts["al0"]+counts["al1"] != 20 {
		t.Fatalf("answers: %v", counts)
	}
	if _, code, err := doWith(c, base("JSON")+"/nowhere", nil); err != nil || code != 404 {
		t.Fatalf("a request no route matches: %d %v", code, err)
	}
	c.Spread(t, base("Text")+"/x", 5, nil)
	c.Spread(t, base("Off")+"/x", 50, nil)
	const halfSent = 400
	c.Spread(t, base("Half")+"/x", halfSent, nil)
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports["TCP"]))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /tcp HTTP/1.1\r\nHost: db\r\nConnection: close\r\n\r\n")
	if b, err := io.ReadAll(conn); err != nil || !strings.Contains(string(b), "200 OK") {
		t.Fatalf("through the TCP listener: %v %q", err, b)
	}
	conn.Close()

	endpoints := map[string]string{fmt.Sprintf("127.0.0.1:%d", bs[0].Port): "al0", fmt.Sprintf("127.0.0.1:%d", bs[1].Port): "al1"}
	listener := func(k string) string { return fmt.Sprintf("http-%d", ports[k]) }
	// Envoy flushes its access log every second: wait for every line expected.
	var js []accessLine
	var text []string
	eventually(t, 20*time.Second, "the access log lines of every request", func() error {
		var all []accessLine
		var allText []string
		all, allText = accessLines(t, e)
		js, text = nil, nil
		n := map[string]int{}
		for _, a := range all {
			if a.Path == "/" || a.Path == "/carts" {
				continue // waitServing's
			}
			js = append(js, a)
			n[a.Listener]++
		}
		for _, line := range allText {
			if strings.Contains(line, `"GET / HTTP`) {
				continue
			}
			text = append(text, line)
		}
		if n[listener("JSON")] < 21 || n[listener("Half")] == 0 || n[fmt.Sprintf("tcp-%d", ports["TCP"])] < 1 || len(text) < 5 {
			return fmt.Errorf("JSON lines by listener: %v; %d text lines", n, len(text))
		}
		return nil
	})
	byEndpoint := map[string]int{}
	half := 0
	for _, a := range js {
		switch a.Listener {
		case listener("JSON"):
			if a.Path == "/nowhere" {
				// No route matched: the policy is still known (its virtual host), nothing upstream is.
				if a.Status != 404 || a.Policy != "default/shop" || a.Route != "" || a.Endpoint != "" || a.ResponseFlags != "NR" {
					t.Errorf("the 404's line: %+v", a)
				}
				continue
			}
			if a.Policy != "default/shop" || a.Route != "default/shop/carts" || a.Backend != "carts" || a.Cluster != "default/shop/carts" ||
				a.Method != "GET" || a.Path != "/carts/42" || a.Status != 200 || a.BytesSent == 0 || !strings.HasPrefix(a.Client, "127.0.0.1:") {
				t.Errorf("line of a request to /carts/42: %+v", a)
			}
			if endpoints[a.Endpoint] == "" {
				t.Errorf("endpoint %q is none of the backends %v", a.Endpoint, endpoints)
			}
			byEndpoint[endpoints[a.Endpoint]]++
		case listener("Off"):
			t.Errorf("a line from the listener whose log is off: %+v", a)
		case listener("Half"):
			half++
			if a.Policy != "default/half" || a.Backend != "app" {
				t.Errorf("a sampled line: %+v", a)
			}
		case fmt.Sprintf("tcp-%d", ports["TCP"]):
			want := fmt.Sprintf("127.0.0.1:%d", bs[1].Port)
			if a.Policy != "default/db" || a.Backend != "primary" || a.Endpoint != want {
				t.Errorf("the TCP connection's line: %+v, want policy default/db, backend primary, endpoint %s", a, want)
			}
		}
	}
	// Every request is one line, naming the endpoint that answered it.
	if byEndpoint["al0"] != counts["al0"] || byEndpoint["al1"] != counts["al1"] {
		t.Errorf("lines by endpoint %v, answers by backend %v", byEndpoint, counts)
	}
	// Half of 400 at random: 200 on average, 10 standard deviations each side.
	if half < 100 || half > 300 {
		t.Errorf("%d lines for %d requests sampled at 50 %%", half, halfSent)
	}
	for _, line := range text {
		if !strings.Contains(line, "listener="+listener("Text")+" policy=default/plain route=default/plain/default backend=app") ||
			!strings.Contains(line, `"GET /x HTTP/1.1" 200`) || !strings.Contains(line, fmt.Sprintf(`"127.0.0.1:%d"`, bs[0].Port)) {
			t.Errorf("text line: %s", line)
		}
	}
	if len(text) != 5 {
		t.Errorf("%d text lines for 5 requests", len(text))
	}
}
