package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/backend"
	"github.com/lbplane/lbplane/internal/tools"
)

// TestEveryExampleLintsCleanAndServes takes every file in examples/ as a user would: `lbctl lint` finds
// nothing in it, and pushed to lbplane (from a directory holding examples/certs, with --files-root ., as the
// README runs it) each of its policies becomes Programmed on a real Envoy and answers a request through its
// listener from one of its backends. The ports are the only change: each listener gets a free port, and
// each backend port a real backend of this test, serving TLS or expecting a PROXY header where the example
// asks for it.
//
// A request is not sent where this test has no backend the example could reach: DNS names (example names
// that do not resolve here). Those policies are still checked for lint, Programmed and Envoy's ACK.
func TestEveryExampleLintsCleanAndServes(t *testing.T) {
	t.Parallel()
	tools.Require(t, "envoy")
	files, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "examples", "*.yaml"))
	if len(files) < 20 {
		t.Fatalf("found only %d examples", len(files))
	}
	dir := t.TempDir()
	certDir := filepath.Join(dir, "examples", "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(certs("*"))
	for _, e := range entries {
		copyFile(t, e, filepath.Join(certDir, filepath.Base(e)))
	}
	l := startLbplaneIn(t, dir, append([]string{"--files-root", "."}, loopbackBackends...)...)
	startEnvoy(t, l, "envoy-1", true)
	waitSynced(t, l, 1)
	backendTLS := exampleBackendTLS(t)

	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			out, errOut, err := lbctl(t, l, "", "lint", "--allow-backend-cidrs", "127.0.0.0/8,::1/128", "-f", file)
			if err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("lbctl lint -f examples/%s.yaml: %v\n%s%s", name, err, out, errOut)
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var docs [][]byte
			var policies []*v1alpha1.LoadBalancerPolicy
			for _, d := range bytes.Split(raw, []byte("\n---")) {
				if len(bytes.TrimSpace(stripComments(d))) == 0 {
					continue
				}
				p := &v1alpha1.LoadBalancerPolicy{}
				if err := yaml.UnmarshalStrict(d, p); err != nil {
					t.Fatalf("decode: %v", err)
				}
				serveExample(t, p, backendTLS)
				b, err := yaml.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, b)
				policies = append(policies, p)
			}
			push(t, l, bytes.Join(docs, []byte("\n---\n")))
			t.Cleanup(func() {
				for _, p := range policies {
					if err := l.Client.Delete(context.Background(), namespaceOf(p), p.Name); err != nil {
						t.Errorf("delete %s: %v", p.Name, err)
					}
				}
			})
			for _, p := range policies {
				eventually(t, 30*time.Second, p.Name+" is Programmed", func() error {
					got, err := l.Client.Get(context.Background(), namespaceOf(p), p.Name)
					if err != nil {
						return err
					}
					for _, typ := range []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionProgrammed} {
						if c := cond(got, typ); c.Status != "True" {
							return fmt.Errorf("%s %s %s: %s", typ, c.Status, c.Reason, c.Message)
						}
					}
					return nil
				})
				if why := unreachableByTest(p); why != "" {
					t.Logf("%s: Programmed; no request sent: %s", p.Name, why)
					continue
				}
				eventually(t, 30*time.Second, p.Name+" answers from one of its backends", func() error {
					return requestThrough(p)
				})
			}
		})
	}
}

func namespaceOf(p *v1alpha1.LoadBalancerPolicy) string {
	if p.Namespace == "" {
		return "default"
	}
	return p.Namespace
}

// stripComments drops the comment lines of a YAML document (a file may open with a comment only).
func stripComments(d []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(d, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// exampleBackendTLS is what the examples' TLS backends present: the certificates of examples/certs signed
// by its ca.crt (Go picks the one whose name matches the SNI Envoy sends).
func exampleBackendTLS(t *testing.T) *tls.Config {
	t.Helper()
	var list []tls.Certificate
	for _, n := range []string{"backend.internal", "api.example.com"} {
		c, err := tls.LoadX509KeyPair(certs(n+".crt"), certs(n+".key"))
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, c)
	}
	return &tls.Config{Certificates: list}
}

// serveExample gives p's listener a free port and each of its backends' endpoint ports (and a health check's
// own port) a real backend of this test, named after the example's port, speaking what the backend asks for:
// TLS, a PROXY header, HTTP/2 without TLS.
func serveExample(t *testing.T, p *v1alpha1.LoadBalancerPolicy, backendTLS *tls.Config) {
	t.Helper()
	p.Spec.Listener.Port = int32(reservePort(t))
	started := map[int32]int32{}
	backendOn := func(orig int32, o backend.ServeOptions, h2c bool) int32 {
		if port, ok := started[orig]; ok {
			return port
		}
		port, lis := listenReserved(t)
		serveBackend(t, fmt.Sprintf("b%d", orig), 0, port, lis, o, func(s *http.Server) {
			if h2c { // HTTP/2 without TLS, as Envoy speaks it to a backend with connection.protocol HTTP2
				s.Protocols = new(http.Protocols)
				s.Protocols.SetHTTP1(true)
				s.Protocols.SetUnencryptedHTTP2(true)
			}
		})
		started[orig] = int32(port)
		return int32(port)
	}
	for i := range p.Spec.Backends {
		b := &p.Spec.Backends[i]
		var o backend.ServeOptions
		if b.TLS != nil {
			o.TLS = backendTLS
		}
		o.ProxyProtocol = b.ProxyProtocol != nil
		h2c := b.Connection != nil && b.Connection.Protocol == v1alpha1.UpstreamHTTP2
		for j := range b.Endpoints {
			b.Endpoints[j].Port = backendOn(b.Endpoints[j].Port, o, h2c)
		}
		if hc := b.HealthCheck; hc != nil && hc.Active != nil && hc.Active.Port != nil {
			port := backendOn(*hc.Active.Port, backend.ServeOptions{}, false)
			hc.Active.Port = &port
		}
	}
}

// unreachableByTest says why no request can go through p to a backend of this test, or "".
func unreachableByTest(p *v1alpha1.LoadBalancerPolicy) string {
	for _, b := range p.Spec.Backends {
		if b.DNS != nil {
			return "backend " + b.Name + " names hosts by DNS"
		}
	}
	return ""
}

// requestThrough sends a request through p's listener as a client of that listener would (a PROXY header
// first where the listener requires one, TLS with the first hostname as SNI on HTTPS, that hostname as
// Host), to "/" and to each route's path, and wants an answer from one of the test's backends.
func requestThrough(p *v1alpha1.LoadBalancerPolicy) error {
	lst := p.Spec.Listener
	host := "example.test"
	if len(lst.Hostnames) > 0 {
		host = strings.Replace(lst.Hostnames[0], "*", "www", 1)
	}
	paths := []string{"/"}
	for _, r := range p.Spec.Routes {
		if r.Match.Path != nil && !slices.Contains(paths, r.Match.Path.Value) {
			paths = append(paths, r.Match.Path.Value)
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", lst.Port)
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil && lst.ProxyProtocol != nil {
			l, r := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
			_, err = fmt.Fprintf(c, "PROXY TCP4 %s %s %d %d\r\n", l.IP, r.IP, l.Port, r.Port)
		}
		return c, err
	}}
	scheme := "http"
	if lst.Protocol == v1alpha1.ProtocolHTTPS {
		scheme = "https"
		tr.TLSClientConfig = &tls.Config{ServerName: host, InsecureSkipVerify: true} // the routing is checked here; TLS is in tls_test.go
	}
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var errs []string
	for _, path := range paths {
		req, _ := http.NewRequest("GET", scheme+"://"+host+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if b := resp.Header.Get("X-Backend"); resp.StatusCode < 300 && strings.HasPrefix(b, "b") {
			return nil
		}
		errs = append(errs, fmt.Sprintf("%s: %s X-Backend %q", path, resp.Status, resp.Header.Get("X-Backend")))
	}
	return fmt.Errorf("no path answered from a backend: %s", strings.Join(errs, "; "))
}
