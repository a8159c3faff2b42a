package xdsserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/lbplane/lbplane/controlplane/pki"
)

// TLSFiles configures mTLS for xDS: lbplane's certificate and key, and the CA that signs Envoys' client
// certificates.
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// ServerOption returns the gRPC option for mTLS: TLS 1.3 only, and a client certificate signed by ClientCA
// is required. controller-runtime's certwatcher keeps the certificate and key (watched and polled until
// ctx ends), and the CA is re-read only when its file changes, so a rotated file takes effect without a
// restart and a handshake reads no file.
func (f TLSFiles) ServerOption(ctx context.Context) (grpc.ServerOption, error) {
	w, err := certwatcher.New(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("--xds-tls-cert/--xds-tls-key: %w", err)
	}
	go w.Start(ctx)
	ca := &caFile{path: f.ClientCA}
	if _, err := ca.get(); err != nil {
		return nil, fmt.Errorf("--xds-tls-client-ca: %w", err)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			pool, err := ca.get()
			if err != nil {
				return nil, err
			}
			return &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert,
				GetCertificate: w.GetCertificate, ClientCAs: pool, NextProtos: []string{"h2"}}, nil
		},
	}
	return grpc.Creds(credentials.NewTLS(cfg)), nil
}

// caFile is a CA bundle read again only when the file's size or modification time changed (a kubelet
// Secret swap replaces the file the path resolves to, which changes both).
type caFile struct {
	path string

	mu      sync.Mutex
	pool    *x509.CertPool
	modTime time.Time
	size    int64
}

func (c *caFile) get() (*x509.CertPool, error) {
	st, err := os.Stat(c.path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.pool != nil {
			return c.pool, nil // gone for a moment during a swap: keep the last good one
		}
		return nil, err
	}
	if c.pool != nil && st.ModTime().Equal(c.modTime) && st.Size() == c.size {
		return c.pool, nil
	}
	pool, err := loadPool(c.path)
	if err != nil {
		if c.pool != nil {
			return c.pool, nil
		}
		return nil, err
	}
	c.pool, c.modTime, c.size = pool, st.ModTime(), st.Size()
	return pool, nil
}

// CAServerOption returns the gRPC option for mTLS with lbplane's own CA (the default): TLS 1.3 only, the
// serving certificate from serving (renewed in place), and a client certificate signed by ca required.
func CAServerOption(serving *pki.ServingCert, ca *pki.CA) grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion:     tls.VersionTLS13,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      ca.Pool(),
		GetCertificate: serving.GetCertificate,
	}))
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(path + ": no PEM certificate in it")
	}
	return pool, nil
}

// Identity is who a client certificate says a node is: its common name is the node id, and its
// organizational units the proxy groups it may serve. A group certificate (URI SAN
// spiffe://lbplane/group/<G>, no node part; pki.IssueGroup) is AnyNode: any node id, of group G only.
type Identity struct {
	NodeID  string
	Groups  []string
	AnyNode bool
}

// identityOf reads the client certificate of a stream; ok is false when the connection has none (no mTLS).
func identityOf(ctx context.Context) (Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return Identity{}, false
	}
	return identityOfCert(ti.State.PeerCertificates[0]), true
}

func identityOfCert(c *x509.Certificate) Identity {
	for _, u := range c.URIs {
		// Exactly the group URI, and only when the OU agrees with it: then the certificate names no node.
		if len(c.URIs) == 1 && u.Scheme == "spiffe" && u.Host == "lbplane" && u.RawQuery == "" && u.Fragment == "" {
			if g, ok := strings.CutPrefix(u.Path, "/group/"); ok && g != "" && !strings.Contains(g, "/") &&
				slices.Equal(c.Subject.OrganizationalUnit, []string{g}) {
				return Identity{Groups: []string{g}, AnyNode: true}
			}
		}
	}
	return Identity{NodeID: c.Subject.CommonName, Groups: c.Subject.OrganizationalUnit}
}

// authorize refuses a node that claims an id or a proxy group its certificate does not carry.
func (id Identity) authorize(nodeID, group string) error {
	if !id.AnyNode && nodeID != id.NodeID {
		return status.Errorf(codes.PermissionDenied, "node id %q does not match the client certificate (%q)", nodeID, id.NodeID)
	}
	if !slices.Contains(id.Groups, group) {
		return status.Errorf(codes.PermissionDenied, "node %q may not join proxy group %q (certificate allows %v)", nodeID, group, id.Groups)
	}
	return nil
}
