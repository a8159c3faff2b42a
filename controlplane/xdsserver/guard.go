package xdsserver

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pki"
)

// Revocation cuts off a node or one certificate (see apiwire.Revocation).
type Revocation = apiwire.Revocation

// Guard ends an identity when it should end. The TLS handshake checks a client certificate once, when the
// connection opens; an xDS connection lives for days, so without the guard a stream outlived its
// certificate and kept receiving config, private keys included. The guard
//   - closes each connection when its client certificate expires (a timer at NotAfter), and refuses to send
//     anything on it from that moment, should the timer be late;
//   - closes at once every connection of a revoked node or certificate, and refuses their reconnects until
//     every certificate the revocation covers has expired.
//
// It works on connections, not streams: TLS identity belongs to the connection, and closing it ends every
// stream on it however busy the server's handler is. Use Listener on the xDS listener and ServerOption on the
// gRPC server.
type Guard struct {
	Log *slog.Logger
	// Validity is the longest life of a client certificate (the configured Envoy certificate validity): a
	// revocation that names no connected certificate is kept this long.
	Validity time.Duration
	// Persist, when set, stores the revocations in force after each change; when it fails, the revocation
	// is not made (it would not survive a restart, and the caller must know).
	Persist func([]Revocation) error

	mu      sync.Mutex
	revoked []Revocation
	conns   map[string]*guardedConn // by remote address, as gRPC's peer reports it
}

// NewGuard returns a guard holding the given revocations (those still in force).
func NewGuard(log *slog.Logger, validity time.Duration, revoked []Revocation) *Guard {
	g := &Guard{Log: log, Validity: validity, conns: map[string]*guardedConn{}}
	g.revoked = prune(revoked, time.Now())
	return g
}

// Revocations returns the revocations in force.
func (g *Guard) Revocations() []Revocation {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.revoked = prune(g.revoked, time.Now())
	return slices.Clone(g.revoked)
}

func prune(rs []Revocation, now time.Time) []Revocation {
	return slices.DeleteFunc(slices.Clone(rs), func(r Revocation) bool { return !r.Until.After(now) })
}

// NormalizeSerial writes a serial number as lbplane prints it: lower-case hex without leading zeros, from
// hex with or without colons (as openssl prints it).
func NormalizeSerial(s string) (string, error) {
	clean := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	clean = strings.TrimPrefix(clean, "0x")
	n, ok := new(big.Int).SetString(clean, 16)
	if clean == "" || !ok || n.Sign() <= 0 {
		return "", fmt.Errorf("serial: %q is not a certificate serial number in hex", s)
	}
	return n.Text(16), nil
}

func serialOf(c *x509.Certificate) string { return c.SerialNumber.Text(16) }

// covers tells whether r revokes certificate c used as node nodeID (empty: not known yet).
func covers(r Revocation, c *x509.Certificate, nodeID string) bool {
	switch {
	case r.Serial != "":
		return r.Serial == serialOf(c)
	case r.Group != "":
		return slices.Contains(c.Subject.OrganizationalUnit, r.Group) && c.NotBefore.Before(pki.RevokedBefore(r.At))
	}
	return r.NodeID != "" && r.NodeID == nodeID && c.NotBefore.Before(r.At)
}

// nodeOfCert is the node a certificate names: its common name, unless it is a group certificate, which
// names none (the node is then the one its streams claim).
func nodeOfCert(c *x509.Certificate) string {
	if identityOfCert(c).AnyNode {
		return ""
	}
	return c.Subject.CommonName
}

// refusal says why c may not be used (as node nodeID) now, or is nil.
func (g *Guard) refusal(c *x509.Certificate, nodeID string, now time.Time) error {
	if !now.Before(c.NotAfter) {
		return status.Errorf(codes.Unauthenticated, "the client certificate (serial %s) expired at %s", serialOf(c), c.NotAfter.UTC().Format(time.RFC3339))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.revoked {
		if r.Until.After(now) && (covers(r, c, nodeOfCert(c)) || (nodeID != "" && covers(r, c, nodeID))) {
			return status.Errorf(codes.PermissionDenied, "the client certificate (serial %s) is revoked until %s", serialOf(c), r.Until.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// Refusal says why c may not be used now (expired, revoked), or is nil: what an Envoy pod's sidecar is told
// of the certificate it holds.
func (g *Guard) Refusal(c *x509.Certificate) error { return g.refusal(c, "", time.Now()) }

// NodeRevoked returns the revocation in force of node id node, if any: no certificate is issued for it
// while it lasts.
func (g *Guard) NodeRevoked(node string) (Revocation, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for _, r := range g.revoked {
		if r.NodeID == node && r.Until.After(now) {
			return r, true
		}
	}
	return Revocation{}, false
}

// NotBefore is the start a new certificate of group needs so that no revocation in force covers it (the
// zero time when none of the group is in force).
func (g *Guard) NotBefore(group string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out time.Time
	now := time.Now()
	for _, r := range g.revoked {
		if r.Group == group && r.Until.After(now) && pki.RevokedBefore(r.At).After(out) {
			out = pki.RevokedBefore(r.At)
		}
	}
	return out
}

// Revoke puts r in force (At is set to now) and closes every connection it covers. It returns the
// revocation as stored, with Until filled in, and how many connections it closed.
func (g *Guard) Revoke(r Revocation) (Revocation, int, error) {
	named := 0
	for _, s := range []string{r.NodeID, r.Serial, r.Group} {
		if s != "" {
			named++
		}
	}
	if named != 1 {
		return Revocation{}, 0, errors.New("name exactly one of a node id, a certificate serial and a proxy group")
	}
	if r.Group != "" && !pki.ValidName(r.Group) {
		return Revocation{}, 0, fmt.Errorf("group: %q is not a proxy group name (letters, digits, '.', '_', ':' and '-')", r.Group)
	}
	if r.Serial != "" {
		s, err := NormalizeSerial(r.Serial)
		if err != nil {
			return Revocation{}, 0, err
		}
		r.Serial = s
	}
	now := time.Now()
	r.At = now
	// Kept until every certificate it covers has expired: the longest a certificate lives, or longer when
	// a connected one it covers lives longer (one from another CA).
	r.Until = now.Add(g.Validity)
	g.mu.Lock()
	var cut []*guardedConn
	for _, c := range g.conns {
		cert, node := c.identity()
		if cert != nil && (covers(r, cert, nodeOfCert(cert)) || covers(r, cert, node)) {
			cut = append(cut, c)
			if cert.NotAfter.After(r.Until) || r.Serial != "" {
				r.Until = cert.NotAfter
			}
		}
	}
	next := append(prune(g.revoked, now), r)
	if g.Persist != nil {
		if err := g.Persist(next); err != nil {
			g.mu.Unlock()
			return Revocation{}, 0, fmt.Errorf("storing the revocation: %w", err)
		}
	}
	g.revoked = next
	g.mu.Unlock()
	for _, c := range cut {
		c.cutOff("revoked")
	}
	g.Log.Warn("revoked an Envoy identity", "node", r.NodeID, "serial", r.Serial, "group", r.Group, "until", r.Until, "reason", r.Reason, "closedConnections", len(cut))
	return r, len(cut), nil
}

// SetRevocations replaces the revocations in force with rs (another replica's, from a shared store) and
// closes every connection they cover.
func (g *Guard) SetRevocations(rs []Revocation) int {
	now := time.Now()
	g.mu.Lock()
	g.revoked = prune(rs, now)
	conns := make([]*guardedConn, 0, len(g.conns))
	for _, c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	n := 0
	for _, c := range conns {
		if cert, node := c.identity(); cert != nil && g.refusal(cert, node, now) != nil {
			c.cutOff("revoked")
			n++
		}
	}
	return n
}

// Listener records every connection lis accepts, so that the guard can close it.
func (g *Guard) Listener(lis net.Listener) net.Listener { return &guardedListener{Listener: lis, g: g} }

type guardedListener struct {
	net.Listener
	g *Guard
}

func (l *guardedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &guardedConn{Conn: c, g: l.g, key: c.RemoteAddr().String()}
	l.g.mu.Lock()
	l.g.conns[gc.key] = gc
	l.g.mu.Unlock()
	return gc, nil
}

// guardedConn is one xDS connection: its client certificate once a stream has shown it, the node its
// streams claim, and the timer that closes it when the certificate expires.
type guardedConn struct {
	net.Conn
	g   *Guard
	key string

	mu    sync.Mutex
	cert  *x509.Certificate
	node  string
	timer *time.Timer
	// cut is set before the connection is closed: nothing is sent on it from then on.
	cut    atomic.Bool
	closed sync.Once
}

func (c *guardedConn) identity() (*x509.Certificate, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, c.node
}

func (c *guardedConn) Close() error {
	var err error
	c.closed.Do(func() {
		c.g.mu.Lock()
		if c.g.conns[c.key] == c {
			delete(c.g.conns, c.key)
		}
		c.g.mu.Unlock()
		c.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// cutOff closes the connection for why ("expired", "revoked"); every stream on it ends.
func (c *guardedConn) cutOff(why string) {
	if c.cut.Swap(true) {
		return
	}
	cert, node := c.identity()
	attrs := []any{"address", c.key, "reason", why, "node", node}
	if cert != nil {
		attrs = append(attrs, "serial", serialOf(cert), "notAfter", cert.NotAfter)
	}
	c.g.Log.Warn("closed an xDS connection: its identity ended", attrs...)
	c.Close()
}

// watch records the connection's certificate at its first stream, and arms the expiry timer.
func (c *guardedConn) watch(cert *x509.Certificate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil {
		return
	}
	c.cert = cert
	c.timer = time.AfterFunc(time.Until(cert.NotAfter), func() { c.cutOff("expired") })
}

// claim records the node id a stream claims, and refuses it when it is revoked.
func (c *guardedConn) claim(node *corev3.Node) error {
	if node.GetId() == "" {
		return nil
	}
	c.mu.Lock()
	cert := c.cert
	if c.node == "" {
		c.node = node.GetId()
	}
	c.mu.Unlock()
	if cert == nil {
		return nil
	}
	if err := c.g.refusal(cert, node.GetId(), time.Now()); err != nil {
		c.cutOff("revoked")
		return err
	}
	return nil
}

func (g *Guard) conn(ctx context.Context) *guardedConn {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conns[p.Addr.String()]
}

func leafOf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0]
}

// refusedConnLinger is how long a connection whose certificate was refused stays open, for the refusal's
// status to reach the client before the connection closes.
const refusedConnLinger = time.Second

// ServerOption is the gRPC stream interceptor that applies the guard to every stream.
func (g *Guard) ServerOption() grpc.ServerOption { return grpc.ChainStreamInterceptor(g.intercept) }

func (g *Guard) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	cert := leafOf(ss.Context())
	if cert == nil {
		return handler(srv, ss) // no mTLS (--xds-insecure): nothing to end
	}
	c := g.conn(ss.Context())
	if err := g.refusal(cert, "", time.Now()); err != nil {
		g.Log.Warn("refused an xDS stream", "error", err)
		// The connection goes too, once the refusal has had time to reach the client: a client keeps its
		// HTTP/2 connection for its next streams, and one that was given a new certificate (its group
		// revoked) must handshake again to present it.
		if c != nil {
			time.AfterFunc(refusedConnLinger, func() { c.cutOff("refused") })
		}
		return err
	}
	if c == nil {
		// A connection the guard's listener did not accept: it could not be closed at expiry.
		return status.Error(codes.Internal, "xDS connection not tracked")
	}
	c.watch(cert)
	return handler(srv, &guardedStream{ServerStream: ss, c: c, cert: cert})
}

// guardedStream refuses to send anything once its connection's identity has ended, and records the node its
// requests claim.
type guardedStream struct {
	grpc.ServerStream
	c    *guardedConn
	cert *x509.Certificate
}

func (s *guardedStream) SendMsg(m any) error {
	if s.c.cut.Load() || !time.Now().Before(s.cert.NotAfter) {
		s.c.cutOff("expired")
		return status.Error(codes.Unauthenticated, "the client certificate's identity ended")
	}
	return s.ServerStream.SendMsg(m)
}

func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	var node *corev3.Node
	switch r := m.(type) {
	case *discovery.DiscoveryRequest:
		node = r.GetNode()
	case *discovery.DeltaDiscoveryRequest:
		node = r.GetNode()
	}
	return s.c.claim(node)
}
