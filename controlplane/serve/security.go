package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/kubepki"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// PKIDir is where lbplane's own CA and xDS certificate live in the data directory. It is deliberately not
// <data-dir>/certs (a root policy file references may resolve under): no policy can name the CA key.
const PKIDir = "pki"

// xdsSecurity decides how xDS is protected and returns the gRPC options for it and, with lbplane's own CA,
// the function the push API issues Envoy certificates with. serving is lbplane's own serving certificate
// whenever its CA is in use, for xDS or for the push API (--api-tls-auto); nil otherwise.
func xdsSecurity(ctx context.Context, cfg *Config) (opts []grpc.ServerOption, issue pushapi.CertIssuer, serving *pki.ServingCert, ca *pki.CA, err error) {
	host, port, err := net.SplitHostPort(cfg.XDSAddress)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("--xds-address: %w", err)
	}
	if len(cfg.EnvoyCertSecrets) > 0 && (cfg.XDSInsecure || cfg.XDSTLS != nil || cfg.CASecret == "") {
		return nil, nil, nil, nil, errors.New("--envoy-cert-secret: needs lbplane's own CA in a Secret (--ca-secret), without --xds-insecure or --xds-tls-*")
	}
	ownCA := false
	switch {
	case cfg.XDSInsecure && cfg.XDSTLS != nil:
		return nil, nil, nil, nil, errors.New("--xds-insecure: cannot be combined with --xds-tls-cert/--xds-tls-key/--xds-tls-client-ca")
	case cfg.XDSInsecure:
		if !cfg.XDSInsecureListenAny && !isLoopback(host) {
			if host != "" && !net.ParseIP(host).IsUnspecified() {
				return nil, nil, nil, nil, fmt.Errorf("--xds-address: %s is not a loopback address, and --xds-insecure serves only loopback; add --xds-insecure-listen-any to serve plaintext xDS beyond this host", host)
			}
			// The default 0.0.0.0: narrowed to loopback rather than refused, so --xds-insecure alone works.
			cfg.XDSAddress = net.JoinHostPort("127.0.0.1", port)
		}
		cfg.Log.Warn("INSECURE: xDS is served in plaintext without authentication; any client that reaches " +
			cfg.XDSAddress + " can claim any node id and proxy group and receive its listeners, clusters and TLS private keys. Use it for local experiments only.")
	case cfg.XDSTLS != nil:
		opt, err := cfg.XDSTLS.ServerOption(ctx)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		cfg.Log.Info("xDS requires mTLS (certificates from files); node ids and proxy groups are bound to client certificates")
		opts = []grpc.ServerOption{opt}
	default:
		ownCA = true
	}
	if !ownCA && !cfg.APITLSAuto {
		return opts, nil, nil, nil, nil
	}
	dir := filepath.Join(cfg.DataDir, PKIDir)
	var created bool
	if cfg.sharedCA != nil {
		// Every replica shares the CA sealed in etcd; each issues its own serving certificate in memory.
		ca, dir = cfg.sharedCA, ""
	} else if cfg.CASecret != "" {
		if cfg.Kubernetes == nil {
			return nil, nil, nil, nil, errors.New("--ca-secret: needs --kubernetes")
		}
		ns, err := cfg.namespace()
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--ca-secret: %w", err)
		}
		client, err := corev1client.NewForConfig(cfg.Kubernetes)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		// Every replica shares one CA, so an Envoy's certificate is good with any of them; the serving
		// certificate is issued in memory at each start.
		// Bounded: a start that cannot reach the API server fails (and the pod restarts) instead of hanging.
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ca, created, err = kubepki.LoadOrCreateCA(lctx, client, ns, cfg.CASecret)
		cancel()
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("lbplane's CA: %w", err)
		}
		dir = ""
		if created {
			cfg.Log.Info("created lbplane's CA", "secret", objkey.Key{Namespace: ns, Name: cfg.CASecret}.String())
		} else {
			cfg.Log.Info("loaded lbplane's CA", "secret", objkey.Key{Namespace: ns, Name: cfg.CASecret}.String())
		}
	} else {
		if ca, created, err = pki.LoadOrCreateCA(dir); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("lbplane's CA: %w", err)
		}
		if created {
			cfg.Log.Info("created lbplane's CA", "certificate", filepath.Join(dir, pki.CACertFile))
		}
	}
	if cfg.ownKeys != nil {
		// Every key the CA issues is recorded before it is handed out, and none of its keys is ever served.
		ca.Keys = cfg.ownKeys
		cfg.ownKeys.TrustCA(ca)
	}
	names := []string{"localhost", "127.0.0.1", "::1"}
	if host != "" && !net.ParseIP(host).IsUnspecified() {
		names = append(names, host)
	} else if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	// One serving certificate for xDS and the push API: both are lbplane, under the same names.
	serving, err = pki.NewServingCert(ca, dir, append(names, cfg.XDSServerNames...))
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("lbplane's serving certificate: %w", err)
	}
	if !ownCA {
		return opts, nil, serving, ca, nil
	}
	cfg.Log.Info("xDS requires mTLS with lbplane's CA; get an Envoy's certificate with lbctl bootstrap", "names", serving.Names())
	issue = func(nodeID, group string) (*pki.Issued, error) {
		return ca.IssueClient(nodeID, group, cfg.EnvoyCertValidity)
	}
	return []grpc.ServerOption{xdsserver.CAServerOption(serving, ca)}, issue, serving, ca, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// namespace is where lbplane's own Secrets live in Kubernetes mode: --namespace, else the leader election
// namespace (the chart sets both to the release namespace).
func (cfg *Config) namespace() (string, error) {
	switch {
	case cfg.Namespace != "":
		return cfg.Namespace, nil
	case cfg.LeaderElectionNamespace != "":
		return cfg.LeaderElectionNamespace, nil
	}
	return "", errors.New("needs --namespace (or --leader-election-namespace)")
}

// newGuard returns the guard that ends Envoy identities, with the revocations in force: kept in the store
// in standalone mode, so that they survive a restart, and in a ConfigMap every replica reads in Kubernetes
// mode (--revocations-configmap), so that a revocation through any replica holds on all.
func newGuard(ctx context.Context, cfg *Config, st store.Store) (*xdsserver.Guard, error) {
	validity := cfg.EnvoyCertValidity
	if validity <= 0 {
		validity = pki.ClientValidity
	}
	if cfg.RevocationsConfigMap != "" {
		return newKubeGuard(ctx, cfg, validity)
	}
	revoked, err := st.Revocations()
	if err != nil {
		return nil, fmt.Errorf("reading the revocations: %w", err)
	}
	g := xdsserver.NewGuard(cfg.Log, validity, revoked)
	g.Persist = st.PutRevocations
	if n := len(g.Revocations()); n > 0 {
		cfg.Log.Info("revoked Envoy identities in force", "count", n)
	}
	return g, nil
}

func newKubeGuard(ctx context.Context, cfg *Config, validity time.Duration) (*xdsserver.Guard, error) {
	if cfg.Kubernetes == nil {
		return nil, errors.New("--revocations-configmap: needs --kubernetes")
	}
	ns, err := cfg.namespace()
	if err != nil {
		return nil, fmt.Errorf("--revocations-configmap: %w", err)
	}
	client, err := corev1client.NewForConfig(cfg.Kubernetes)
	if err != nil {
		return nil, err
	}
	cm := &kubepki.Revocations{Client: client, Namespace: ns, Name: cfg.RevocationsConfigMap}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	revoked, err := cm.Load(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("--revocations-configmap: %w", err)
	}
	g := xdsserver.NewGuard(cfg.Log, validity, revoked)
	g.Persist = func(rs []xdsserver.Revocation) error {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return cm.Store(wctx, rs)
	}
	interval := cfg.RevocationsInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	go cm.Watch(ctx, interval, cfg.Log, func(rs []xdsserver.Revocation) {
		if n := g.SetRevocations(rs); n > 0 {
			cfg.Log.Info("closed revoked Envoy connections", "configmap", objkey.Key{Namespace: ns, Name: cfg.RevocationsConfigMap}.String(), "count", n)
		}
	})
	cfg.Log.Info("revocations are kept in a ConfigMap", "configmap", objkey.Key{Namespace: ns, Name: cfg.RevocationsConfigMap}.String(), "inForce", len(g.Revocations()))
	return g, nil
}
