// Package serve is lbplane serve's composition root: Run assembles the subsystems (store, xDS, metrics,
// engine, push API, stats, rollouts, sources, the Kubernetes source, dashboard), each built by its own
// constructor in the file named for it. xDS is served only once every source has loaded, so a restarted
// lbplane never hands an Envoy an empty or partial config.
package serve

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/lbplane/lbplane/controlplane/fileroots"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/kubepki"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Config of a standalone lbplane.
type Config struct {
	XDSAddress string
	APIAddress string
	DataDir    string
	ConfigDir  string
	Token      string
	// SettleTimeout bounds how long an Envoy is left on a step of a make-before-break change without
	// answering it before it is given the next (xdscache.Cache.StepTimeout). Each Envoy takes its steps as
	// it answers them: a slow one delays only itself.
	SettleTimeout time.Duration
	// PushWait bounds how long a push's reply waits for the Envoys of the groups it changed to acknowledge
	// the change; the reply names those that had not (apiwire.ApplyResult.Lagging). 0 answers at once.
	PushWait time.Duration
	Log      *slog.Logger
	// APIRateLimit is calls per second per token on the push API, and per client address for requests
	// without a good token; 0 disables the limit.
	APIRateLimit float64
	// XDSTLS, when set, requires mTLS on xDS with these files (bring your own CA) instead of lbplane's own CA.
	XDSTLS *xdsserver.TLSFiles
	// XDSInsecure serves xDS in plaintext, without authentication: only on loopback unless
	// XDSInsecureListenAny is also set. Without it (and without XDSTLS) lbplane runs its own CA in
	// <data-dir>/pki and requires mTLS.
	XDSInsecure          bool
	XDSInsecureListenAny bool
	// XDSServerNames are extra DNS names or IPs for lbplane's own xDS certificate (the bind host, localhost,
	// 127.0.0.1 and ::1 are always in it).
	XDSServerNames []string
	// EnvoyCertValidity is the life of the client certificates the push API issues (pki.ClientValidity when 0).
	EnvoyCertValidity time.Duration
	// MaxXDSConnections caps xDS connections open at once (xdsserver.DefaultMaxConnections when 0, none when
	// negative).
	MaxXDSConnections int
	// AckTimeout: a proxy that leaves a response unanswered this long stops counting for settle waits.
	AckTimeout time.Duration
	// XDSMaxConnectionAge closes each xDS connection about this long after its stream opened (±10 %), once
	// its client has answered every response, so that clients spread over the replicas again
	// (xdscache.Cache.MaxAge); 0 keeps connections open.
	XDSMaxConnectionAge time.Duration
	// EndpointUpdateInterval is the least time between two versions of a group's config that change only
	// endpoints, in Kubernetes mode (kubesource.Source.EndpointInterval: its default when 0, none when
	// negative).
	EndpointUpdateInterval time.Duration
	// Kubernetes, when set, reads LoadBalancerPolicies, Services, EndpointSlices and TLS Secrets from this
	// API server; the push API then only reads.
	Kubernetes *rest.Config
	// AllowCrossNamespaceRefs lets a policy reference a Service in another namespace.
	AllowCrossNamespaceRefs bool
	// AllowBackendCIDRs re-admits backend addresses in the ranges refused by default (loopback, link-local,
	// unspecified: see package reach), e.g. 127.0.0.0/8 for backends on the Envoy's own host.
	AllowBackendCIDRs []string
	// AddressBackendsNamespaces, with Kubernetes, are the namespaces whose policies may name endpoint
	// addresses and host names ("*": all); elsewhere a backend is a Service. AddressBackendsCIDRs are the
	// IP addresses every namespace's endpoints may use.
	AddressBackendsNamespaces []string
	AddressBackendsCIDRs      []string
	// DNSResolvers (host:port) resolve backends' host names instead of resolv.conf's servers; lbplane
	// reads its hosts file first.
	DNSResolvers []string
	// AllowEnvoyDNS lets backends have each Envoy resolve their host names (dns.resolver: Envoy), unchecked.
	AllowEnvoyDNS bool
	// TenancyFile, when set, delegates listener ports and host names to namespaces (package tenancy).
	TenancyFile string
	// LeaderElectionNamespace, with Kubernetes, elects one replica to write status.
	LeaderElectionNamespace string
	// MetricsAddress serves Prometheus metrics on /metrics; empty turns them off.
	MetricsAddress string
	// MetricsMaxProxies bounds lbplane_proxy_sync: at most this many Envoys get a series each
	// (metrics.DefaultMaxProxySeries when 0).
	MetricsMaxProxies int
	// ProxyStatsInterval is how often each Envoy's stats port is read for backend health and load; 0 turns
	// reading off.
	ProxyStatsInterval time.Duration
	// ProxyStatsSlice is how many clusters one read of an Envoy's /clusters asks for at most (see
	// proxystats.DefaultClusterChunk); negative reads them in one request.
	ProxyStatsSlice int
	// ProxyStatsFullShare is the share of an Envoy's main thread that full reads of its stats may take
	// (proxystats.Poller.FullReadShare); in between only busy clusters are read.
	ProxyStatsFullShare float64
	// NoRouterDynamicStats turns Envoy's per-response upstream stats off (no per-backend latency).
	NoRouterDynamicStats bool
	// AccessLog is what Envoy's listeners log when their policy sets no spec.listener.accessLog:
	// AccessLogJSON (or empty), AccessLogText or AccessLogOff.
	AccessLog string
	// LoadStatusInterval, with Kubernetes, spaces out status writes of requests, errors and latency.
	LoadStatusInterval time.Duration
	// RolloutDefault is how a push that names no mode, of a policy without spec.rollout, reaches the
	// Envoys: rollout.ModeImmediate (or empty) or rollout.ModeStaged.
	RolloutDefault string
	// RolloutCanaryMinAge is how long an Envoy must have been connected and acknowledging its config
	// before it is chosen as a canary (rollout.Controller.MinCanaryAge).
	RolloutCanaryMinAge time.Duration

	// FilesRoots are the only directories whose files policies may name (certificateFile, privateKeyFile,
	// caFile); relative names resolve against the first. Empty means the config dir (when set) and
	// <data-dir>/certs. Unused in Kubernetes mode, where file references are refused.
	FilesRoots []string

	// ReadOnlyToken is the push API token that may only read; generated into <data-dir>/token-readonly when
	// unset.
	ReadOnlyToken string
	// APITLSCert and APITLSKey serve the push API over TLS; both files are watched, so a rotated certificate
	// is used without a restart.
	APITLSCert, APITLSKey string
	// APIInsecureListenAny allows the push API in plaintext on a non-loopback address, where the tokens
	// would cross the network readable by anyone on the path.
	APIInsecureListenAny bool
	// APITLSAuto serves the push API over HTTPS with lbplane's own serving certificate (issued by its CA,
	// with the xDS names), for a cluster where nobody provisions one; lbctl trusts it with the CA certificate.
	APITLSAuto bool
	// CASecret, with Kubernetes, keeps lbplane's CA in this Secret of Namespace instead of <data-dir>/pki:
	// created by the first replica, loaded by the others.
	CASecret string
	// Namespace holds lbplane's own Secrets in Kubernetes mode (LeaderElectionNamespace when empty).
	Namespace string
	// EnvoyCertSecrets maps a proxy group to the Secret in Namespace where lbplane keeps that group's Envoy
	// client certificate (pki.IssueGroup), renewed at two thirds of EnvoyCertValidity.
	EnvoyCertSecrets map[string]string
	// EnvoyIdentityServiceAccounts, with Kubernetes and lbplane's own CA, are the service accounts
	// (namespace/name) of Envoy pods that get a certificate of their own at POST /v1/identity, against their
	// projected service account token: node id the pod's name, group the pod's lbplane.io/proxy-group label.
	EnvoyIdentityServiceAccounts []string
	// EnvoyIdentityAudience is the audience those tokens must carry ("lbplane" when empty).
	EnvoyIdentityAudience string
	// EnvoyIdentityValidity is the life of those certificates (an hour when 0).
	EnvoyIdentityValidity time.Duration
	// CAConfigMap, with Kubernetes, is a ConfigMap of Namespace where lbplane publishes its CA certificate
	// (ca.crt, no key), for Envoy pods to verify lbplane with.
	CAConfigMap string
	// EnvoyCertCheckInterval is how often those Secrets are checked (a minute when 0).
	EnvoyCertCheckInterval time.Duration
	// EnvoyService, with Kubernetes, is the Service of Namespace in front of proxy group EnvoyServiceGroup's
	// Envoys, whose ports lbplane keeps in step with the group's listener ports.
	EnvoyService, EnvoyServiceGroup string
	// GatewayAPI, with Kubernetes, serves Gateway API objects as well (kubesource.GatewayAPI): Gateways of
	// GatewayAPIGroup, listening on GatewayAPIAddress and ports of GatewayAPIPorts, each with a Service in
	// Namespace selecting GatewayAPISelector's pods (default: EnvoyService's).
	GatewayAPI                                          bool
	GatewayAPIGroup, GatewayAPIAddress, GatewayAPIPorts string
	GatewayAPISelector                                  map[string]string

	// RevocationsConfigMap, with Kubernetes, keeps the revoked Envoy identities (lbctl revoke) in this
	// ConfigMap of Namespace, which every replica reads every RevocationsInterval, instead of the local store.
	RevocationsConfigMap string
	// RevocationsInterval is how often that ConfigMap is read (2 s when 0).
	RevocationsInterval time.Duration

	// TokenSecret, with Kubernetes, keeps the push API tokens (the ones not set by Token and ReadOnlyToken)
	// in this Secret of Namespace: the first replica creates it, every replica reads it.
	TokenSecret string
	// Store is where policies are kept: StoreBolt (the default: <data-dir>/policies.db, one lbplane) or
	// StoreEtcd (shared by several replicas, each serving xDS and the push API).
	Store string
	// Etcd, with StoreEtcd, says how to reach etcd and under which prefix.
	Etcd store.EtcdConfig
	// EtcdSecretKeyFile, with StoreEtcd, holds the AES-256 key (64 hex digits) that seals the CA and the
	// push API tokens in etcd; every replica is given the same file.
	EtcdSecretKeyFile string
	// ReplicaID names this replica in the leader election and lbctl status (hostname, pid and a random
	// suffix when empty).
	ReplicaID string
	// sharedCA is the CA every replica shares (from etcd), used instead of <data-dir>/pki.
	sharedCA *pki.CA
	// etcdInsecure says what is insecure about the etcd accepted under --insecure-etcd.
	etcdInsecure []string
	// ownKeys recognises lbplane's own keys and the keys its CA issued: never served (ownkeys.go).
	ownKeys *pki.OwnKeys

	// Pprof serves net/http/pprof under /debug/pprof/ on the metrics address, only with the admin token
	// (Authorization: Bearer), on loopback too.
	Pprof bool
}

// CertsDir is the default files root inside the data directory.
const CertsDir = "certs"

// openFilesRoots opens the roots policy file references resolve under. The data directory itself is denied
// even when a root contains it: it holds the push tokens and keys that must never be served.
func openFilesRoots(cfg *Config) (*fileroots.Roots, error) {
	dirs := cfg.FilesRoots
	if len(dirs) == 0 {
		if cfg.ConfigDir != "" {
			dirs = append(dirs, cfg.ConfigDir)
		}
		certs := filepath.Join(cfg.DataDir, CertsDir)
		if err := os.MkdirAll(certs, 0o700); err != nil {
			return nil, err
		}
		dirs = append(dirs, certs)
	}
	roots, err := fileroots.Open(dirs, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := roots.Protect(protectedFiles(cfg)...); err != nil {
		roots.Close()
		return nil, err
	}
	return roots, nil
}

// protectedFiles are every key and token lbplane holds in files: policies may never name them, by any path
// (a hard link in a files root, a bind mount, a root that contains them). The data directory is denied as a
// whole as well; these are the files that might be elsewhere, or linked from elsewhere.
func protectedFiles(cfg *Config) []string {
	out := pki.SecretFiles(filepath.Join(cfg.DataDir, PKIDir))
	out = append(out, filepath.Join(cfg.DataDir, TokenFile), filepath.Join(cfg.DataDir, ReadOnlyTokenFile),
		filepath.Join(cfg.DataDir, store.File), cfg.APITLSKey, cfg.EtcdSecretKeyFile, cfg.Etcd.Key)
	if cfg.XDSTLS != nil {
		out = append(out, cfg.XDSTLS.Key)
	}
	return out
}

// absPaths makes every directory and file flag absolute and clean, once, at start: a relative name is
// relative to a working directory that nothing should depend on, and compared with the kernel's absolute
// names of open files it never matches (a relative data directory was once not excluded from a files root).
func (cfg *Config) absPaths() error {
	one := func(flag string, p *string) error {
		if *p == "" {
			return nil
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		*p = abs
		return nil
	}
	if err := one("--data-dir", &cfg.DataDir); err != nil {
		return err
	}
	if err := one("--config-dir", &cfg.ConfigDir); err != nil {
		return err
	}
	roots := make([]string, len(cfg.FilesRoots))
	for i, r := range cfg.FilesRoots {
		if r == "" {
			return errors.New("--files-root: an empty directory name")
		}
		roots[i] = r
		if err := one("--files-root", &roots[i]); err != nil {
			return err
		}
	}
	cfg.FilesRoots = roots
	for flag, p := range map[string]*string{"--api-tls-cert": &cfg.APITLSCert, "--api-tls-key": &cfg.APITLSKey,
		"--etcd-secret-key-file": &cfg.EtcdSecretKeyFile, "--etcd-cacert": &cfg.Etcd.CACert, "--etcd-cert": &cfg.Etcd.Cert, "--etcd-key": &cfg.Etcd.Key} {
		if err := one(flag, p); err != nil {
			return err
		}
	}
	if cfg.XDSTLS != nil {
		f := *cfg.XDSTLS
		for flag, p := range map[string]*string{"--xds-tls-cert": &f.Cert, "--xds-tls-key": &f.Key, "--xds-tls-client-ca": &f.ClientCA} {
			if err := one(flag, p); err != nil {
				return err
			}
		}
		cfg.XDSTLS = &f
	}
	return nil
}

// TokenFile is where the push API's admin token lives in the data directory (the name predates the
// read-only token; lbctl setups point LBPLANE_TOKEN_FILE at it).
const TokenFile = "token"

// ReadOnlyTokenFile is where the push API's read-only token lives in the data directory.
const ReadOnlyTokenFile = "token-readonly"

// SharedCACertFile is where a replica on etcd writes the certificate of the CA the replicas share, in its data
// directory, for lbctl on that host (LBPLANE_CA_FILE).
const SharedCACertFile = "ca.crt"

// loadTokens returns the admin and read-only tokens: configured, or read from the data dir, or generated
// there on first start.
func loadTokens(cfg *Config) (string, string, error) {
	admin, err := loadToken(cfg, cfg.Token, TokenFile)
	if err != nil {
		return "", "", err
	}
	ro, err := loadToken(cfg, cfg.ReadOnlyToken, ReadOnlyTokenFile)
	if err != nil {
		return "", "", err
	}
	if admin == ro {
		return "", "", errors.New("the read-only token must differ from the admin token")
	}
	return admin, ro, nil
}

// loadToken returns the configured token, or the one in the data dir's file, generating it on first start.
func loadToken(cfg *Config, configured, file string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	path := filepath.Join(cfg.DataDir, file)
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			// A file copied or restored with looser permissions is tightened: anyone who reads it holds it.
			if err := os.Chmod(path, 0o600); err != nil {
				return "", err
			}
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	t := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", err
	}
	cfg.Log.Info("generated a push API token", "file", path)
	return t, nil
}

// apiTLS returns the push API's TLS config, watching the certificate and key files for rotation, or nil
// when no certificate is configured.
func apiTLS(ctx context.Context, cfg *Config, serving *pki.ServingCert) (*tls.Config, error) {
	switch {
	case cfg.APITLSAuto && (cfg.APITLSCert != "" || cfg.APITLSKey != ""):
		return nil, errors.New("--api-tls-auto: cannot be combined with --api-tls-cert/--api-tls-key")
	case cfg.APITLSAuto:
		return &tls.Config{GetCertificate: serving.GetCertificate, MinVersion: tls.VersionTLS12}, nil
	case cfg.APITLSCert == "" && cfg.APITLSKey == "":
		return nil, nil
	case cfg.APITLSCert == "" || cfg.APITLSKey == "":
		return nil, errors.New("--api-tls-cert and --api-tls-key go together")
	}
	w, err := certwatcher.New(cfg.APITLSCert, cfg.APITLSKey)
	if err != nil {
		return nil, fmt.Errorf("--api-tls-cert/--api-tls-key: %w", err)
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			cfg.Log.Error("watching the push API certificate stopped", "error", err)
		}
	}()
	return &tls.Config{GetCertificate: w.GetCertificate, MinVersion: tls.VersionTLS12}, nil
}

// checkAPIListener refuses a plaintext push API on a non-loopback address unless the operator said so: the
// bearer tokens would travel in clear text.
func checkAPIListener(cfg *Config, lis net.Listener, tlsOn bool) error {
	addr, ok := lis.Addr().(*net.TCPAddr)
	if tlsOn || !ok || addr.IP.IsLoopback() {
		return nil
	}
	if !cfg.APIInsecureListenAny {
		return fmt.Errorf("--api-address %s is not a loopback address: serve the push API over TLS (--api-tls-cert, --api-tls-key), "+
			"or accept sending its tokens in clear text with --api-insecure-listen-any", cfg.APIAddress)
	}
	cfg.Log.Warn("INSECURE: the push API serves plaintext HTTP on a non-loopback address; its bearer tokens can be read by anyone on the network path",
		"address", addr.String())
	return nil
}

// prepare checks the flags every mode needs, makes the paths absolute and the data directory, and removes the
// last run's ports file.
func (cfg *Config) prepare() error {
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if err := cfg.absPaths(); err != nil {
		return err
	}
	// The first start makes the data directory (and its parents) for the files below, whatever the store.
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	return removePorts(cfg.DataDir)
}

// Run serves until ctx ends. It builds each subsystem with its constructor, in the order they depend on one
// another, loads every source, and only then opens the ports and runs them all. Deferred closes run in
// reverse: the files roots, the metrics server, the store.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.prepare(); err != nil {
		return err
	}
	st, err := newStorage(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	x, err := newXDS(ctx, &cfg, st.Store)
	if err != nil {
		return err
	}
	ms, err := newMetrics(&cfg, x, st)
	if err != nil {
		return err
	}
	defer ms.close()
	m := ms.m
	eng, rules, closeRoots, err := newEngine(&cfg, x, m)
	if err != nil {
		return err
	}
	defer closeRoots()
	api := newPushAPI(&cfg, st, x, eng, m, rules)
	envoyStats := newStats(&cfg, eng, x, m, api)
	ro, err := newRollouts(&cfg, eng, x.tracker, st.Store, st.shared, api.proxies, envoyStats.poller, api.Server)
	if err != nil {
		return err
	}
	portsBeforeSources(eng, &cfg, ms.address())
	// Load every source before opening the xDS port.
	watcher, err := loadSources(&cfg, eng, m, api)
	if err != nil {
		return err
	}
	var kube *kubesource.Source
	var kubeRO *kubeRollouts
	if cfg.Kubernetes != nil {
		if kube, err = newKube(&cfg, eng, x.tracker, m, api, envoyStats); err != nil {
			return err
		}
	}
	fleet := fleetView(api, kube)
	if kube != nil {
		if ro, kubeRO, err = newKubeRollouts(&cfg, eng, kube, fleet, envoyStats.poller, api.Server); err != nil {
			return err
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	// Garbage is collected between changes rather than in the middle of one (idlegc.go).
	g.Go(func() error { idleGC(ctx, api.beingMade, cfg.Log); return nil })
	if kube != nil && !runKube(ctx, g, &cfg, kube) {
		return g.Wait()
	}
	// The conditions as status has them, counting every replica's Envoys as status does, the rollout's
	// included (its controller is made by now): each replica's series are then the same, and one with no
	// Envoy of a group connected does not say its policies have none.
	m.Policies(policyCounts(eng, fleet, ro))
	res, _ := eng.Result()
	cfg.Log.Info("sources loaded", "policies", res.Policies.Len(), "groups", len(res.IR.Groups))

	if err := podIdentities(ctx, &cfg, x, api); err != nil {
		return err
	}
	xdsLis, maxConns, err := x.listen(ctx, &cfg)
	if err != nil {
		return err
	}
	apiLis, err := listenAPI(ctx, &cfg, x.serving)
	if err != nil {
		xdsLis.Close()
		return err
	}
	ports := Ports{XDS: xdsLis.Addr().String(), API: apiLis.Addr().String(), Metrics: ms.address()}
	// No backend may name these ports on a host address; set before xDS is served.
	own := ownPorts(ports)
	eng.SetHost(hostView(x.tracker.Hosts(), own))
	cfg.Log.Info("serving", "xds", ports.XDS, "api", ports.API)
	if err := writePorts(cfg.DataDir, ports); err != nil {
		apiLis.Close()
		xdsLis.Close()
		return fmt.Errorf("writing %s: %w", PortsFile, err)
	}

	cfg.Log.Info("xDS connection limit", "max", maxConns)
	x.serve(ctx, g, xdsLis)
	ms.ready.Store(true)
	ms.shutdown(ctx, g)
	api.serve(ctx, g, apiLis, newDashboard(&cfg, st, api, kube, envoyStats))
	if watcher != nil {
		g.Go(func() error { watcher.Run(ctx); return nil })
	}
	// Every replica's Envoys, not only this replica's: a backend on the address of an Envoy served by another
	// replica reaches that Envoy's listeners, the other policies' included, which no hop limit sees.
	hosts := hostProxies(x, otherReplicasView(api, kube, fleet))
	g.Go(func() error { followHost(ctx, eng, hosts, own); return nil })
	st.follow(ctx, g, &cfg, api, x.guard, ro)
	groupCerts, err := newGroupCerts(&cfg, x.ca)
	if err != nil {
		return err
	}
	if groupCerts != nil {
		g.Go(func() error { groupCerts.Run(ctx); return nil })
	}
	m.Certificates(func() map[string]time.Time { return certificateExpiry(x.ca, x.serving, groupCerts) })
	if ro != nil {
		g.Go(func() error { ro.Run(ctx); return nil })
	}
	if kubeRO != nil {
		g.Go(func() error { kubeRO.steer(ctx); return nil })
	}
	envoyStats.run(ctx, g, cfg.ProxyStatsInterval)
	// The engine follows DNS names, and re-reads certificates and CA bundles so that a rotated certificate
	// reaches Envoy (over SDS) without a push.
	runEngine(ctx, g, eng)
	return g.Wait()
}

// reachRules turns the backend address flags into the rules translation applies.
func reachRules(cfg *Config) (reach.Rules, error) {
	r := reach.Rules{EnvoyDNS: cfg.AllowEnvoyDNS}
	var err error
	if r.Allow, r.AllowPorts, err = reach.ParseAllow("--allow-backend-cidrs", cfg.AllowBackendCIDRs); err != nil {
		return r, err
	}
	if cfg.Kubernetes == nil {
		if len(cfg.AddressBackendsNamespaces)+len(cfg.AddressBackendsCIDRs) > 0 {
			return r, errors.New("--address-backends-namespaces and --address-backends-cidrs need --kubernetes (outside it every policy may name addresses)")
		}
		return r, nil
	}
	r.Kubernetes = true
	r.AddressNamespaces = cfg.AddressBackendsNamespaces
	if r.AddressCIDRs, err = reach.ParseCIDRs("--address-backends-cidrs", cfg.AddressBackendsCIDRs); err != nil {
		return r, err
	}
	return r, nil
}

// settings lists what departs from the secure defaults, for lbctl status (GET /v1/version).
func settings(cfg *Config, rules reach.Rules) []string {
	var out []string
	if len(rules.Allow) > 0 {
		out = append(out, "--allow-backend-cidrs "+strings.Join(cfg.AllowBackendCIDRs, ",")+": backends may use these loopback, link-local or unspecified addresses")
	}
	if rules.Kubernetes && len(rules.AddressNamespaces)+len(rules.AddressCIDRs) > 0 {
		out = append(out, "backend addresses in Kubernetes mode: "+rules.Summary())
	}
	if rules.EnvoyDNS {
		out = append(out, "--allow-envoy-dns: backends may have each Envoy resolve their host names, unchecked")
	}
	if cfg.XDSInsecure {
		out = append(out, "--xds-insecure: xDS in plaintext, without authentication")
	}
	if cfg.AllowCrossNamespaceRefs {
		out = append(out, "--allow-cross-namespace-refs: policies may name Services in any namespace")
	}
	if cfg.Etcd.Insecure && cfg.Store == StoreEtcd {
		out = append(out, "--insecure-etcd: "+strings.Join(cfg.etcdInsecure, "; "))
	}
	return out
}

// certificateExpiry is when each certificate lbplane holds expires: its CA, its serving certificate and the
// Envoy group certificates it keeps (each may be absent: bring-your-own certificates, cert-manager, no groups).
func certificateExpiry(ca *pki.CA, serving *pki.ServingCert, groups *kubepki.GroupCerts) map[string]time.Time {
	out := map[string]time.Time{}
	if ca != nil {
		out["ca"] = ca.Cert.NotAfter
	}
	if serving != nil {
		out["xds-serving"] = serving.NotAfter()
	}
	if groups != nil {
		for group, t := range groups.Expiry() {
			out["envoy-group/"+group] = t
		}
	}
	return out
}

// Values of --access-log.
const (
	AccessLogJSON = "json"
	AccessLogText = "text"
	AccessLogOff  = "off"
)

// accessLog is the listeners' default access log for --access-log.
func accessLog(flag string) (ir.AccessLog, error) {
	switch flag {
	case "", AccessLogJSON:
		return ir.AccessLog{Format: ir.AccessLogJSON}, nil
	case AccessLogText:
		return ir.AccessLog{Format: ir.AccessLogText}, nil
	case AccessLogOff:
		return ir.AccessLog{Format: ir.AccessLogOff}, nil
	}
	return ir.AccessLog{}, fmt.Errorf("--access-log: want %s, %s or %s, got %q", AccessLogJSON, AccessLogText, AccessLogOff, flag)
}
