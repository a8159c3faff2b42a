package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/lbplane/lbplane/internal/backend"
)

// startBackendWith is startBackend for a backend that takes PROXY headers or serves TLS.
func startBackendWith(t *testing.T, name string, o backend.ServeOptions) *Backend {
	t.Helper()
	port, lis := listenReserved(t)
	return serveBackend(t, name, 0, port, lis, o, nil)
}

// proxiedRequest sends one HTTP request on a new connection to addr, after a PROXY header from src when src is
// set, and returns the response and the connection's own address.
func proxiedRequest(addr string, src *net.TCPAddr, version byte) (*http.Response, net.Addr, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if src != nil {
		h := proxyproto.HeaderProxyFromAddrs(version, src, conn.RemoteAddr())
		if _, err := h.WriteTo(conn); err != nil {
			return nil, nil, err
		}
	}
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return nil, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, conn.LocalAddr(), nil
}

const proxyProtocolPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: pp-{{.Name}}}
spec:
  listener:
    address: 127.0.0.1
    port: {{.Port}}
    protocol: {{.Protocol}}
{{- if .Accept}}
    proxyProtocol: {}
{{- end}}
  backends:
    - name: app
      proxyProtocol: {version: {{.Version}}}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`

// TestProxyProtocolCarriesTheClientAddress: a backend behind Envoy sees the client's own address and port in
// the PROXY header Envoy sends (v1 and v2, HTTP and TCP listeners), not Envoy's; a listener that accepts the
// PROXY protocol forwards the source its header names, and refuses connections without one.
func TestProxyProtocolCarriesTheClientAddress(t *testing.T) {
	t.Parallel()
	l := startLbplane(t)
	e := startEnvoy(t, l, "envoy-pp", true)
	type listener struct {
		name, protocol, version string
		accept                  bool
		port                    int
		b                       *Backend
	}
	cases := []*listener{
		{name: "http-v1", protocol: "HTTP", version: "V1"},
		{name: "http-v2-accept", protocol: "HTTP", version: "V2", accept: true},
		{name: "tcp-v2", protocol: "TCP", version: "V2"},
		{name: "tcp-v1-accept", protocol: "TCP", version: "V1", accept: true},
	}
	for _, c := range cases {
		c.port = reservePort(t)
		c.b = startBackendWith(t, c.name, backend.ServeOptions{ProxyProtocol: true})
		push(t, l, policy(t, proxyProtocolPolicy, map[string]any{"Name": c.name, "Port": c.port, "Protocol": c.protocol,
			"Accept": c.accept, "Version": c.version, "Backend": c.b.Port}))
	}
	waitSynced(t, l, 1)
	claimed := &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 40123}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", c.port)
			var src *net.TCPAddr
			if c.accept {
				src = claimed
			}
			var resp *http.Response
			eventually(t, 30*time.Second, c.name+" answers", func() error {
				var err error
				resp, _, err = proxiedRequest(addr, src, 2)
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
				return err
			})
			if got := resp.Header.Get("X-Backend"); got != c.name {
				t.Fatalf("answered by %q, want %q", got, c.name)
			}
			// Ten connections, each seen with its own address: the backend does not just see one client.
			for i := 0; i < 10; i++ {
				resp, local, err := proxiedRequest(addr, src, byte(1+i%2))
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				want := local.String()
				if c.accept {
					want = claimed.String()
				}
				if got := resp.Header.Get(backend.PeerHeader); got != want {
					t.Errorf("request %d: the backend saw the client as %q, want %q", i, got, want)
				}
				if c.protocol == "HTTP" && c.accept {
					if got := resp.Header.Get(backend.ForwardedForHeader); got != claimed.IP.String() {
						t.Errorf("request %d: X-Forwarded-For %q, want the PROXY source %s", i, got, claimed.IP)
					}
				}
			}
			if c.accept {
				// Without a PROXY header the listener closes the connection: no client can pass as the balancer.
				resp, _, err := proxiedRequest(addr, nil, 0)
				if err == nil {
					t.Errorf("a connection without a PROXY header got status %d; want it closed", resp.StatusCode)
				}
			}
		})
	}
	if t.Failed() {
		t.Log(e.Clusters(t))
	}
}
