// Package lbplanecmd holds the lbplane command line.
package lbplanecmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"github.com/lbplane/lbplane/internal/memlimit"
	"github.com/lbplane/lbplane/version"
)

// Main runs lbplane and returns the exit code.
func Main(args []string) int {
	root := &cobra.Command{Use: "lbplane", Short: "Load-balancing control plane for Envoy", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newServe(), newStore(), &cobra.Command{
		Use: "version", Short: "Print lbplane's version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "lbplane "+version.String()) },
	})
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error: "+err.Error())
		return 1
	}
	return 0
}

func newServe() *cobra.Command {
	cfg := serve.Config{}
	var logFormat, logLevel string
	var xdsTLS xdsserver.TLSFiles
	var kubernetes bool
	var kubeconfig string
	dynamicStats := true
	var gcHeadroomMiB int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve xDS to Envoy and the push API to lbctl",
		Example: `  lbplane serve --data-dir /var/lib/lbplane                 # mTLS with its own CA in /var/lib/lbplane/pki
  lbplane serve --data-dir ./data --config-dir ./policies --xds-server-name lbplane.internal
  lbplane serve --data-dir ./data --xds-tls-cert lbplane.crt --xds-tls-key lbplane.key --xds-tls-client-ca envoys-ca.crt
  lbplane serve --data-dir ./data --xds-insecure            # plaintext, loopback only: experiments`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			cfg.Log = log
			// client-go and leader election log through klog, which otherwise writes its own text lines to
			// stderr: through slog they come out in --log-format (one JSON object a line) like the rest.
			klog.SetSlogLogger(log)
			cfg.NoRouterDynamicStats = !dynamicStats
			if !(cfg.ProxyStatsFullShare > 0 && cfg.ProxyStatsFullShare <= 1) {
				return fmt.Errorf("--proxy-stats-full-share: %v is not a share of Envoy's main thread; give a number above 0 and at most 1", cfg.ProxyStatsFullShare)
			}
			if cfg.XDSMaxConnectionAge < 0 {
				return fmt.Errorf("--xds-max-connection-age: %s is negative; give a duration, or 0 to keep connections open", cfg.XDSMaxConnectionAge)
			}
			switch {
			case cfg.EndpointUpdateInterval < 0:
				return fmt.Errorf("--endpoint-update-interval: %s is negative; give a duration, or 0 to resync endpoint changes as fast as other changes", cfg.EndpointUpdateInterval)
			case cfg.EndpointUpdateInterval == 0:
				cfg.EndpointUpdateInterval = -1 // none (0 is the default in serve.Config)
			}
			// A canary must have been connected for --rollout-canary-min-age (0: the default; negative: any
			// time); the shortest connection lasts 90 % of the maximum age.
			canaryAge := cfg.RolloutCanaryMinAge
			if canaryAge == 0 {
				canaryAge = rollout.DefaultMinCanaryAge
			}
			if age := cfg.XDSMaxConnectionAge; age > 0 && canaryAge > 0 && age*9/10 <= canaryAge {
				log.Warn("--xds-max-connection-age is not longer than --rollout-canary-min-age: Envoys reconnect before they may be chosen as canaries, so staged rollouts find none",
					"xdsMaxConnectionAge", age, "rolloutCanaryMinAge", canaryAge)
			}
			switch set := xdsTLS.Cert != "" || xdsTLS.Key != "" || xdsTLS.ClientCA != ""; {
			case set && (xdsTLS.Cert == "" || xdsTLS.Key == "" || xdsTLS.ClientCA == ""):
				return fmt.Errorf("--xds-tls-cert, --xds-tls-key and --xds-tls-client-ca go together")
			case set:
				cfg.XDSTLS = &xdsTLS
			}
			if cfg.Token == "" {
				cfg.Token = os.Getenv("LBPLANE_TOKEN")
			}
			if cfg.ReadOnlyToken == "" {
				cfg.ReadOnlyToken = os.Getenv("LBPLANE_TOKEN_READONLY")
			}
			// Inside a cluster lbplane reads policies from it unless told otherwise.
			if !cmd.Flags().Changed("kubernetes") && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
				kubernetes = true
			}
			if kubernetes {
				rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
				if err != nil {
					return fmt.Errorf("--kubernetes: %w", err)
				}
				// client-go's default of 5 requests a second (bursts of 10) makes the first status of a few
				// hundred policies take minutes.
				rc.QPS, rc.Burst = 100, 200
				cfg.Kubernetes = rc
			}
			// The Go runtime's soft memory limit and its collector's pace are the process's, set here rather
			// than by the server it runs.
			if gcHeadroomMiB < 0 {
				return fmt.Errorf("--gc-headroom-mib: %d is negative; give a number of MiB, or 0 for Go's own pace", gcHeadroomMiB)
			}
			memlimit.Apply(cfg.Log)
			memlimit.Pace(uint64(gcHeadroomMiB)<<20, cfg.Log)
			ctx, stop := stopOnSignal(cfg.Log)
			defer stop()
			err = serve.Run(ctx, cfg)
			if ctx.Err() != nil {
				cfg.Log.Info("stopped", "error", err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.XDSAddress, "xds-address", "0.0.0.0:18000", "address Envoys connect to (ADS over gRPC, mTLS); with --xds-insecure the default becomes 127.0.0.1:18000; port 0 picks a free port, written to <data-dir>/ports.json")
	f.StringVar(&cfg.APIAddress, "api-address", "127.0.0.1:18001", "address of the push API lbctl uses; port 0 picks a free port (<data-dir>/ports.json)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory of the durable policy store and the generated token (required)")
	f.StringVar(&cfg.ConfigDir, "config-dir", "", "also load, and watch, the policies in this directory's "+manifest.PolicyFilePatterns()+" files (not its subdirectories or hidden files)")
	f.StringVar(&cfg.Token, "token", "", "push API admin bearer token (env LBPLANE_TOKEN); generated into <data-dir>/token when unset")
	f.DurationVar(&cfg.SettleTimeout, "settle-timeout", 10*time.Second, "how long an Envoy is left on a step of a make-before-break change (clusters, then listeners and routes, then removals) without acknowledging it before it is given the next; each Envoy takes its steps on its own, so a slow one delays only itself")
	f.DurationVar(&cfg.PushWait, "push-wait", 2*time.Second, "how long a push's reply waits for the Envoys of the groups it changed to acknowledge it; the reply then names those that had not (0: reply at once)")
	f.BoolVar(&cfg.XDSInsecure, "xds-insecure", false, "serve xDS in plaintext without authentication (any client gets any group's config and keys); binds loopback only")
	f.BoolVar(&cfg.XDSInsecureListenAny, "xds-insecure-listen-any", false, "with --xds-insecure: allow a non-loopback --xds-address")
	f.StringSliceVar(&cfg.XDSServerNames, "xds-server-name", nil, "extra DNS name or IP in lbplane's own xDS certificate (repeatable; the bind host, localhost, 127.0.0.1 and ::1 are always in it)")
	f.DurationVar(&cfg.EnvoyCertValidity, "envoy-cert-validity", 24*time.Hour, "life of the Envoy client certificates lbctl bootstrap obtains, and of the group certificates --envoy-cert-secret keeps")
	f.IntVar(&cfg.MaxXDSConnections, "xds-max-connections", 0, "xDS connections open at once; further clients wait (0: half the open-file limit, -1: no limit)")
	f.IntVar(&gcHeadroomMiB, "gc-headroom-mib", memlimit.DefaultHeadroom>>20, "collect garbage once the heap has grown this many MiB past what was live at the last collection, or a fifth of the live heap when that is more, instead of letting it double (Go's default): with 100,000 policies most of the heap stays live, and doubling it doubles the memory lbplane takes; 0 leaves the pace to Go, and GOGC, when set, overrides")
	f.DurationVar(&cfg.XDSMaxConnectionAge, "xds-max-connection-age", 30*time.Minute, "close each xDS connection about this long after it opened (±10 % at random), once its client has acknowledged everything it was sent, so that clients spread over the replicas again; the client reconnects at once and keeps its config (0: never)")
	f.DurationVar(&cfg.EndpointUpdateInterval, "endpoint-update-interval", kubesource.DefaultEndpointInterval, "in Kubernetes mode, the least time between two versions of a proxy group's config that change only endpoints (EndpointSlices): under a storm of endpoint updates each Envoy gets at most one EDS response per interval, while a lone change, or a change of anything else, goes out at once (0: no such wait)")
	f.DurationVar(&cfg.AckTimeout, "ack-timeout", xdsserver.DefaultAckTimeout, "a proxy that leaves a response unanswered this long is shown STALE and no longer holds back changes for the others")
	f.StringVar(&xdsTLS.Cert, "xds-tls-cert", "", "bring your own CA: PEM certificate for xDS over mTLS (with --xds-tls-key and --xds-tls-client-ca) instead of lbplane's CA")
	f.StringVar(&xdsTLS.Key, "xds-tls-key", "", "PEM private key for xDS over mTLS")
	f.StringVar(&xdsTLS.ClientCA, "xds-tls-client-ca", "", "PEM CA that signs Envoys' client certificates; their CN is the node id and OU the proxy groups")
	f.BoolVar(&kubernetes, "kubernetes", false, "read LoadBalancerPolicies from Kubernetes (on by default inside a cluster)")
	f.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig for --kubernetes outside a cluster (env KUBECONFIG)")
	f.BoolVar(&cfg.AllowCrossNamespaceRefs, "allow-cross-namespace-refs", false, "with --kubernetes: let a policy's backends reference Services in other namespaces")
	f.StringSliceVar(&cfg.AllowBackendCIDRs, "allow-backend-cidrs", nil, "re-admit backend addresses in these CIDRs of the ranges refused by default (loopback 127.0.0.0/8 and ::1, link-local 169.254.0.0/16 and fe80::/10, unspecified 0.0.0.0/8 and ::), e.g. 127.0.0.0/8 for backends on the Envoy's own host, or with :PORT or :FROM-TO on those ports only, e.g. 127.0.0.1:18081-18083 (IPv6: [::1]:8080); logged as a warning and shown in lbctl status")
	f.StringSliceVar(&cfg.DNSResolvers, "dns-resolver", nil, "DNS servers (host:port) that resolve backends' host names, instead of the servers of /etc/resolv.conf (the hosts file is read first); lbplane checks every address they answer and sends the Envoys the allowed ones as endpoints")
	f.BoolVar(&cfg.AllowEnvoyDNS, "allow-envoy-dns", false, "allow backends with dns.resolver: Envoy, whose host names each Envoy resolves itself: lbplane never sees those answers, so nothing refuses one that points at the Envoy's host or a metadata address; logged as a warning and shown in lbctl status")
	f.StringVar(&cfg.TenancyFile, "tenancy-file", "", "YAML file delegating listener ports and host names to namespaces (docs/security.md, \"Host names belong to namespaces\"); without it, the first policy to name a host name on a shared port holds it against other namespaces")
	f.StringSliceVar(&cfg.AddressBackendsNamespaces, "address-backends-namespaces", nil, "with --kubernetes: namespaces whose policies may name endpoint addresses and host names ('*': every namespace); elsewhere backends are Services only")
	f.StringSliceVar(&cfg.AddressBackendsCIDRs, "address-backends-cidrs", nil, "with --kubernetes: IP ranges every namespace's policies may name as endpoint addresses")
	f.StringVar(&cfg.LeaderElectionNamespace, "leader-election-namespace", "", "with --kubernetes: elect one replica (a Lease in this namespace) to write status")
	f.Float64Var(&cfg.APIRateLimit, "api-rate-limit", 20, "push API calls per second per token, and per client address for requests without a good token (bursts of twice that); 0 disables")
	f.StringVar(&cfg.MetricsAddress, "metrics-address", "127.0.0.1:18002", "address serving Prometheus metrics on /metrics (port 0: see <data-dir>/ports.json); empty disables")
	f.IntVar(&cfg.MetricsMaxProxies, "metrics-max-proxies", metrics.DefaultMaxProxySeries, "at most this many Envoys get a lbplane_proxy_sync series each (those not SYNCED first); lbplane_proxy_sync_omitted counts the others")
	f.DurationVar(&cfg.ProxyStatsInterval, "proxy-stats-interval", 2*time.Second, "how often to read each Envoy's stats port (lbctl bootstrap --stats-port) for backend health and load; 0 disables")
	f.StringVar(&cfg.RolloutDefault, "rollout-default", "immediate", "how a pushed (or, with --kubernetes, applied) change reaches the Envoys when neither the push (lbctl push-config --rollout) nor the policy (spec.rollout) says: immediate, or staged (in stages judged on the Envoys' stats, rolled back on a breach; docs/rollouts.md)")
	f.DurationVar(&cfg.RolloutCanaryMinAge, "rollout-canary-min-age", rollout.DefaultMinCanaryAge, "how long an Envoy must have been connected, acknowledging its config, before a staged rollout may choose it as a canary (canaries are chosen at random among those; docs/rollouts.md)")
	f.IntVar(&cfg.ProxyStatsSlice, "proxy-stats-slice", -1, "clusters asked for per read of an Envoy's /clusters (-1: all in one read; measured at 10,000 clusters, slices of 500 tripled a change's median and kept its tail: bench/results/2026-11-27-vm-stats)")
	f.Float64Var(&cfg.ProxyStatsFullShare, "proxy-stats-full-share", proxystats.DefaultFullReadShare, "share of an Envoy's main thread (which also applies config) that full reads of its stats port may take, going by how long the last one took; in between only the busy clusters are read (1: read everything every --proxy-stats-interval)")
	f.DurationVar(&cfg.LoadStatusInterval, "load-status-interval", time.Minute, "with --kubernetes: least time between two writes of a policy's requests, errors and latency (health changes are written at once)")
	f.StringVar(&cfg.AccessLog, "access-log", serve.AccessLogJSON, "what every Envoy listener writes to Envoy's standard output per request (per connection on TCP) unless its policy sets spec.listener.accessLog: json (one JSON object a line, naming the policy, route, backend and endpoint: docs/operations.md), text or off")
	f.BoolVar(&dynamicStats, "router-dynamic-stats", true, "Envoy's per-response upstream stats (upstream_rq_time, per-status counters), where each backend's p99 and error figures come from; false saves about 3 % of Envoy's CPU per request (bench/results)")
	f.StringArrayVar(&cfg.FilesRoots, "files-root", nil, "directory whose files policies may name in certificateFile, privateKeyFile and caFile (repeatable; relative names resolve against the first); default: --config-dir and <data-dir>/certs")
	f.StringVar(&cfg.ReadOnlyToken, "token-readonly", "", "push API bearer token that may only read (env LBPLANE_TOKEN_READONLY); generated into <data-dir>/token-readonly when unset")
	f.StringVar(&cfg.APITLSCert, "api-tls-cert", "", "PEM certificate to serve the push API over HTTPS (re-read when it changes); required for a non-loopback --api-address")
	f.StringVar(&cfg.APITLSKey, "api-tls-key", "", "PEM private key for --api-tls-cert")
	f.StringVar(&cfg.CASecret, "ca-secret", "", "with --kubernetes: keep lbplane's CA in this Secret of --namespace (created on first start, shared by every replica) instead of <data-dir>/pki")
	f.StringVar(&cfg.Namespace, "namespace", "", "with --kubernetes: the namespace of lbplane's own Secrets (default: --leader-election-namespace)")
	f.StringToStringVar(&cfg.EnvoyCertSecrets, "envoy-cert-secret", nil, "with --ca-secret: GROUP=SECRET keeps a client certificate for any Envoy of proxy group GROUP in Secret SECRET of --namespace, renewed at 2/3 of --envoy-cert-validity (repeatable)")
	f.StringVar(&cfg.EnvoyService, "envoy-service", "", "with --kubernetes: the Service of --namespace in front of --envoy-service-group's Envoys; the elected replica gives it a port for every listener port of the group's policies that none of its other ports targets, and removes it when no policy listens there (server-side apply, field manager lbplane)")
	f.StringVar(&cfg.EnvoyServiceGroup, "envoy-service-group", "default", "the proxy group whose listener ports --envoy-service follows")
	f.BoolVar(&cfg.GatewayAPI, "gateway-api", false, "with --kubernetes: serve Gateway API Gateways of GatewayClasses with controllerName lbplane.io/gateway-controller, and their HTTPRoutes (the CRDs must be installed: charts/lbplane/crds/gateway-api)")
	f.StringVar(&cfg.GatewayAPIGroup, "gateway-api-proxy-group", "default", "with --gateway-api: the proxy group whose Envoys serve the Gateways")
	f.StringVar(&cfg.GatewayAPIAddress, "gateway-api-address", "0.0.0.0", "with --gateway-api: the address the Envoys' Gateway listeners bind")
	f.StringVar(&cfg.GatewayAPIPorts, "gateway-api-ports", "20000-20999", "with --gateway-api: the Envoy ports Gateway listeners are given, one per Gateway and listener port (FIRST-LAST or a comma-separated list)")
	f.StringToStringVar(&cfg.GatewayAPISelector, "gateway-api-envoy-selector", nil, "with --gateway-api: the labels of the Envoy pods each Gateway's Service (in --namespace) selects; default: the selector of --envoy-service")
	f.StringArrayVar(&cfg.EnvoyIdentityServiceAccounts, "envoy-identity-service-account", nil, "with --ca-secret: NAMESPACE/NAME is a service account of Envoy pods, each of which gets a certificate of its own (node id: the pod's name; group: its lbplane.io/proxy-group label) at POST /v1/identity against its projected service account token (repeatable)")
	f.StringVar(&cfg.EnvoyIdentityAudience, "envoy-identity-audience", "lbplane", "with --envoy-identity-service-account: the audience the pods' tokens must be issued for")
	f.DurationVar(&cfg.EnvoyIdentityValidity, "envoy-identity-validity", time.Hour, "with --envoy-identity-service-account: the life of each pod's certificate (renewed by the pod at two thirds of it)")
	f.StringVar(&cfg.CAConfigMap, "ca-configmap", "", "with --ca-secret: publish lbplane's CA certificate (ca.crt, no key) in this ConfigMap of --namespace, for Envoy pods to verify lbplane with")
	f.DurationVar(&cfg.EnvoyCertCheckInterval, "envoy-cert-check-interval", time.Minute, "with --envoy-cert-secret: how often each group certificate Secret is checked (and rewritten when missing, due or from another CA)")
	f.BoolVar(&cfg.APITLSAuto, "api-tls-auto", false, "serve the push API over HTTPS with a certificate from lbplane's own CA (the --xds-server-name names); for Kubernetes, where probes do not verify and lbctl trusts the CA")
	f.BoolVar(&cfg.APIInsecureListenAny, "api-insecure-listen-any", false, "allow the push API in plaintext on a non-loopback address (its tokens cross the network readable); logs a warning")
	f.StringVar(&cfg.TokenSecret, "token-secret", "", "with --kubernetes: read the push API tokens (keys token, token-readonly) from this Secret of --namespace, creating it with random tokens on first start; --token and --token-readonly still take precedence")
	f.StringVar(&cfg.RevocationsConfigMap, "revocations-configmap", "", "with --kubernetes: keep the revoked Envoy identities (lbctl revoke) in this ConfigMap of --namespace, read by every replica every 2 s, instead of <data-dir>")
	f.StringVar(&cfg.Store, "store", serve.StoreBolt, "where policies are kept: bbolt (<data-dir>/policies.db, one lbplane) or etcd (shared by several replicas, each serving xDS and the push API: docs/ha.md)")
	f.StringSliceVar(&cfg.Etcd.Endpoints, "etcd-endpoints", nil, "with --store etcd: the etcd members, e.g. https://10.0.0.1:2379 (comma-separated or repeated)")
	f.StringVar(&cfg.Etcd.CACert, "etcd-cacert", "", "with --store etcd: PEM CA that verifies the etcd members' certificates")
	f.StringVar(&cfg.Etcd.Cert, "etcd-cert", "", "with --store etcd: PEM client certificate lbplane authenticates to etcd with (with --etcd-key)")
	f.StringVar(&cfg.Etcd.Key, "etcd-key", "", "with --store etcd: PEM private key of --etcd-cert")
	f.StringVar(&cfg.Etcd.Prefix, "etcd-prefix", store.DefaultEtcdPrefix, "with --store etcd: the key prefix lbplane's policies, revocations, election and sealed CA and tokens live under")
	f.StringVar(&cfg.EtcdSecretKeyFile, "etcd-secret-key-file", "", "with --store etcd: file of 64 hex digits (openssl rand -hex 32; mode 600), the same on every replica: the key that seals lbplane's CA and push API tokens in etcd (AES-256-GCM) and authenticates every record lbplane writes there (records it did not write are refused)")
	f.BoolVar(&cfg.Etcd.Insecure, "insecure-etcd", false, "with --store etcd: accept etcd reached in plaintext, without a client certificate, or that answers clients presenting none (anyone who reaches it can read and delete lbplane's records); logs a warning and lbctl status shows it")
	f.StringVar(&cfg.ReplicaID, "replica-id", "", "with --store etcd: this replica's name in the leader election and lbctl status (default: hostname, pid and a random suffix)")
	f.BoolVar(&cfg.Pprof, "pprof", false, "serve net/http/pprof under /debug/pprof/ on --metrics-address, only to requests with the admin token as a bearer token (loopback included)")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.MarkFlagRequired("data-dir")
	return cmd
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: unsupported value %q; supported: debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: unsupported value %q; supported: text, json", format)
}

// stopOnSignal returns a context that ends on SIGINT or SIGTERM, and logs which signal ended it: an operator
// reading the log of a pod that went away sees why.
func stopOnSignal(log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			log.Info("stopping: received a signal; closing xDS streams and listeners", "signal", s.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}
