package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/lbplane/lbplane/internal/tools"
)

func certs(name string) string { return filepath.Join(tools.RepoRoot(), "examples", "certs", name) }

func testCA(t *testing.T) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(certs("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("bad test CA")
	}
	return pool
}

const httpsPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: https}
spec:
  listener:
    address: 127.0.0.1
    port: {{.Port}}
    protocol: HTTPS
    hostnames: [app.example.com, api.example.com]
    tls:
      certificates:
        - {certificateFile: {{.Certs}}/app.example.com.crt, privateKeyFile: {{.Certs}}/app.example.com.key, hostnames: [app.example.com]}
        - {certificateFile: {{.Certs}}/api.example.com.crt, privateKeyFile: {{.Certs}}/api.example.com.key, hostnames: [api.example.com]}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
`

// httpsClient verifies the test CA and always dials Envoy, whatever the name.
func httpsClient(t *testing.T, port int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: testCA(t)},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
		},
	}}
}

func TestHTTPSServesTheCertificateOfEachName(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "app")
	e := setupWith(t, httpsPolicy, map[string]any{"Certs": certs(""), "B": bs}, bs...)
	c := httpsClient(t, e.Port)
	for _, name := range []string{"app.example.com", "api.example.com"} {
		var resp *http.Response
		eventually(t, 30*time.Second, "https://"+name+" answers", func() error {
			r, err := c.Get("https://" + name + "/")
			if err != nil {
				return err
			}
			resp = r
			return nil
		})
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "app" {
			t.Errorf("%s: status %d backend %q", name, resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != name {
			t.Errorf("%s was answered with the certificate for %v", name, got)
		}
	}
	// TLS 1.2 with the cipher the benchmarks use, and TLS 1.3.
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", e.Port), &tls.Config{RootCAs: testCA(t), ServerName: "app.example.com", MinVersion: v, MaxVersion: v})
		if err != nil {
			t.Errorf("TLS version %x: %v", v, err)
			continue
		}
		conn.Close()
	}
}

func TestWebSocketThroughHTTPAndHTTPS(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "ws")
	plain := setup(t, true, roundRobin, bs...)
	secure := setupWith(t, httpsPolicy, map[string]any{"Certs": certs(""), "B": bs}, bs...)
	waitServing(t, plain.URL, "ws")
	for _, tc := range []struct {
		name string
		dial func() (*websocket.Conn, error)
	}{
		{"http", func() (*websocket.Conn, error) {
			return websocket.Dial(fmt.Sprintf("ws://127.0.0.1:%d/ws", plain.Port), "", "http://localhost/")
		}},
		{"https", func() (*websocket.Conn, error) {
			cfg, _ := websocket.NewConfig("wss://app.example.com/ws", "https://app.example.com/")
			cfg.TlsConfig = &tls.Config{RootCAs: testCA(t), ServerName: "app.example.com"}
			raw, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", secure.Port), cfg.TlsConfig)
			if err != nil {
				return nil, err
			}
			return websocket.NewClient(cfg, raw)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ws *websocket.Conn
			eventually(t, 30*time.Second, "the WebSocket opens", func() error {
				var err error
				ws, err = tc.dial()
				return err
			})
			defer ws.Close()
			echoes(t, ws, "ws")
		})
	}
}

// echoes checks that ws is served by backend want and echoes a few messages.
func echoes(t *testing.T, ws *websocket.Conn, want string) {
	t.Helper()
	ws.SetDeadline(time.Now().Add(5 * time.Second))
	var hello string
	if err := websocket.Message.Receive(ws, &hello); err != nil || hello != want {
		t.Fatalf("greeting %q %v, want %q", hello, err, want)
	}
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("message %d", i)
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := websocket.Message.Receive(ws, &got); err != nil || got != msg {
			t.Fatalf("echo %q %v, want %q", got, err, msg)
		}
	}
}

const drainPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: drain}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints:
{{- range $i, $b := .B}}
        - {address: 127.0.0.1, port: {{$b.Port}}{{if eq $i $.Draining}}, state: Draining{{end}}}
{{- end}}
`

func TestDrainingEndpointKeepsItsWebSocket(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "d0", "d1", "d2")
	e := setupWith(t, drainPolicy, map[string]any{"B": bs, "Draining": -1}, bs...)
	waitServing(t, e.URL, "d0", "d1", "d2")
	// Open WebSockets until one lands on d2.
	var ws *websocket.Conn
	for i := 0; i < 30 && ws == nil; i++ {
		c, err := websocket.Dial(fmt.Sprintf("ws://127.0.0.1:%d/ws", e.Port), "", "http://localhost/")
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var who string
		if err := websocket.Message.Receive(c, &who); err != nil {
			t.Fatal(err)
		}
		if who == "d2" {
			ws = c
		} else {
			defer c.Close()
		}
	}
	if ws == nil {
		t.Fatal("no WebSocket landed on d2 in 30 tries")
	}
	defer ws.Close()
	push(t, e.L, policy(t, drainPolicy, map[string]any{"Port": e.Port, "B": bs, "Draining": 2}))
	waitSynced(t, e.L, 1)
	eventually(t, 10*time.Second, "d2 gets no new requests", func() error {
		if got := newClient(false).Spread(t, e.URL, 60, nil); got["d2"] > 0 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	got := newClient(true).Spread(t, e.URL, 300, nil)
	if got["d2"] != 0 {
		t.Errorf("the draining endpoint got %d of 300 new requests", got["d2"])
	}
	// The WebSocket opened before the drain still works.
	for i := 0; i < 3; i++ {
		ws.SetDeadline(time.Now().Add(5 * time.Second))
		msg := fmt.Sprintf("still here %d", i)
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatalf("the open WebSocket broke: %v", err)
		}
		var echo string
		if err := websocket.Message.Receive(ws, &echo); err != nil || echo != msg {
			t.Fatalf("the open WebSocket broke: %q %v", echo, err)
		}
	}
	t.Logf("300 new requests after draining d2: %v; its open WebSocket still echoes", got)
}

func TestUpstreamTLSVerifiesTheBackend(t *testing.T) {
	t.Parallel()
	cert, err := tls.LoadX509KeyPair(certs("backend.internal.crt"), certs("backend.internal.key"))
	if err != nil {
		t.Fatal(err)
	}
	b := startBackend(t, "secure", 0)
	b.srv.Close()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	b.Port = lis.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: b.Backend}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	tmpl := `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: up}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: secure
      tls: {sni: {{.SNI}}, caFile: {{.CA}}}
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
`
	e := setupWith(t, tmpl, map[string]any{"SNI": "backend.internal", "CA": certs("ca.crt"), "B": []*Backend{b}}, b)
	waitServing(t, e.URL, "secure")
	// The wrong name: Envoy refuses the backend's certificate, and the client gets a 503.
	push(t, e.L, policy(t, tmpl, map[string]any{"Port": e.Port, "SNI": "other.internal", "CA": certs("ca.crt"), "B": []*Backend{b}}))
	// A cluster update takes effect in well under a second: lbplane re-sends the cluster's endpoints, or the
	// updated cluster would warm for Envoy's 15s EDS fetch timeout.
	eventually(t, 3*time.Second, "a certificate for another name is refused", func() error {
		_, code, err := doWith(newClient(false), e.URL, nil)
		if err != nil || code != 503 {
			return fmt.Errorf("status %d %v", code, err)
		}
		return nil
	})
}
