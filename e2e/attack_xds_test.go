package e2e

// Attacks on the xDS port, against the real lbplane and real Envoys on loopback. Each must fail for the
// attacker; each also has a control (the rightful client, or the same measurement without the attack) so
// that the test can fail.

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// startEnvoyInGroup is startEnvoy for another proxy group.
func startEnvoyInGroup(t *testing.T, l *Lbplane, nodeID, group string, delta bool) *Envoy {
	t.Helper()
	return startEnvoyWith(t, l, nodeID, group, delta, envoyTLS(t, l, nodeID, group))
}

// lbplaneCA is the CA lbplane created in its data directory.
func lbplaneCA(t *testing.T, l *Lbplane) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.DataDir, serve.PKIDir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatal("lbplane's CA file holds no certificate")
	}
	return p
}

// issuedPair is a client certificate lbplane issues for node in group, as an attacker who got one would hold.
func issuedPair(t *testing.T, l *Lbplane, node, group string) *tls.Certificate {
	t.Helper()
	c, err := l.Client.IssueCertificate(context.Background(), node, group)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair([]byte(c.Certificate), []byte(c.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// xdsConn dials lbplane's xDS port over TLS with cert (nil: no client certificate), or in plaintext.
func xdsConn(t *testing.T, l *Lbplane, cert *tls.Certificate, plaintext bool) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if !plaintext {
		tc := &tls.Config{RootCAs: lbplaneCA(t, l), ServerName: "127.0.0.1"}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(l.XDSAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// secretNames decodes the Secrets in a SotW response.
func secretNames(t *testing.T, r *discovery.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		s := &tlsv3.Secret{}
		if err := a.UnmarshalTo(s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// sotwAsk opens a SotW stream, sends one request and returns the first response or the stream's error.
func sotwAsk(conn *grpc.ClientConn, node *corev3.Node, typ string, names []string) (*discovery.DiscoveryResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: names}); err != nil {
		return nil, err
	}
	return s.Recv()
}

// deltaAsk opens a delta stream, subscribes to names and returns the names of every resource it is sent
// within `within`, or the stream's error. Silence (no response) is how delta answers names it will not serve.
func deltaAsk(conn *grpc.ClientConn, node *corev3.Node, typ string, names []string, within time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: typ, ResourceNamesSubscribe: names}); err != nil {
		return nil, err
	}
	var got []string
	for {
		r, err := s.Recv()
		if err != nil {
			// The deadline travels to the server, which may end the stream just before the client's own timer.
			if ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
				return got, nil
			}
			return got, err
		}
		for _, res := range r.Resources {
			got = append(got, res.Name)
		}
	}
}

func inGroup(doc []byte, group string) []byte {
	return []byte(strings.Replace(string(doc), "spec:\n", "spec:\n  proxyGroup: "+group+"\n", 1))
}

// victimSecrets pushes an HTTPS policy to group "victim" and returns its Secret names, as a rightful client
// of that group is served them (the control: the attacks below ask for exactly these).
func victimSecrets(t *testing.T, l *Lbplane, port int, bs []*Backend) []string {
	t.Helper()
	push(t, l, inGroup(policy(t, httpsPolicy, map[string]any{"Certs": certs(""), "B": bs, "Port": port}), "victim"))
	probe := xdsConn(t, l, issuedPair(t, l, "probe", "victim"), false)
	var names []string
	eventually(t, 30*time.Second, "the victim group's secrets are served to its own nodes", func() error {
		r, err := sotwAsk(probe, &corev3.Node{Id: "probe", Cluster: "victim"}, resource.SecretType, []string{"*"})
		if err != nil {
			return err
		}
		if names = secretNames(t, r); len(names) != 2 {
			return fmt.Errorf("served %v", names)
		}
		return nil
	})
	return names
}

func TestAttackXDSIdentityAndAuthorization(t *testing.T) {
	t.Parallel()
	// The victim's listener serves the example certificates.
	l := startLbplane(t, "--files-root", certs(""))
	bs := startBackends(t, "v1")
	secrets := victimSecrets(t, l, reservePort(t), bs)
	t.Logf("victim group secrets: %v", secrets)

	attacker := issuedPair(t, l, "attacker", "default")
	node := &corev3.Node{Id: "attacker", Cluster: "default"}
	all := append([]string{"*"}, secrets...)

	// A valid certificate for group default, asking for the victim group's secrets by name and by wildcard.
	conn := xdsConn(t, l, attacker, false)
	r, err := sotwAsk(conn, node, resource.SecretType, all)
	if err != nil {
		t.Fatalf("the attacker's own group was refused: %v", err)
	}
	if got := secretNames(t, r); len(got) != 0 {
		t.Errorf("SotW: another group's secrets were served: %v", got)
	}
	if got, err := deltaAsk(conn, node, resource.SecretType, all, 2*time.Second); err != nil || len(got) != 0 {
		t.Errorf("delta: another group's secrets were served: %v (%v)", got, err)
	}
	if got, err := deltaAsk(conn, node, resource.ClusterType, []string{"*"}, 2*time.Second); err != nil || slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, "https") }) {
		t.Errorf("delta: another group's clusters were served: %v (%v)", got, err)
	}

	// refused checks the stream failed; want is a part of the error when it is lbplane's (an authorization
	// refusal), and "" when the TLS handshake itself fails (gRPC reports that in words of its own).
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want refused (%s)", what, err, want)
		} else {
			t.Logf("%s: refused: %.150s", what, err)
		}
	}
	victimNode := &corev3.Node{Id: "attacker", Cluster: "victim"}
	_, err = sotwAsk(conn, victimNode, resource.SecretType, secrets)
	refused("SotW, certificate for group default claiming group victim", err, "PermissionDenied")
	_, err = deltaAsk(conn, victimNode, resource.SecretType, secrets, 5*time.Second)
	refused("delta, certificate for group default claiming group victim", err, "PermissionDenied")
	_, err = sotwAsk(conn, &corev3.Node{Id: "probe", Cluster: "victim"}, resource.SecretType, secrets)
	refused("SotW, certificate naming node attacker claiming node probe", err, "PermissionDenied")
	_, err = deltaAsk(conn, &corev3.Node{Id: "probe", Cluster: "victim"}, resource.SecretType, secrets, 5*time.Second)
	refused("delta, certificate naming node attacker claiming node probe", err, "PermissionDenied")

	// No certificate, plaintext, another CA, an expired certificate from lbplane's own CA.
	anon := xdsConn(t, l, nil, false)
	_, err = sotwAsk(anon, victimNode, resource.SecretType, secrets)
	refused("SotW without a client certificate", err, "")
	_, err = deltaAsk(anon, victimNode, resource.SecretType, secrets, 5*time.Second)
	refused("delta without a client certificate", err, "")
	plain := xdsConn(t, l, nil, true)
	_, err = sotwAsk(plain, victimNode, resource.SecretType, secrets)
	refused("SotW in plaintext", err, "")
	_, err = deltaAsk(plain, victimNode, resource.SecretType, secrets, 5*time.Second)
	refused("delta in plaintext", err, "")

	otherCA, _, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	is, err := otherCA.IssueClient("probe", "victim", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sotwAsk(xdsConn(t, l, &foreign, false), &corev3.Node{Id: "probe", Cluster: "victim"}, resource.SecretType, secrets)
	refused("a certificate from another CA", err, "")
	expired := expiredCert(t, l, "probe", "victim")
	_, err = deltaAsk(xdsConn(t, l, expired, false), &corev3.Node{Id: "probe", Cluster: "victim"}, resource.SecretType, secrets, 5*time.Second)
	refused("an expired certificate from lbplane's CA", err, "")
}

// expiredCert signs, with lbplane's own CA key (read from its data directory, as only a test can), a
// certificate for node in group that expired an hour ago.
func expiredCert(t *testing.T, l *Lbplane, node, group string) *tls.Certificate {
	t.Helper()
	dir := filepath.Join(l.DataDir, serve.PKIDir)
	caPair, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caPair.Certificate[0])
	key := issuedPair(t, l, "throwaway", group).PrivateKey.(crypto.Signer)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: node, OrganizationalUnit: []string{group}},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caPair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// An attacker holding 20 streams of one kind while real Envoys open streams of the other kind (the numbers
// collide: go-control-plane numbers SotW and delta streams each from 1) gets nothing of the victims', and
// every real Envoy stays listed throughout.
func TestAttackStreamCollision(t *testing.T) {
	t.Parallel()
	for _, attackerDelta := range []bool{true, false} {
		t.Run(map[bool]string{true: "attacker-delta-victim-sotw", false: "attacker-sotw-victim-delta"}[attackerDelta], func(t *testing.T) {
			l := startLbplane(t, "--files-root", certs(""))
			bs := startBackends(t, "v1")
			port := reservePort(t)
			secrets := victimSecrets(t, l, port, bs)
			// lbplane allows 16 streams per connection: the attacker spreads its 20 over 4 connections.
			pair := issuedPair(t, l, "attacker", "default")
			var attackConns []*grpc.ClientConn
			for range 4 {
				attackConns = append(attackConns, xdsConn(t, l, pair, false))
			}
			node := &corev3.Node{Id: "attacker", Cluster: "default"}

			// 20 attacker streams, open before the victims connect, each asking for the victim's secrets.
			var got sync.Map
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			cancels := make([]context.CancelFunc, 20)
			for i := range cancels {
				sctx, c := context.WithCancel(ctx)
				cancels[i] = c
				wg.Add(1)
				go func() {
					defer wg.Done()
					collectAttack(sctx, attackConns[i%4], node, attackerDelta, secrets, &got)
				}()
			}
			defer func() { cancel(); wg.Wait() }()
			eventually(t, 30*time.Second, "the attacker's 20 streams are open", func() error {
				ps, err := l.Client.Proxies(context.Background())
				if err != nil {
					return err
				}
				if n := countNode(ps, "attacker"); n != 20 {
					return fmt.Errorf("%d attacker streams", n)
				}
				return nil
			})

			// Two real victim Envoys of the other kind.
			startEnvoyInGroup(t, l, "victim-1", "victim", !attackerDelta)
			startEnvoyInGroup(t, l, "victim-2", "victim", !attackerDelta)
			waitHTTPS(t, port)
			listed := func() error {
				ps, err := l.Client.Proxies(context.Background())
				if err != nil {
					return err
				}
				for _, v := range []string{"victim-1", "victim-2"} {
					if countNode(ps, v) != 1 {
						return fmt.Errorf("%s is not listed: %v", v, nodesOf(ps))
					}
				}
				return nil
			}
			eventually(t, 30*time.Second, "both victims are listed", listed)

			// The attacker closes its streams one by one; the victims stay listed after every close.
			for i, c := range cancels {
				c()
				eventually(t, 10*time.Second, "the attacker's stream is gone", func() error {
					ps, err := l.Client.Proxies(context.Background())
					if err != nil {
						return err
					}
					if n := countNode(ps, "attacker"); n != 19-i {
						return fmt.Errorf("%d attacker streams", n)
					}
					return nil
				})
				if err := listed(); err != nil {
					t.Fatalf("after the attacker closed stream %d: %v", i+1, err)
				}
			}
			waitHTTPS(t, port)
			got.Range(func(k, _ any) bool {
				if slices.Contains(secrets, k.(string)) || strings.Contains(k.(string), "https") {
					t.Errorf("the attacker was sent the victim's %s", k)
				}
				return true
			})
		})
	}
}

// collectAttack holds one attacker stream until ctx ends, asking for the victims' secrets and every
// cluster, re-asking after each response, and records every resource name it is sent.
func collectAttack(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, delta bool, secrets []string, got *sync.Map) {
	client := discovery.NewAggregatedDiscoveryServiceClient(conn)
	if delta {
		s, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			return
		}
		s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.SecretType, ResourceNamesSubscribe: append([]string{"*"}, secrets...)})
		s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}})
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			for _, res := range r.Resources {
				got.Store(res.Name, true)
			}
			s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
		}
	}
	s, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		return
	}
	s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: resource.SecretType, ResourceNames: secrets})
	s.Send(&discovery.DiscoveryRequest{TypeUrl: resource.ClusterType})
	for {
		r, err := s.Recv()
		if err != nil {
			return
		}
		for _, a := range r.Resources {
			if a.TypeUrl == resource.SecretType {
				sec := &tlsv3.Secret{}
				if a.UnmarshalTo(sec) == nil {
					got.Store(sec.Name, true)
				}
			} else {
				got.Store(fmt.Sprintf("cluster of %d bytes mentioning https=%v", len(a.Value), strings.Contains(string(a.Value), "https")), true)
			}
		}
		names := secrets
		if r.TypeUrl == resource.ClusterType {
			names = nil
		}
		s.Send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, ResourceNames: names, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})
	}
}

func countNode(ps []xdsserver.ProxyStatus, node string) int {
	n := 0
	for _, p := range ps {
		if p.NodeID == node {
			n++
		}
	}
	return n
}

func nodesOf(ps []xdsserver.ProxyStatus) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.NodeID+"/"+p.API+"/"+p.State)
	}
	return out
}

// waitHTTPS waits until the victim's HTTPS listener answers through Envoy.
func waitHTTPS(t *testing.T, port int) {
	t.Helper()
	eventually(t, 30*time.Second, "HTTPS answers through the victim Envoys", func() error {
		resp, err := httpsClient(t, port).Get("https://app.example.com/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

const renamedBackend = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: p}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: {{.Name}}
      endpoints: [{address: 127.0.0.1, port: {{.B.Port}}}]
`

// A client with a valid certificate that never acknowledges anything does not hold back changes for the
// real Envoys of its group: once it has left a response unanswered for --ack-timeout, it is STALE and the
// make-before-break steps stop waiting for it.
func TestAttackNonAckingClientDoesNotDelayChanges(t *testing.T) {
	t.Parallel()
	l := startLbplane(t, "--ack-timeout", "1s")
	bs := startBackends(t, "n1", "n2", "n3")
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	startEnvoy(t, l, "real", true)
	push(t, l, policy(t, renamedBackend, map[string]any{"Port": port, "Name": "one", "B": bs[0]}))
	waitServing(t, url, "n1")

	// change renames the backend: a new cluster behind the listener's route, then the old one removed, so
	// two steps that each wait for the group's proxies to acknowledge the previous one.
	change := func(name string, b *Backend) time.Duration {
		start := time.Now()
		push(t, l, policy(t, renamedBackend, map[string]any{"Port": port, "Name": name, "B": b}))
		waitServing(t, url, b.Name)
		return time.Since(start)
	}
	baseline := change("two", bs[1])

	conn := xdsConn(t, l, issuedPair(t, l, "lazy", "default"), false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		if err := s.Send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "lazy", Cluster: "default"}, TypeUrl: typ}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil { // received, never acknowledged
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the non-acknowledging client is reported STALE", func() error {
		ps, err := l.Client.Proxies(context.Background())
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.NodeID == "lazy" && p.State == xdsserver.Stale && p.Unresponsive {
				t.Logf("lazy: %s %s", p.State, p.Message)
				return nil
			}
		}
		return fmt.Errorf("proxies: %v", nodesOf(ps))
	})
	withAttacker := change("three", bs[2])
	t.Logf("a renamed backend reached the real Envoy in %v without the attacker, %v with it (settle timeout 10s)", baseline, withAttacker)
	if withAttacker > baseline+3*time.Second {
		t.Errorf("the non-acknowledging client delayed the change: %v against %v without it", withAttacker, baseline)
	}
}

// A flood of connections to the xDS port leaves the push API, /healthz and the authenticated Envoy working.
//
// The test process and lbplane share a hard open-file limit of about 20,000 here, so the test opens up to
// 19,000 connections (fewer when its own limit is lower, keeping 1,500 descriptors for itself) from 256
// dialers and stops dialing after 500 dials time out (the server side is then saturated: its accept queue
// is full). lbplane runs with --xds-max-connections 4000: the binary under test is built with -race, whose
// runtime dies above 8,128 live goroutines, and each accepted connection is a goroutine until its handshake
// deadline; without -race the default cap is half the open-file limit. Everything is on loopback.
func TestAttackConnectionFloodLeavesAPIAndEnvoyWorking(t *testing.T) {
	t.Parallel()
	exclusive(t, "flood")
	l := startLbplane(t, "--xds-max-connections", "4000")
	bs := startBackends(t, "f1", "f2")
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	startEnvoy(t, l, "flooded", true)
	push(t, l, policy(t, renamedBackend, map[string]any{"Port": port, "Name": "one", "B": bs[0]}))
	waitServing(t, url, "f1")
	waitSynced(t, l, 1)

	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	want := min(19000, int(rl.Cur)-1500)
	if want < 2000 {
		t.Skipf("open-file limit %d is too low for a meaningful flood", rl.Cur)
	}
	var (
		mu       sync.Mutex
		conns    []net.Conn
		timeouts atomic.Int64
		next     atomic.Int64
	)
	deadline := time.Now().Add(90 * time.Second)
	var wg sync.WaitGroup
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(want) && timeouts.Load() < 500 && time.Now().Before(deadline) {
				c, err := net.DialTimeout("tcp", l.XDSAddr, time.Second)
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						timeouts.Add(1)
					}
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	t.Logf("flood: %d connections open to the xDS port (%d dials timed out; limit %d)", len(conns), timeouts.Load(), rl.Cur)
	if len(conns) < 4000 {
		t.Errorf("only %d connections opened: the flood did not reach lbplane's cap", len(conns))
	}

	// While the flood holds its connections: /healthz, the push API, and a change reaching the Envoy.
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(l.APIURL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz during the flood: %v", err)
	}
	resp.Body.Close()
	start := time.Now()
	push(t, l, policy(t, renamedBackend, map[string]any{"Port": port, "Name": "two", "B": bs[1]}))
	waitServing(t, url, "f2")
	t.Logf("a change reached the authenticated Envoy %v after the push, during the flood", time.Since(start))
	waitSynced(t, l, 1)
}

// Envoy's certificate, issued by lbplane, is renewed while traffic flows: Envoy takes the new one from the
// watched directory without a restart, reconnects with it when lbplane restarts, and no request fails.
func TestEnvoyCertificateRotationUnderLoad(t *testing.T) {
	t.Parallel()
	l := startLbplane(t)
	bs := startBackends(t, "r1")
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	certDir := filepath.Join(t.TempDir(), "certs")
	renewEnvoyCert(t, l, "rotating", "default", certDir)
	e := startEnvoyWith(t, l, "rotating", "default", true, &envoybootstrap.TLS{Dir: certDir})
	push(t, l, policy(t, renamedBackend, map[string]any{"Port": port, "Name": "one", "B": bs[0]}))
	waitServing(t, url, "r1")
	waitSynced(t, l, 1)
	load := startLoad(url, 100, 4, 2*time.Minute)

	serialOf := func() string {
		b, err := os.ReadFile(filepath.Join(certDir, envoybootstrap.CertFile))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c.SerialNumber.Text(16)
	}
	old := serialOf()
	renewEnvoyCert(t, l, "rotating", "default", certDir)
	renewed := serialOf()
	if renewed == old {
		t.Fatal("renewal wrote the same certificate")
	}
	eventually(t, 30*time.Second, "Envoy loads the renewed certificate", func() error {
		resp, err := adminDo(e, http.MethodGet, "/certs")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		body := strings.ToLower(string(b))
		if !strings.Contains(body, renewed) {
			return fmt.Errorf("serial %s not in /certs", renewed)
		}
		return nil
	})
	// A new handshake: lbplane restarts, and Envoy must reconnect with the renewed certificate.
	l.Kill()
	l.Restart(t)
	waitSynced(t, l, 1)
	waitServing(t, url, "r1")
	// Enough traffic on both sides of the rotation to mean something.
	eventually(t, 60*time.Second, "300 requests went through", func() error {
		if n := load.OK.Load(); n < 300 {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	})
	load.Stop()
	load.RequireNoFailures(t, 300)
	t.Logf("rotation under load: %d requests, %d failed; Envoy's certificate %s replaced by %s", load.OK.Load()+load.Failed.Load(), load.Failed.Load(), old, renewed)
	if logs, _ := os.ReadFile(l.log); !strings.Contains(string(logs), `msg="proxy connected" node=rotating`) {
		t.Error("lbplane did not log Envoy reconnecting")
	}
}

// Plaintext xDS is an explicit flag: it warns, still serves Envoy on loopback, and refuses a non-loopback
// address unless --xds-insecure-listen-any is given too.
func TestInsecureXDSIsExplicitAndLoopbackOnly(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(filepath.Join(binDir, "lbplane"), "serve", "--data-dir", t.TempDir(), "--xds-insecure",
		"--xds-address", "192.0.2.1:18000", "--api-address", "127.0.0.1:0", "--metrics-address", "").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--xds-insecure-listen-any") {
		t.Errorf("a non-loopback plaintext xDS address was not refused: %v\n%s", err, out)
	}
	l := startLbplane(t, "--xds-insecure")
	bs := startBackends(t, "i1")
	port := reservePort(t)
	startEnvoy(t, l, "plain", true)
	push(t, l, policy(t, renamedBackend, map[string]any{"Port": port, "Name": "one", "B": bs[0]}))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "i1")
	if logs, _ := os.ReadFile(l.log); !strings.Contains(string(logs), "INSECURE: xDS is served in plaintext") {
		t.Error("no warning in the log about plaintext xDS")
	}
	if _, err := os.Stat(filepath.Join(l.DataDir, serve.PKIDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lbplane made a CA although xDS is insecure: %v", err)
	}
}
