package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubepki"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// newKube starts the Kubernetes source (--kubernetes): policies, Services, EndpointSlices and Secrets from
// the API server, and the status writer. The push API then only reads, and with stats read the status
// writer reads every replica's Envoys, and records ejections and recoveries as Events.
func newKube(cfg *Config, eng *engine.Engine, tracker *xdsserver.Tracker, m *metrics.Metrics, api *pushAPI, st *stats) (*kubesource.Source, error) {
	api.ReadOnly = "policies come from Kubernetes in this mode: use kubectl apply"
	kube := &kubesource.Source{Config: cfg.Kubernetes, Engine: eng, Tracker: tracker, Log: cfg.Log, LeaderElectionNamespace: cfg.LeaderElectionNamespace, Metrics: m,
		OwnKeys: cfg.ownKeys.Refuses, EndpointInterval: cfg.EndpointUpdateInterval}
	if cfg.EnvoyService != "" {
		ns, err := cfg.namespace()
		if err != nil {
			return nil, fmt.Errorf("--envoy-service: %w", err)
		}
		kube.EnvoyService = kubesource.EnvoyService{Namespace: ns, Name: cfg.EnvoyService, Group: cfg.EnvoyServiceGroup}
	}
	if cfg.GatewayAPI {
		ports, err := parsePorts(cfg.GatewayAPIPorts)
		if err != nil {
			return nil, fmt.Errorf("--gateway-api-ports: %w", err)
		}
		ns, _ := cfg.namespace()
		kube.GatewayAPI = &kubesource.GatewayAPI{ProxyGroup: cfg.GatewayAPIGroup, Address: cfg.GatewayAPIAddress, Ports: ports,
			ServiceNamespace: ns, ServiceSelector: cfg.GatewayAPISelector}
	}
	if st.poller != nil {
		// The status writer speaks for every replica's Envoys, so the replica that writes status reads
		// them all. So does every other replica: the dashboard and the push API of any replica then show
		// the whole fleet live, without forwarding to the leader (reads of the stats ports are cheap; the
		// status writes stay the leader's, at their own cadence).
		st.poller.Proxies = kube.AllProxies
		kube.Health, kube.LoadStatusInterval = api.Health, cfg.LoadStatusInterval
	}
	if err := kube.Start(); err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	if st.history != nil {
		// Ejections and recoveries are Events on the policy too (rate-limited; from the status writer).
		st.history.OnEvent = kube.HealthEvent
	}
	return kube, nil
}

// newGroupCerts keeps the proxy groups' Envoy client certificates in Secrets (--envoy-cert-secret), renewed
// by ca; nil without any.
func newGroupCerts(cfg *Config, ca *pki.CA) (*kubepki.GroupCerts, error) {
	if len(cfg.EnvoyCertSecrets) == 0 {
		return nil, nil
	}
	client, err := corev1client.NewForConfig(cfg.Kubernetes)
	if err != nil {
		return nil, err
	}
	ns, _ := cfg.namespace() // checked with --ca-secret
	return &kubepki.GroupCerts{Client: client, Namespace: ns, CA: ca, Secrets: cfg.EnvoyCertSecrets,
		Validity: cfg.EnvoyCertValidity, Log: cfg.Log, Interval: cfg.EnvoyCertCheckInterval}, nil
}

// runKube runs the source, and returns once its caches have synced and the first snapshot is built, or
// ctx ended (false): an Envoy must never get a partial config from a replica that is still starting.
func runKube(ctx context.Context, g *errgroup.Group, cfg *Config, kube *kubesource.Source) bool {
	g.Go(func() error { return kube.Run(ctx) })
	cfg.Log.Info("waiting for the Kubernetes caches to sync")
	select {
	case <-kube.Synced():
		return true
	case <-ctx.Done():
		return false
	}
}

// podIdentities lets Envoy pods get certificates of their own at POST /v1/identity
// (--envoy-identity-service-account), and publishes the CA certificate they verify lbplane with
// (--ca-configmap).
func podIdentities(ctx context.Context, cfg *Config, x *xds, api *pushAPI) error {
	if len(cfg.EnvoyIdentityServiceAccounts) == 0 && cfg.CAConfigMap == "" {
		return nil
	}
	if cfg.Kubernetes == nil || x.issuer == nil || x.guard == nil || cfg.CASecret == "" {
		return errors.New("--envoy-identity-service-account, --ca-configmap: need --kubernetes and lbplane's own CA in a Secret (--ca-secret), without --xds-insecure or --xds-tls-*")
	}
	for _, sa := range cfg.EnvoyIdentityServiceAccounts {
		if _, ok := objkey.Parse(sa); !ok {
			return fmt.Errorf("--envoy-identity-service-account: %q is not NAMESPACE/NAME", sa)
		}
	}
	ns, _ := cfg.namespace() // checked with --ca-secret
	core, err := corev1client.NewForConfig(cfg.Kubernetes)
	if err != nil {
		return err
	}
	if cfg.CAConfigMap != "" {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := kubepki.PublishCA(pctx, core, ns, cfg.CAConfigMap, x.ca.CertPEM)
		cancel()
		if err != nil {
			return fmt.Errorf("--ca-configmap: %w", err)
		}
	}
	if len(cfg.EnvoyIdentityServiceAccounts) == 0 {
		return nil
	}
	authn, err := authnv1client.NewForConfig(cfg.Kubernetes)
	if err != nil {
		return err
	}
	audience := cmp.Or(cfg.EnvoyIdentityAudience, "lbplane")
	pods := &kubepki.PodIdentity{Reviews: authn, Pods: core, Audience: audience, ServiceAccounts: cfg.EnvoyIdentityServiceAccounts}
	api.Identities = &pushapi.Identities{CA: x.ca, Validity: cmp.Or(cfg.EnvoyIdentityValidity, time.Hour),
		Identify: func(ctx context.Context, token string) (string, string, bool, error) {
			// Bounded: the API server's answer is awaited by a pod that will ask again.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			pod, err := pods.Identify(ctx, token)
			return pod.Name, pod.ProxyGroup, kubepki.IsRefusal(err), err
		}}
	cfg.Log.Info("Envoy pods get certificates of their own against their service account tokens", "serviceAccounts", cfg.EnvoyIdentityServiceAccounts, "audience", audience)
	return nil
}

// parsePorts reads a comma-separated list of ports and ranges FROM-TO (reach.ParsePortRange).
func parsePorts(s string) ([]int32, error) {
	var out []int32
	for _, part := range strings.Split(s, ",") {
		a, b, err := reach.ParsePortRange(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		if len(out)+int(b)-int(a)+1 > 65535 {
			return nil, fmt.Errorf("too many ports")
		}
		for p := int32(a); p <= int32(b); p++ {
			out = append(out, p)
		}
	}
	return out, nil
}
