// Package engine runs the pipeline: it holds the policies of every source, translates them, builds each proxy
// group's resources and publishes them to the xDS cache. User errors end up in the translation result (and so
// in status); a failure to build a group is a bug, and that group keeps serving its last good config.
package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/tenancy"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Source names, in priority order: when two sources define the same namespace/name, the first wins.
const (
	SourceKubernetes = "kubernetes"
	SourceConfigDir  = "config-dir"
	SourceStore      = "store"
)

var sourceOrder = []string{SourceKubernetes, SourceConfigDir, SourceStore}

// Engine is safe for concurrent use.
type Engine struct {
	cache *xdscache.Cache
	log   *slog.Logger

	mu        sync.Mutex
	sources   map[string][]*v1alpha1.LoadBalancerPolicy
	result    *translate.Result
	origin    map[objkey.Key]string
	published map[string]bool
	// rev counts the changes to what translation reads (sources, files, Kubernetes references): a Planned
	// translation may be published as it is while rev has not moved.
	rev uint64
	// files holds the last good content of every file a policy references.
	files translate.Files
	// services and secrets are what the Kubernetes source resolved; nil outside Kubernetes mode.
	services map[translate.ServiceRef]translate.ServiceEndpoints
	secrets  map[translate.SecretRef]translate.TLSSecret
	// CrossNamespace allows Service references into other namespaces.
	CrossNamespace bool
	// granted: see SetGatewayPolicies.
	granted map[objkey.Key]bool
	// Reach is the server's rules on backend addresses; set before the first source loads.
	Reach reach.Rules
	// Tenancy is the operator's delegation of ports and host names to namespaces; set before the first
	// source loads.
	Tenancy tenancy.Rules
	// ReadFile reads a referenced file; tests replace it.
	ReadFile func(string) ([]byte, error)
	// NoRouterDynamicStats turns Envoy's per-response upstream stats off in every HTTP listener.
	NoRouterDynamicStats bool
	// AccessLog is what a listener logs when the policy that owns its port sets no spec.listener.accessLog.
	AccessLog ir.AccessLog
	// Metrics, when set, times translation and sizes each group's resources.
	Metrics *metrics.Metrics
	// Resolve resolves backends' host names (see dns.go); nil leaves them unresolved.
	Resolve Resolver
	// dns holds the answers and when each name is due.
	dns dnsState
	// host is what the engine knows of the Envoys' hosts and lbplane's own ports (see SetHost).
	host hostRules

	// translator keeps every policy's translation, so that a change translates only what it touches.
	translator *translate.Translator
	// builds is what each group was last published as (see xdsbuild.Assemble).
	builds map[string]*xdsbuild.Assembly
	merged *merged
	// loaded is the policy list files were last loaded for (see loadFiles).
	loaded []*v1alpha1.LoadBalancerPolicy
	// kube is where each policy of the Kubernetes source is in its list (see UpdateKubernetes).
	kube *kubeIndex
	// fileUse indexes the files the held policies reference (see hold).
	fileUse fileUse
	// split holds the staged rollouts (see split.go).
	split splits
	// overrides are the operator's endpoint overrides (see overrides.go).
	overrides translate.Overrides
	// grpc holds the groups whose gRPC profile is published (see grpc.go).
	grpc grpcProfiles
}

// New returns an engine publishing to cache.
func New(cache *xdscache.Cache, log *slog.Logger) *Engine {
	return &Engine{cache: cache, log: log, sources: map[string][]*v1alpha1.LoadBalancerPolicy{},
		result: translate.Translate(nil, translate.Refs{}), origin: map[objkey.Key]string{}, published: map[string]bool{},
		files: translate.Files{}, ReadFile: os.ReadFile, translator: translate.NewTranslator(), builds: map[string]*xdsbuild.Assembly{},
		dns: dnsState{due: map[translate.DNSQuery]time.Time{}, busy: map[translate.DNSQuery]bool{}}}
}

func (e *Engine) read(path string) translate.File {
	data, err := e.ReadFile(path)
	if err != nil {
		return translate.File{Err: err.Error()}
	}
	return translate.File{Data: data}
}

// loadFiles reads the files of policies that were never read (see notLoaded). Caller holds e.mu.
func (e *Engine) loadFiles(policies []*v1alpha1.LoadBalancerPolicy) {
	fresh := e.notLoaded(policies)
	e.loaded = policies
	for _, path := range translate.ReferencedFiles(fresh) {
		if _, ok := e.files[path]; !ok {
			e.files[path] = e.read(path)
		}
	}
}

// notLoaded is the policies not at their place in the last list loaded. A policy at the same place is the
// same policy (policies are never modified) and has had its files read, so a change among many looks at
// its own policies only, not at every policy's references. Caller holds e.mu.
func (e *Engine) notLoaded(policies []*v1alpha1.LoadBalancerPolicy) []*v1alpha1.LoadBalancerPolicy {
	var fresh []*v1alpha1.LoadBalancerPolicy
	for i, p := range policies {
		if i >= len(e.loaded) || e.loaded[i] != p {
			fresh = append(fresh, p)
		}
	}
	return fresh
}

// FileErrors reads the files a policy references, if not read yet, and says what is wrong with them.
func (e *Engine) FileErrors(p *v1alpha1.LoadBalancerPolicy) []string {
	e.prefetch([]*v1alpha1.LoadBalancerPolicy{p})
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, path := range translate.PolicyFiles(p) {
		if _, ok := e.files[path]; !ok {
			e.files[path] = e.read(path)
		}
	}
	return translate.FileErrors(p, e.files)
}

// RefreshFiles re-reads every referenced file and publishes again if one changed. A policy's new files are
// taken only if they work together (a certificate and its key, a CA bundle); in the middle of a rotation
// (a new certificate written, its key not yet) the policy keeps serving the old pair.
func (e *Engine) RefreshFiles() {
	referenced := e.referencedNow()
	fresh := e.readUnlocked(referenced)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(referenced) == 0 && len(e.files) == 0 {
		// Nothing references a file, nor did: nothing can have changed.
		return
	}
	next := translate.Files{}
	for path := range e.fileUse.paths {
		f, ok := fresh[path]
		if !ok { // a policy that came while reading: rare, and bounded by the reader
			f = e.read(path)
		}
		next[path] = f
	}
	// This runs every few seconds whatever happens: when no file changed, it must not visit every policy.
	if !filesChanged(e.files, next) {
		return
	}
	// Only the policies that reference a file can be broken by one (shadowed ones included: the index
	// holds every source's policies).
	for p, pf := range e.fileUse.of {
		e.fileUse.looks++
		if len(translate.FileErrors(p, next)) == 0 || len(translate.FileErrors(p, e.files)) > 0 {
			continue
		}
		e.log.Warn("a referenced file changed into something unusable; keeping the last good one", "policy", objkey.Of(p).String(),
			"error", strings.Join(translate.FileErrors(p, next), "; "))
		for _, path := range pf.files {
			next[path] = e.files[path]
		}
	}
	if !filesChanged(e.files, next) {
		return
	}
	e.files = next
	e.rev++
	e.log.Info("referenced files changed; publishing again")
	e.run()
}

func filesChanged(old, next translate.Files) bool {
	if len(next) != len(old) {
		return true
	}
	for path, f := range next {
		o, ok := old[path]
		if !ok || o.Err != f.Err || !bytes.Equal(o.Data, f.Data) {
			return true
		}
	}
	return false
}

// merge returns every policy of every source; a name defined by two sources goes to the first.
func merge(sources map[string][]*v1alpha1.LoadBalancerPolicy) ([]*v1alpha1.LoadBalancerPolicy, map[objkey.Key]string, map[objkey.Key]string) {
	var all []*v1alpha1.LoadBalancerPolicy
	origin := map[objkey.Key]string{}
	shadowed := map[objkey.Key]string{}
	for _, src := range sourceOrder {
		for _, p := range sources[src] {
			k := objkey.Of(p)
			if first, dup := origin[k]; dup {
				shadowed[k] = fmt.Sprintf("%s is defined by both the %s and the %s; the %s wins", k, first, src, first)
				continue
			}
			origin[k] = src
			all = append(all, p)
		}
	}
	return all, origin, shadowed
}

// Planned is a translation made by Plan, for Commit to publish.
type Planned struct {
	// Result is what the policies would become.
	Result   *translate.Result
	source   string
	policies []*v1alpha1.LoadBalancerPolicy
	origin   map[objkey.Key]string
	shadowed map[objkey.Key]string
	rev      uint64
	took     time.Duration
}

// Plan translates what the policies would be if source held policies, without publishing anything. The
// plan keeps policies, and Commit hands them to the engine: the caller must not modify the list afterwards
// (a copy of it was a tenth of a megabyte per 10,000 policies of garbage on every push).
func (e *Engine) Plan(source string, policies []*v1alpha1.LoadBalancerPolicy) *Planned {
	e.prefetch(policies)
	e.prefetchNames(policies)
	e.mu.Lock()
	defer e.mu.Unlock()
	start := time.Now()
	sources := make(map[string][]*v1alpha1.LoadBalancerPolicy, len(e.sources))
	for k, v := range e.sources {
		sources[k] = v
	}
	sources[source] = policies
	all, origin, shadowed := e.mergeSources(sources)
	e.loadFiles(all)
	res := e.translator.Translate(all, e.refs())
	return &Planned{Result: res, source: source, policies: policies, origin: origin, shadowed: shadowed, rev: e.rev, took: time.Since(start)}
}

// Preview is Plan's translation alone.
func (e *Engine) Preview(source string, policies []*v1alpha1.LoadBalancerPolicy) *translate.Result {
	return e.Plan(source, policies).Result
}

// Commit makes the plan's source hold its policies and publishes the plan's translation, or translates
// again if anything translation reads changed since the plan. A push plans (to refuse conflicts) and then
// commits: translating only once halves what a push costs with many policies.
func (e *Engine) Commit(p *Planned) *translate.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	stale := p.rev != e.rev
	e.hold(p.source, p.policies)
	e.rev++
	if stale {
		return e.run()
	}
	start := time.Now()
	return e.publish(p.Result, p.origin, p.shadowed, func() time.Duration { return p.took + time.Since(start) })
}

func (e *Engine) refs() translate.Refs {
	return translate.Refs{Files: e.files, Services: e.services, Secrets: e.secrets, CrossNamespace: e.CrossNamespace, Granted: e.granted,
		NoRouterDynamicStats: e.NoRouterDynamicStats, AccessLog: e.AccessLog, Reach: e.rules(), Tenancy: e.Tenancy, DNS: e.dns.answers,
		Overrides: e.overrides}
}

// SetKubernetes replaces the Kubernetes source's policies and the Services and Secrets they reference, and
// publishes the result.
func (e *Engine) SetKubernetes(policies []*v1alpha1.LoadBalancerPolicy, services map[translate.ServiceRef]translate.ServiceEndpoints,
	secrets map[translate.SecretRef]translate.TLSSecret) *translate.Result {
	e.prefetch(policies)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hold(SourceKubernetes, slices.Clone(policies))
	e.services, e.secrets = services, secrets
	e.rev++
	return e.run()
}

// SetGatewayPolicies names the policies whose references across namespaces their source checked (the
// Gateway API's, against ReferenceGrants); it takes effect with the next translation.
func (e *Engine) SetGatewayPolicies(keys map[objkey.Key]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.granted = keys
}

// Set replaces the policies of one source and publishes the result.
func (e *Engine) Set(source string, policies []*v1alpha1.LoadBalancerPolicy) *translate.Result {
	e.prefetch(policies)
	e.prefetchNames(policies)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hold(source, slices.Clone(policies))
	e.rev++
	return e.run()
}

func (e *Engine) run() *translate.Result {
	start := time.Now()
	all, origin, shadowed := e.mergeSources(e.sources)
	e.loadFiles(all)
	res := e.translator.Translate(all, e.refs())
	return e.publish(res, origin, shadowed, func() time.Duration { return time.Since(start) })
}

// publish builds and publishes every group of res; took says how long translating and publishing took.
// Caller holds e.mu.
func (e *Engine) publish(res *translate.Result, origin, shadowed map[objkey.Key]string, took func() time.Duration) *translate.Result {
	begin := time.Now()
	for k, msg := range shadowed {
		e.log.Warn("policy defined twice", "policy", k.String(), "detail", msg)
	}
	// Only groups whose IR changed are built, and within them only what changed (see xdsbuild.Assemble).
	// What is built is validated as it is built: a failure is a bug in translation, and that group keeps
	// its last good config.
	for name, g := range res.IR.Groups {
		prev := e.builds[name]
		if prev != nil && prev.IR() == g {
			continue
		}
		if g.Name != name {
			e.log.Error("translation produced an invalid IR; the group keeps its last good config", "group", name, "error", ir.ErrDuplicateName)
			continue
		}
		next, err := xdsbuild.Assemble(prev, g)
		if err != nil {
			e.log.Error("building config failed; the group keeps its last good config", "group", name, "error", err)
			continue
		}
		e.builds[name] = next
		if e.split.byGroup[name] != nil {
			continue // published with its baseline below
		}
		e.cache.Publish(name, next.State())
		e.publishGRPC(name, false)
		e.published[name] = true
		e.Metrics.Snapshot(name, next.State().Bytes, false)
		e.Metrics.ConfigVersion(name)
	}
	for name := range e.published {
		if _, ok := res.IR.Groups[name]; !ok {
			st, _ := xdscache.NewState(nil)
			e.cache.Publish(name, st)
			delete(e.published, name)
			delete(e.builds, name)
			e.publishGRPC(name, false)
			e.Metrics.Snapshot(name, 0, true)
			e.Metrics.ConfigVersion(name)
		}
	}
	e.publishSplits()
	e.Metrics.Translation(took())
	e.result, e.origin = res, origin
	e.log.Debug("translated and published", "policies", res.Policies.Len(), "groups", len(res.IR.Groups), "duration", took(),
		"publishing", time.Since(begin), "at", time.Now().UnixMicro()) // microseconds, beside the log's milliseconds (bench/runner -cp-trace)
	return res
}

// Result returns the last translation result and which source each policy came from.
func (e *Engine) Result() (*translate.Result, map[objkey.Key]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.result, e.origin
}

// BuiltCluster is one cluster as it is published: the Cluster and ClusterLoadAssignment sent to Envoy
// (decoded from the bytes that are sent; no assignment for a cluster of host names), the IR it was built
// from, and a version that changes whenever either resource does.
type BuiltCluster struct {
	Cluster    *clusterv3.Cluster
	Assignment *endpointv3.ClusterLoadAssignment
	IR         *ir.Cluster
	Version    string
}

// Built returns the cluster name of group as last published, or false. It decodes on demand: nothing is
// kept or computed for it on the publishing path.
func (e *Engine) Built(group, name string) (*BuiltCluster, bool) {
	e.mu.Lock()
	b := e.runBuild(group)
	e.mu.Unlock()
	if b == nil {
		return nil, false
	}
	cm, cv, ok := b.State().Resource(resource.ClusterType, name)
	if !ok {
		return nil, false
	}
	out := &BuiltCluster{Cluster: cm.(*clusterv3.Cluster), Version: cv}
	if am, av, ok := b.State().Resource(resource.EndpointType, name); ok {
		// An assignment's version covers its cluster's (xdscache.NewState).
		out.Assignment, out.Version = am.(*endpointv3.ClusterLoadAssignment), av
	}
	if i, ok := slices.BinarySearchFunc(b.IR().Clusters, name, func(c *ir.Cluster, n string) int { return strings.Compare(c.Name, n) }); ok {
		out.IR = b.IR().Clusters[i]
	}
	return out, true
}

// BuiltState returns what group was last built, nil when it has nothing. States are immutable: two
// calls returning the same state mean nothing was built for the group in between.
func (e *Engine) BuiltState(group string) *xdscache.State {
	e.mu.Lock()
	b := e.runBuild(group)
	e.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.State()
}

// BuiltVersion returns the version Built would give the cluster name of group, without decoding anything.
func (e *Engine) BuiltVersion(group, name string) (string, bool) {
	e.mu.Lock()
	b := e.builds[group]
	e.mu.Unlock()
	if b == nil {
		return "", false
	}
	if v, ok := b.State().ResourceVersion(resource.EndpointType, name); ok {
		return v, true
	}
	return b.State().ResourceVersion(resource.ClusterType, name)
}

// Resource returns one resource of group as last published, decoded from the bytes that are sent (the
// message is the caller's), or nil.
func (e *Engine) Resource(group, typeURL, name string) proto.Message {
	e.mu.Lock()
	b := e.builds[group]
	e.mu.Unlock()
	if b == nil {
		return nil
	}
	m, _, _ := b.State().Resource(typeURL, name)
	return m
}

// Policies returns the policies of one source.
func (e *Engine) Policies(source string) []*v1alpha1.LoadBalancerPolicy {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sources[source])
}
