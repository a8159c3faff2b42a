package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

const httpsEdgePolicy = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener:
    address: 127.0.0.1
    port: {{.Port}}
    protocol: HTTPS
{{.Extra}}
    tls:
      certificates:
        - {certificateFile: {{.Certs}}/app.example.com.crt, privateKeyFile: {{.Certs}}/app.example.com.key}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{.B}}}]
`

// TestDownstreamHTTP2IsExplicit: plain HTTP listeners speak HTTP/1.1 only unless http2.enabled turns h2c on;
// HTTPS listeners offer h2 by ALPN unless http2.enabled is false.
func TestDownstreamHTTP2IsExplicit(t *testing.T) {
	t.Parallel()
	e := startEdge(t, "")
	h2c := func(addr string) (*http.Response, error) {
		// HTTP/2 with prior knowledge and nothing else: no fallback to HTTP/1.1.
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: &protocols}}
		resp, err := c.Get("http://" + addr + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	if resp, err := h2c(e.addr); err == nil && resp.StatusCode == 200 {
		t.Errorf("HTTP listener by default: h2c prior knowledge was served (%s), want it refused", resp.Proto)
	}
	port := reservePort(t)
	push(t, e.lb, policy(t, edgePolicy, map[string]any{"Name": "h2c", "Port": port, "B": e.be.port, "Extra": "    http2: {enabled: true}"}))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitServing(t, "http://"+addr+"/", "recorder")
	if resp, err := h2c(addr); err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Errorf("HTTP listener with http2.enabled: h2c got %v %v, want 200 over HTTP/2", resp, err)
	}

	alpn := func(port int) string {
		var proto string
		eventually(t, 30*time.Second, "the HTTPS listener answers", func() error {
			c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: testCA(t), ServerName: "app.example.com", NextProtos: []string{"h2", "http/1.1"}})
			if err != nil {
				return err
			}
			proto = c.ConnectionState().NegotiatedProtocol
			return c.Close()
		})
		return proto
	}
	for _, tc := range []struct{ name, extra, want string }{
		{"https-default", "", "h2"},
		{"https-h1", "    http2: {enabled: false}", "http/1.1"},
	} {
		p := reservePort(t)
		push(t, e.lb, policy(t, httpsEdgePolicy, map[string]any{"Name": tc.name, "Port": p, "B": e.be.port, "Extra": tc.extra, "Certs": certs("")}))
		if got := alpn(p); got != tc.want {
			t.Errorf("%s: ALPN negotiated %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestListenerConnectionLimit: spec.listener.limits.maxConnections closes connections beyond it as they
// are accepted, while those within it keep being served.
func TestListenerConnectionLimit(t *testing.T) {
	t.Parallel()
	e := startEdge(t, "    limits: {maxConnections: 50}")
	tr := startTrickle(t, e.url, 2, 50*time.Millisecond, 30*time.Second)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// 100 more connections against a limit of 50 (3 already taken: the trickle's 2 and the readiness check's idle one).
	for range 100 {
		c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	closed := 0
	for _, c := range held {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	requireTrickle(t, tr, 10)
	t.Logf("listener limit 50: %d of 100 extra connections closed by Envoy", closed)
	if closed < 50 || closed > 55 {
		t.Errorf("want about 53 of 100 extra connections closed (limit 50; the trickle and the readiness check hold 3), got %d", closed)
	}
}
