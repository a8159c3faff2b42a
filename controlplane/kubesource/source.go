// Package kubesource feeds LoadBalancerPolicies from a Kubernetes API server into the engine, resolving the
// Services (through their EndpointSlices) and TLS Secrets they reference, and writes each policy's status
// back from the leader replica.
package kubesource

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Source is the Kubernetes side of lbplane serve --kubernetes.
type Source struct {
	Config  *rest.Config
	Engine  *engine.Engine
	Tracker *xdsserver.Tracker
	Log     *slog.Logger
	// Debounce is the most time a change waits behind the previous resync. The least time between two
	// resyncs is a multiple of what the last one took, within [5 ms, Debounce] (see resyncGap): a burst of
	// changes (a rollout touches many EndpointSlices) is gathered into few resyncs, while a lone change is
	// resynced at once.
	Debounce time.Duration
	// EndpointInterval is the least time between the start of a resync that carries only Service and
	// EndpointSlice changes and the end of the resync before it (50 ms when 0; negative: none): under a storm
	// of endpoint changes each proxy group gets at most one version per interval, and each Envoy at most
	// one EDS response, while a change of anything else goes out at once.
	EndpointInterval time.Duration
	// StatusInterval is the least time between two status writes of one policy.
	StatusInterval time.Duration
	// Health, when set, is what the Envoys report of each backend. A change in endpoint health is written
	// at once; requests, errors and latency, which change all the time, at most every LoadStatusInterval.
	Health             func() proxystats.Health
	LoadStatusInterval time.Duration
	// ReadHealth, when set, reads the Envoys' health until ctx ends. It runs on the replica that writes
	// status only: the others would read every Envoy again for nothing, and each read costs the Envoy.
	ReadHealth func(ctx context.Context)
	// LeaderElectionNamespace, when set, elects one replica (a Lease there) to write status; every replica
	// serves xDS either way.
	LeaderElectionNamespace string
	// PodName, PodNamespace and PodUID own this replica's proxy report (see proxies.go), so that it goes
	// with the Pod; when all are empty, Start reads them from POD_NAME, POD_NAMESPACE and POD_UID (the
	// chart sets them from the downward API).
	PodName      string
	PodNamespace string
	PodUID       types.UID
	// Metrics counts refused status writes (lbplane_errors_total{component="status_write"}).
	Metrics *metrics.Metrics
	// Rollouts, when set, hears of every spec change before the engine publishes it (staged rollouts).
	// RolloutKeys are the policies in a rollout, whose status the writer looks at on every tick (a rollout
	// moves on without a change of the policy), and RolloutStatus a policy's rollout for its status.
	Rollouts      RolloutHook
	RolloutKeys   func() []objkey.Key
	RolloutStatus func(objkey.Key) *v1alpha1.RolloutStatus
	// EnvoyService, when its Name is set, is the Service in front of a proxy group's Envoys whose ports the
	// elected replica keeps in step with the group's listener ports (envoyservice.go).
	EnvoyService EnvoyService
	// OwnKeys, when set, says whether a Secret's certificate or key is lbplane's own (pki.OwnKeys.Refuses):
	// its CA Secret and the group certificate Secrets live in the release namespace, where a policy may
	// name them.
	OwnKeys func([]byte) bool
	// GatewayAPI, when set, serves Gateway API objects too (gatewayapi.go).
	GatewayAPI *GatewayAPI

	gw  *gatewayState
	mgr manager.Manager
	// policyStore is the cache's store of LoadBalancerPolicies, whose objects the engine is handed (take).
	policyStore toolscache.Store
	id          string
	trigger     chan struct{}
	synced      chan struct{}
	once        sync.Once
	known       *resolved
	reads       Reads
	// recorder records health events as Kubernetes Events on policies (events.go).
	recorder record.EventRecorder
}

// Reads counts what the source read from its cache, for tests: that a change reads what it touches.
type Reads struct {
	// Policies counts the policies taken anew from the cache for the engine; Services the Service ports
	// resolved through their EndpointSlices; Secrets the Secrets read.
	Policies, Services, Secrets atomic.Int64
}

// Reads returns the counts so far.
func (s *Source) Reads() (policies, services, secrets int64) {
	return s.reads.Policies.Load(), s.reads.Services.Load(), s.reads.Secrets.Load()
}

// Scheme is what the source reads and writes: core/v1 (Services, Secrets, ConfigMaps), discovery/v1
// (EndpointSlices), coordination/v1 (the leader election's Lease, named in its events) and lbplane's own.
// client-go's scheme of every built-in group would cost heap for types the source never sees.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	corev1.AddToScheme(s)
	discoveryv1.AddToScheme(s)
	coordinationv1.AddToScheme(s)
	v1alpha1.AddToScheme(s)
	gwv1.Install(s)
	return s
}

// Synced is closed once the caches have synced and the first snapshot is built.
func (s *Source) Synced() <-chan struct{} { return s.synced }

// Start prepares the manager; Run runs it.
func (s *Source) Start() error {
	s.id = replicaID()
	if s.PodName == "" && s.PodNamespace == "" && s.PodUID == "" {
		s.PodName, s.PodNamespace, s.PodUID = podIdentity()
	}
	s.trigger = make(chan struct{}, 1)
	s.synced = make(chan struct{})
	if s.Debounce == 0 {
		s.Debounce = 100 * time.Millisecond
	}
	if s.EndpointInterval == 0 {
		s.EndpointInterval = DefaultEndpointInterval
	}
	if s.StatusInterval == 0 {
		s.StatusInterval = time.Second
	}
	if s.LoadStatusInterval == 0 {
		s.LoadStatusInterval = time.Minute
	}
	opts := manager.Options{
		Scheme:                 Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Only TLS Secrets are ever referenced; caching the others would hold every credential in memory.
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))},
			// The engine is handed the cache's policies themselves (see take), as they are kept.
			&v1alpha1.LoadBalancerPolicy{}: {Transform: policyForEngine},
			// Nothing reads an EndpointSlice's managed fields, and with a controller writing each slice they
			// are a good part of it. (A Service's are read: envoyservice.go.)
			&discoveryv1.EndpointSlice{}: {Transform: cache.TransformStripManagedFields()},
		}},
	}
	if s.LeaderElectionNamespace != "" {
		opts.LeaderElection = true
		opts.LeaderElectionID = "lbplane-status-writer"
		opts.LeaderElectionNamespace = s.LeaderElectionNamespace
		opts.LeaderElectionReleaseOnCancel = true
	}
	// controller-runtime and client-go log through logr: send it to lbplane's log.
	// The manager and its log package come by their own paths, not through the controller-runtime root
	// package: that one links the controller builder, its workqueue metrics and a --kubeconfig flag, none
	// of which the source uses.
	ctrllog.SetLogger(logr.FromSlogHandler(s.Log.Handler()))
	mgr, err := manager.New(s.Config, opts)
	if err != nil {
		return err
	}
	s.mgr = mgr
	s.known = newResolved()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &discoveryv1.EndpointSlice{}, serviceNameIndex, indexServiceName); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.LoadBalancerPolicy{}, policyServiceIndex, indexPolicyServices); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.LoadBalancerPolicy{}, policySecretIndex, indexPolicySecrets); err != nil {
		return err
	}
	for _, obj := range []client.Object{&v1alpha1.LoadBalancerPolicy{}, &corev1.Service{}, &discoveryv1.EndpointSlice{}, &corev1.Secret{}} {
		inf, err := mgr.GetCache().GetInformer(context.Background(), obj)
		if err != nil {
			return err
		}
		kind := kindOf(obj)
		if _, ok := obj.(*v1alpha1.LoadBalancerPolicy); ok {
			st, ok := inf.(interface{ GetStore() toolscache.Store })
			if !ok {
				return fmt.Errorf("the informer of LoadBalancerPolicies keeps no store")
			}
			s.policyStore = st.GetStore()
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, initial bool) {
				// What the cache held when it synced is read by the first resync, which reads everything.
				if !initial {
					s.Metrics.SourceChange(metrics.SourceKubernetes, kind, 1)
					s.known.mark(o)
					s.serviceForGateways(nil, o)
					s.secretForGateways(o)
					s.poke()
				}
			},
			UpdateFunc: func(old, cur any) {
				if !statusOnly(old, cur) {
					s.Metrics.SourceChange(metrics.SourceKubernetes, kind, 1)
					s.known.mark(old)
					s.known.mark(cur)
					s.serviceForGateways(old, cur)
					s.secretForGateways(cur)
					s.poke()
				}
			},
			DeleteFunc: func(o any) {
				s.Metrics.SourceChange(metrics.SourceKubernetes, kind, 1)
				s.known.mark(o)
				s.serviceForGateways(nil, o)
				s.secretForGateways(o)
				s.poke()
			},
		}); err != nil {
			return err
		}
	}
	if err := s.startGatewayAPI(); err != nil {
		return err
	}
	if err := mgr.Add(everyReplica(s.resyncLoop)); err != nil {
		return err
	}
	if s.LeaderElectionNamespace != "" {
		if err := mgr.Add(&reporter{s: s}); err != nil {
			return err
		}
	}
	if s.ReadHealth != nil {
		if err := mgr.Add(onLeader(func(ctx context.Context) error { s.ReadHealth(ctx); return nil })); err != nil {
			return err
		}
	}
	events, err := s.startEvents()
	if err != nil {
		return err
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error { <-ctx.Done(); events.Shutdown(); return nil })); err != nil {
		return err
	}
	if s.EnvoyService.Name != "" {
		if err := mgr.Add(onLeader(s.keepServicePorts)); err != nil {
			return err
		}
	}
	return mgr.Add(&statusWriter{s: s})
}

// kindOf is the kind of a watched object's type, as lbplane_source_changes_total names it.
func kindOf(obj client.Object) string { return reflect.TypeOf(obj).Elem().Name() }

// Run runs the manager until ctx ends.
func (s *Source) Run(ctx context.Context) error { return s.mgr.Start(ctx) }

// everyReplica is a runnable that runs on every replica: controller-runtime runs anything that does not say
// so on the leader only, and each replica must serve its own Envoys.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }

// onLeader is a runnable for the elected replica only.
type onLeader func(context.Context) error

func (f onLeader) Start(ctx context.Context) error { return f(ctx) }
func (f onLeader) NeedLeaderElection() bool        { return true }

// statusOnly tells an update of a policy's status (lbplane's own writes) from one that can change what is
// served: the spec (its generation), annotations, labels or deletion. Resyncing on status writes made every
// change resync twice, and the second fell in the debounce window of the next change.
func statusOnly(old, cur any) bool {
	o, ok1 := old.(*v1alpha1.LoadBalancerPolicy)
	c, ok2 := cur.(*v1alpha1.LoadBalancerPolicy)
	if !ok1 || !ok2 {
		return false
	}
	return o.Generation == c.Generation && maps.Equal(o.Annotations, c.Annotations) && maps.Equal(o.Labels, c.Labels) &&
		(o.DeletionTimestamp == nil) == (c.DeletionTimestamp == nil)
}

func (s *Source) poke() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// resyncLoop runs on every replica (it is not leader-only): each replica serves xDS from its own cache.
func (s *Source) resyncLoop(ctx context.Context) error {
	if !s.mgr.GetCache().WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	start := time.Now()
	s.resync(ctx)
	s.once.Do(func() { close(s.synced) })
	last, took := time.Now(), time.Since(start)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.trigger:
		}
		if !s.pace(ctx, took, last) {
			return nil
		}
		start := time.Now()
		s.resync(ctx)
		last = time.Now()
		took = last.Sub(start)
	}
}

func (s *Source) resync(ctx context.Context) {
	ch := s.known.take()
	// A LoadBalancerPolicy taking the name of a Gateway's policy: the Gateway's is dropped, and with it the
	// name's exemption from the cross-namespace rule, by reading everything again.
	for key := range ch.policies {
		if s.gw != nil && s.gw.policies[key] != nil {
			ch.all = true
		}
	}
	start := time.Now()
	if ch.all {
		s.resyncAll(ctx)
		return
	}
	rd := newRound()
	c := s.mgr.GetCache()
	prev := map[objkey.Key]*v1alpha1.LoadBalancerPolicy{}
	for key := range ch.policies {
		p := s.policy(key)
		if old := s.known.policies[key]; p != old {
			prev[key] = old
			s.known.setPolicy(rd, key, p)
		}
	}
	if ch.gateways && s.gw != nil && s.gw.on {
		s.updateGateways(ctx, rd, prev)
	}
	// The policies a Service or Secret event touches are found through the index of the cache; what they
	// reference is taken from the copies the engine has (a policy whose cached copy is newer is marked, and
	// the next resync takes it). The Gateways' policies are not in the cache: their own list is searched.
	for name := range ch.services {
		users := s.gatewayServiceUsers(name)
		for _, key := range s.referencing(ctx, c, policyServiceIndex, name) {
			if p := s.known.policies[key]; p != nil {
				users = append(users, p)
			}
		}
		for _, p := range users {
			for _, ref := range serviceRefs(p) {
				if ref.Namespace == name.Namespace && ref.Name == name.Name {
					rd.readServices[ref] = true
				}
			}
		}
	}
	for name := range ch.secrets {
		users := s.gatewaySecretUsers(name)
		for _, key := range s.referencing(ctx, c, policySecretIndex, name) {
			if p := s.known.policies[key]; p != nil {
				users = append(users, p)
			}
		}
		for _, p := range users {
			for _, ref := range translate.SecretRefs(p) {
				if ref == translate.SecretRef(name) {
					rd.readSecrets[ref] = true
				}
			}
		}
	}
	for ref := range rd.readServices {
		s.known.setService(rd, ref, s.endpoints(ctx, ref))
	}
	for ref := range rd.readSecrets {
		s.known.setSecret(rd, ref, s.secret(ctx, ref))
	}
	if rd.empty() {
		return
	}
	s.rolloutChanges(prev, rd)
	s.Engine.UpdateKubernetes(rd.changed, rd.deleted, s.known.services, s.known.secrets, rd.refs)
	s.Log.Debug("kubernetes resync", "changed", len(rd.changed), "deleted", len(rd.deleted), "services read", len(rd.readServices),
		"secrets read", len(rd.readSecrets), "duration", time.Since(start))
}

// resyncsOfEverything counts resyncAll's runs in this process, for tests.
var resyncsOfEverything atomic.Int64

// resyncAll reads every policy and everything they reference: the first resync, and after an event the
// change sets cannot describe. Policies whose resource version did not move keep the object the engine has.
func (s *Source) resyncAll(ctx context.Context) {
	resyncsOfEverything.Add(1)
	items := s.policyStore.List()
	prev := s.known.policies
	next := newResolved()
	rd := newRound()
	policies := make([]*v1alpha1.LoadBalancerPolicy, 0, len(items))
	for _, o := range items {
		item, ok := o.(*v1alpha1.LoadBalancerPolicy)
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: item.Namespace, Name: item.Name}
		p := prev[key]
		if p == nil || p.UID != item.UID || p.ResourceVersion != item.ResourceVersion || item.UID == "" {
			p = s.take(item)
		}
		next.setPolicy(rd, key, p)
		policies = append(policies, p)
	}
	if s.gw != nil && s.gw.on {
		for _, p := range s.gatewayPolicies(ctx, func(k types.NamespacedName) bool { return next.policies[k] != nil }) {
			next.setPolicy(rd, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, p)
			policies = append(policies, p)
		}
	}
	for ref := range rd.readServices {
		next.services[ref] = s.endpoints(ctx, ref)
	}
	for ref := range rd.readSecrets {
		next.secrets[ref] = s.secret(ctx, ref)
	}
	s.known.policies, s.known.services, s.known.secrets = next.policies, next.services, next.secrets
	s.known.serviceUse, s.known.secretUse = next.serviceUse, next.secretUse
	s.rolloutChanges(prev, rd)
	start := time.Now()
	s.Engine.SetKubernetes(policies, s.known.services, s.known.secrets)
	s.Log.Debug("kubernetes resync of everything", "policies", len(policies), "services", len(s.known.services), "secrets", len(s.known.secrets),
		"duration", time.Since(start))
}

// policy reads one policy from the cache: the cache's object when it changed since the engine's, the
// engine's when it did not, nil when it is gone.
func (s *Source) policy(key types.NamespacedName) *v1alpha1.LoadBalancerPolicy {
	o, ok, err := s.policyStore.GetByKey(toolscache.ObjectName(key).String())
	cached, isPolicy := o.(*v1alpha1.LoadBalancerPolicy)
	if err != nil || !ok || !isPolicy {
		return nil
	}
	if p := s.known.policies[key]; p != nil && p.UID == cached.UID && p.ResourceVersion == cached.ResourceVersion && cached.UID != "" {
		return p
	}
	return s.take(cached)
}

// take hands the engine a policy of the cache: the cache's object itself, not a copy. The cache replaces
// an object on every change and never edits one, nothing downstream writes to a policy (translation
// defaults a copy: translate.Prepare), and policyForEngine has already dropped what nothing reads. A copy
// of each policy was 96 MB of the heap at 100,000 policies.
func (s *Source) take(cached *v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicy {
	s.reads.Policies.Add(1)
	return cached
}

// policyForEngine is the cache's transform of a LoadBalancerPolicy, applied once as it is stored: without
// its managed fields (nothing reads them, and they are often the larger part of the object), with its
// kind, which the cache's typed objects otherwise lack and the engine's policies carry, and with the
// strings policies repeat shared (manifest.ShareStrings), as the push API's decoder shares them.
func policyForEngine(o any) (any, error) {
	if p, ok := o.(*v1alpha1.LoadBalancerPolicy); ok {
		p.ManagedFields = nil
		p.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
		manifest.ShareStrings(p)
	}
	return o, nil
}

// referencing lists the policies (namespace/name) whose index entry names the object name.
func (s *Source) referencing(ctx context.Context, c client.Reader, index string, name types.NamespacedName) []types.NamespacedName {
	var list v1alpha1.LoadBalancerPolicyList
	if err := c.List(ctx, &list, client.MatchingFields{index: name.String()}, client.UnsafeDisableDeepCopy); err != nil {
		s.Log.Error("listing the LoadBalancerPolicies that reference an object", "object", name.String(), "error", err)
		return nil
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name})
	}
	return out
}

// endpoints resolves one Service port through the Service's EndpointSlices.
func (s *Source) endpoints(ctx context.Context, ref translate.ServiceRef) translate.ServiceEndpoints {
	c := s.mgr.GetCache()
	svc := &corev1.Service{}
	s.reads.Services.Add(1)
	// Read only, as every read of the cache here: nothing of the cached objects is modified or kept but
	// strings and byte slices, which the cache never modifies either.
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, svc, client.UnsafeDisableDeepCopy); err != nil {
		return translate.ServiceEndpoints{Err: fmt.Sprintf("Service %s/%s not found", ref.Namespace, ref.Name)}
	}
	var list discoveryv1.EndpointSliceList
	if err := c.List(ctx, &list, client.InNamespace(ref.Namespace), client.MatchingFields{serviceNameIndex: ref.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return translate.ServiceEndpoints{Err: err.Error()}
	}
	endpointSlices := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		endpointSlices[i] = &list.Items[i]
	}
	return translate.EndpointsOfService(ref, svc, endpointSlices)
}

func (s *Source) secret(ctx context.Context, ref translate.SecretRef) translate.TLSSecret {
	sec := &corev1.Secret{}
	s.reads.Secrets.Add(1)
	if err := s.mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, sec, client.UnsafeDisableDeepCopy); err != nil {
		return translate.TLSSecret{Err: fmt.Sprintf("Secret %s/%s of type kubernetes.io/tls not found", ref.Namespace, ref.Name)}
	}
	cert, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	if s.OwnKeys != nil && (s.OwnKeys(cert) || s.OwnKeys(key)) {
		return translate.TLSSecret{Err: fmt.Sprintf("Secret %s/%s holds lbplane's own key material (its CA, its serving certificate or an Envoy's identity), which is never served", ref.Namespace, ref.Name)}
	}
	return translate.TLSSecret{Cert: cert, Key: key}
}

func isSecret(o client.Object) bool {
	_, ok := o.(*corev1.Secret)
	return ok
}
