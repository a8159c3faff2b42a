package xdsserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// guarded is an xDS server over mTLS with lbplane's own CA and the guard, as lbplane serve runs it.
type guarded struct {
	cache *xdscache.Cache
	guard *xdsserver.Guard
	ca    *pki.CA
	addr  string
	// stored is what the guard persisted last.
	mu     sync.Mutex
	stored []xdsserver.Revocation
}

func startGuarded(t *testing.T, pkiDir string, revoked []xdsserver.Revocation) *guarded {
	t.Helper()
	ca, _, err := pki.LoadOrCreateCA(pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := pki.NewServingCert(ca, "", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	f := &guarded{cache: xdscache.New(), ca: ca}
	f.guard = xdsserver.NewGuard(log, time.Hour, revoked)
	f.guard.Persist = func(rs []xdsserver.Revocation) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stored = rs
		return nil
	}
	tracker := xdsserver.NewTracker(f.cache, log)
	tracker.RequireIdentity = true
	g := xdsserver.NewGRPC(ctx, f.cache, tracker, xdsserver.CAServerOption(serving, ca), f.guard.ServerOption())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	done := make(chan struct{})
	go func() { xdsserver.Serve(ctx, g, f.guard.Listener(lis)); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// client connects with a certificate issued by the fixture's CA.
func (f *guarded) client(t *testing.T, is *pki.Issued) *grpc.ClientConn {
	t.Helper()
	pair, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: f.ca.Pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func serialOf(t *testing.T, is *pki.Issued) string {
	b, _ := pem.Decode(is.CertPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Text(16)
}

// subscribe opens a delta stream for node in group "g", asks for clusters and waits for the first answer.
func subscribe(t *testing.T, ctx context.Context, conn *grpc.ClientConn, nodeID string) (*delta, error) {
	t.Helper()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: nodeID, Cluster: "g"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{"*"}}); err != nil {
		if err == io.EOF { // the server ended the stream: its status comes from Recv (grpc-go's contract)
			_, err = s.Recv()
		}
		return nil, err
	}
	// The first response, or the status that ended the stream, is read here, by one receiver: with a second
	// one running, either of them could take the status and the other would see only EOF.
	var first *discovery.DeltaDiscoveryResponse
	got := make(chan error, 1)
	go func() {
		var err error
		first, err = s.Recv()
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			return nil, err
		}
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("%s: no response within 10s", nodeID)
	}
	if err := s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: first.TypeUrl, ResponseNonce: first.Nonce}); err != nil {
		return nil, err
	}
	return &delta{s, receiveInto(s.Recv)}, nil
}

// next receives a response and acknowledges it, so that the server sends the next change.
func (d *delta) next(within time.Duration) *discovery.DeltaDiscoveryResponse {
	r := d.recv(within)
	if r != nil {
		d.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
	}
	return r
}

// ended reports whether the stream ended within the given time (responses before the end are dropped).
func ended(d *delta, within time.Duration) bool {
	deadline := time.After(within)
	for {
		select {
		case r, ok := <-d.inbox:
			if !ok {
				return true
			}
			_ = r
		case <-deadline:
			return false
		}
	}
}

// A stream whose client certificate expires is closed at NotAfter, and nothing is sent on it after: a
// change published after the expiry (here, one that would carry a new private key) never reaches it.
func TestStreamEndsWhenItsCertificateExpires(t *testing.T) {
	f := startGuarded(t, filepath.Join(t.TempDir(), "pki"), nil)
	f.cache.Publish("g", state(t, "c1"))
	is, err := f.ca.IssueClient("n1", "g", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := subscribe(t, ctx, f.client(t, is), "n1")
	if err != nil {
		t.Fatalf("a stream with a valid certificate: %v", err)
	}
	// A change before expiry arrives.
	f.cache.Publish("g", state(t, "c1", "c2"))
	if r := d.next(5 * time.Second); r == nil || time.Now().After(is.NotAfter) {
		t.Fatalf("no response to a change before the certificate expired (got %v)", r)
	}
	// Publish again right after expiry, and see that nothing but the end of the stream comes.
	time.Sleep(time.Until(is.NotAfter) + 50*time.Millisecond)
	f.cache.Publish("g", state(t, "c1", "c2", "c3"))
	var late []string
	closed := false
	deadline := time.After(5 * time.Second)
	for !closed {
		select {
		case r, ok := <-d.inbox:
			if !ok {
				closed = true
				break
			}
			for _, res := range r.Resources {
				late = append(late, res.Name)
			}
		case <-deadline:
			t.Fatalf("the stream was still open 5s after its certificate expired")
		}
	}
	if len(late) > 0 {
		t.Errorf("sent after the certificate expired: %v", late)
	}
}

// Revoking a node closes its connection at once, leaves the others alone, refuses its reconnects, and
// survives a restart (the guard is rebuilt from what it persisted). Revoking by serial does the same for
// one certificate; a group certificate claiming a revoked node id is refused too.
func TestRevokeClosesRefusesAndPersists(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	f := startGuarded(t, pkiDir, nil)
	f.cache.Publish("g", state(t, "c1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	issue := func(node string) *pki.Issued {
		is, err := f.ca.IssueClient(node, "g", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return is
	}
	n1, n2, n3 := issue("n1"), issue("n2"), issue("n3")
	d1, err1 := subscribe(t, ctx, f.client(t, n1), "n1")
	d2, err2 := subscribe(t, ctx, f.client(t, n2), "n2")
	d3, err3 := subscribe(t, ctx, f.client(t, n3), "n3")
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("streams: %v %v %v", err1, err2, err3)
	}

	rev, closed, err := f.guard.Revoke(xdsserver.Revocation{NodeID: "n1", Reason: "test"})
	if err != nil || closed != 1 {
		t.Fatalf("revoke n1: %d closed, %v", closed, err)
	}
	if !rev.Until.After(time.Now().Add(50 * time.Minute)) {
		t.Errorf("the revocation ends at %s, before the certificate does (%s)", rev.Until, n1.NotAfter)
	}
	if !ended(d1, 5*time.Second) {
		t.Error("n1's stream was not closed within 5s of the revocation")
	}
	f.cache.Publish("g", state(t, "c1", "c2"))
	if r := d2.next(5 * time.Second); r == nil {
		t.Error("n2 got nothing after n1 was revoked")
	}
	if _, err := subscribe(t, ctx, f.client(t, n1), "n1"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("n1 reconnecting: %v, want PermissionDenied", err)
	}

	// By serial, with openssl's colons and capitals.
	serial := serialOf(t, n3)
	colons := ""
	for i, r := range serial {
		if i > 0 && (len(serial)-i)%2 == 0 {
			colons += ":"
		}
		colons += string(r)
	}
	if _, closed, err := f.guard.Revoke(xdsserver.Revocation{Serial: colons}); err != nil || closed != 1 {
		t.Fatalf("revoke serial %s: %d closed, %v", colons, closed, err)
	}
	if !ended(d3, 5*time.Second) {
		t.Error("n3's stream was not closed within 5s of the revocation of its serial")
	}
	// A new certificate for n3 is another serial: good.
	if _, err := subscribe(t, ctx, f.client(t, issue("n3")), "n3"); err != nil {
		t.Errorf("n3 with a new certificate: %v", err)
	}

	// A group certificate claiming the revoked node is refused; claiming another node it is fine.
	grp, err := f.ca.IssueGroup("g", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := subscribe(t, ctx, f.client(t, grp), "n1"); err == nil {
		t.Error("a group certificate claiming the revoked node n1 was served")
	}
	if _, err := subscribe(t, ctx, f.client(t, grp), "n9"); err != nil {
		t.Errorf("a group certificate claiming n9: %v", err)
	}

	// A restart: a new server from what was persisted.
	f.mu.Lock()
	stored := f.stored
	f.mu.Unlock()
	if len(stored) != 2 {
		t.Fatalf("persisted %d revocations, want 2", len(stored))
	}
	f2 := startGuarded(t, pkiDir, stored) // the same CA: lbplane restarted, not replaced
	f2.cache.Publish("g", state(t, "c1"))
	if _, err := subscribe(t, ctx, f2.client(t, n1), "n1"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("n1 reconnecting after a restart: %v, want PermissionDenied", err)
	}
	if _, err := subscribe(t, ctx, f2.client(t, n2), "n2"); err != nil {
		t.Errorf("n2 after a restart: %v", err)
	}
	// Expired revocations are forgotten.
	old := []xdsserver.Revocation{{NodeID: "x", At: time.Now().Add(-2 * time.Hour), Until: time.Now().Add(-time.Hour)}}
	if got := len(xdsserver.NewGuard(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, old).Revocations()); got != 0 {
		t.Errorf("an expired revocation is still in force")
	}
	if _, _, err := f.guard.Revoke(xdsserver.Revocation{NodeID: "a", Serial: "1"}); err == nil {
		t.Error("a revocation naming a node and a serial was accepted")
	}
	if _, _, err := f.guard.Revoke(xdsserver.Revocation{Serial: "zz"}); err == nil {
		t.Error("a serial that is not hex was accepted")
	}
}

// A group revocation cuts off every certificate of the group issued before it, and no other group's; a
// certificate signed for the group after it (SignClient with the guard's NotBefore, as POST /v1/identity
// does) is good at once; a revoked node gets no NotBefore help and stays refused (NodeRevoked).
func TestRevokeGroupThenReissue(t *testing.T) {
	f := startGuarded(t, filepath.Join(t.TempDir(), "pki"), nil)
	f.cache.Publish("g", state(t, "c1"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sign := func(node, group string) *pki.Issued {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		is, err := f.ca.SignClient(key.Public(), node, group, time.Hour, f.guard.NotBefore(group))
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		is.KeyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		return is
	}
	a, other := sign("a", "g"), sign("x", "h")
	b := sign("b", "g")
	da, errA := subscribe(t, ctx, f.client(t, a), "a")
	db, errB := subscribe(t, ctx, f.client(t, b), "b")
	if errA != nil || errB != nil {
		t.Fatalf("streams: %v %v", errA, errB)
	}
	if !f.guard.NotBefore("g").IsZero() {
		t.Fatal("NotBefore of a group without revocations is not zero")
	}
	if _, closed, err := f.guard.Revoke(xdsserver.Revocation{Group: "g"}); err != nil || closed != 2 {
		t.Fatalf("revoke group g: %d closed, %v", closed, err)
	}
	if !ended(da, 5*time.Second) || !ended(db, 5*time.Second) {
		t.Error("the group's streams were not closed within 5s of its revocation")
	}
	blk, _ := pem.Decode(other.CertPEM)
	oc, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.guard.Refusal(oc); err != nil {
		t.Errorf("another group's certificate: %v", err)
	}
	if _, err := subscribe(t, ctx, f.client(t, a), "a"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a's old certificate reconnecting: %v, want PermissionDenied", err)
	}
	renewed := sign("a", "g")
	if _, err := subscribe(t, ctx, f.client(t, renewed), "a"); err != nil {
		t.Errorf("a with a certificate signed after the revocation: %v", err)
	}
	if _, _, err := f.guard.Revoke(xdsserver.Revocation{Group: "g", NodeID: "a"}); err == nil {
		t.Error("a revocation naming a node and a group was accepted")
	}
	if _, _, err := f.guard.Revoke(xdsserver.Revocation{Group: "g/../x"}); err == nil || !strings.Contains(err.Error(), "group:") {
		t.Errorf("a revocation of a malformed group: %v", err)
	}
	if _, _, err := f.guard.Revoke(xdsserver.Revocation{NodeID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.guard.NodeRevoked("a"); !ok {
		t.Error("NodeRevoked does not report the revoked node")
	}
	if _, ok := f.guard.NodeRevoked("x"); ok {
		t.Error("NodeRevoked reports a node that is not revoked")
	}
}
