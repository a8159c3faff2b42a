package kubesource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// statusWriter writes each policy's status, on the leader only, at most every StatusInterval, and only when
// something other than a transition time changed. Each tick computes only the policies whose inputs
// changed (see statuswork.go).
type statusWriter struct {
	s *Source
	// policies is what the writer knows of each policy it computed.
	policies map[objkey.Key]*policyState
	events   policyEvents
	store    toolscache.Store // the policies' informer store; nil reads through the cache (copies)
	// lastResult is the engine result the last tick looked at, prints its groups' proxies.
	lastResult *translate.Result
	prints     map[string]groupPrint
	// unsettled are the policies to look at whenever their group's proxies change state (see policyState).
	unsettled map[objkey.Key]bool
	// groups lists the policies of each proxy group; nackSeen, those computed while a proxy of the group
	// had a NACK (see proxiesChanged).
	groups   map[string]map[objkey.Key]bool
	nackSeen map[string]map[objkey.Key]bool
	// health is the report the last tick saw (healthPtr its map), loadDue when every policy with a report
	// was last looked at for its load figures; clusterOwner maps a group's cluster to its policy.
	health       proxystats.Health
	healthPtr    uintptr
	loadDue      time.Time
	clusterOwner map[groupCluster]objkey.Key
	// gw is what it knows of the Gateway API objects' status (gatewaystatus.go).
	gw gatewayStatus
}

// computations counts the statuses computed by every writer of the process (of policies, and of the
// Gateway API objects), for tests; computedHook, when a test sets it, is told the kind and the key of each.
var (
	computations atomic.Int64
	computedHook atomic.Pointer[func(kind string, k objkey.Key)]
)

// tickHook, when a test sets it, is called after every tick of a writer of this process.
var tickHook atomic.Pointer[func()]

// kindPolicy is the kind of the statuses computed for policies: a LoadBalancerPolicy's, or whether the
// Envoys run a Gateway's policy.
const kindPolicy = "LoadBalancerPolicy"

// computed counts one status computation.
func computed(kind string, k objkey.Key) {
	computations.Add(1)
	if f := computedHook.Load(); f != nil {
		(*f)(kind, k)
	}
}

// pendingGrace is how long a programmed policy whose resources changed (an EndpointSlice behind it, a
// Secret) may show its proxies as pending before that is written: the proxies usually acknowledge within
// milliseconds, and writing Pending then Programmed would write its status twice per endpoint change. The
// group's other policies are not pending at all, and a proxy that is never current with the group still
// runs this one once it acknowledged a response sent after its change (see runs).
const pendingGrace = 5 * time.Second

// transientPending tells whether next only reports a programmed policy's proxies as catching up.
func transientPending(next, old *v1alpha1.LoadBalancerPolicyStatus) bool {
	n := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionProgrammed)
	o := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionProgrammed)
	return n != nil && o != nil && n.Reason == policystatus.ReasonPending && o.Status == metav1.ConditionTrue &&
		n.ObservedGeneration == o.ObservedGeneration
}

// NeedLeaderElection makes the manager run the writer on the elected replica only.
func (w *statusWriter) NeedLeaderElection() bool { return true }

func (w *statusWriter) Start(ctx context.Context) error {
	s := w.s
	select {
	case <-ctx.Done():
		return nil
	case <-s.synced:
	}
	s.Log.Info("this replica writes policy status", "replica", s.id)
	if err := w.watchPolicies(ctx); err != nil {
		return err
	}
	if s.gw != nil && s.gw.on {
		if err := w.watchGateways(ctx); err != nil {
			return err
		}
	}
	t := time.NewTicker(s.StatusInterval)
	defer t.Stop()
	for {
		w.writeAll(ctx)
		if f := tickHook.Load(); f != nil {
			(*f)()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *statusWriter) writeAll(ctx context.Context) {
	s := w.s
	res, origin := s.Engine.Result()
	if res == nil {
		return
	}
	proxies := s.AllProxies(ctx)
	var health proxystats.Health
	if s.Health != nil {
		health = s.Health()
	}
	if w.policies == nil {
		w.policies = map[objkey.Key]*policyState{}
		w.clusterOwner = map[groupCluster]objkey.Key{}
		w.unsettled = map[objkey.Key]bool{}
		w.groups = map[string]map[objkey.Key]bool{}
		w.nackSeen = map[string]map[objkey.Key]bool{}
	}
	todo := w.events.take()
	if todo == nil {
		todo = map[objkey.Key]bool{}
	}
	// Results that are new, and policies that are gone: the translator tells which keys changed since the
	// last result looked at (a gone policy's too: the loop below forgets it); without that, every result is
	// compared.
	if keys, ok := res.ChangedSince(w.lastResult); ok {
		for _, k := range keys {
			todo[k] = true
		}
		w.lastResult = res
	} else if res != w.lastResult {
		known := 0 // policies of w.policies still in the result
		for k, pr := range res.Policies.All() {
			st := w.policies[k]
			if st != nil {
				known++
			}
			if st == nil || st.result != pr {
				todo[k] = true
			}
		}
		if known < len(w.policies) {
			for k := range w.policies {
				if res.Policies.Of(k) == nil {
					w.forget(k)
				}
			}
		}
		w.lastResult = res
	}
	// A rollout moves on without a change of its policies: they are looked at on every tick.
	if s.RolloutKeys != nil {
		for _, k := range s.RolloutKeys() {
			todo[k] = true
		}
	}
	prints := proxyPrints(proxies)
	w.proxiesChanged(prints, todo)
	healthMoved := w.healthChanged(health, time.Now(), todo)

	// The policies the Gateways became are not objects of the cache: whether the Envoys run each is
	// computed here, alike, for their Gateways' status.
	var gateways map[objkey.Key]*v1alpha1.LoadBalancerPolicy
	if s.gw != nil {
		s.gw.mu.Lock()
		gateways = s.gw.policies
		s.gw.mu.Unlock()
	}
	now := metav1.Now()
	var writes []statusWrite
	for k := range todo {
		pr := res.Policies.Of(k)
		gp := gateways[k]
		var p *v1alpha1.LoadBalancerPolicy
		if gp == nil {
			p = w.policy(ctx, k)
		}
		if pr == nil || (p == nil && gp == nil) {
			w.forget(k)
			continue
		}
		if gp == nil && (origin[k] != engine.SourceKubernetes || pr.Generation != p.Generation) {
			continue // not translated from this generation yet: its result will change
		}
		st := w.policies[k]
		if st == nil {
			st = &policyState{}
			w.policies[k] = st
		}
		w.own(st.result, pr)
		g := prints[pr.ProxyGroup]
		st.result, st.states = pr, g.states
		if g.nacked {
			seen := w.nackSeen[pr.ProxyGroup]
			if seen == nil {
				seen = map[objkey.Key]bool{}
				w.nackSeen[pr.ProxyGroup] = seen
			}
			seen[k] = true
		}
		if gp != nil {
			w.gatewayPolicy(gp, st, pr, proxies, now)
			continue
		}
		if u, fresh := w.compute(st, p, pr, proxies, health, now); u != nil {
			writes = append(writes, statusWrite{st: st, policy: u, fresh: fresh})
		}
		if len(writes) == sendBatch {
			w.send(ctx, writes, now.Time)
			writes = writes[:0]
		}
	}
	w.send(ctx, writes, now.Time)
	if s.gw != nil && s.gw.on {
		w.gatewayTick(ctx, res, health, healthMoved, now)
	}
	for k := range todo {
		if st, ok := w.policies[k]; ok && (st.again || !st.settled) {
			w.unsettled[k] = true
		} else {
			delete(w.unsettled, k)
		}
	}
}

// statusWrite is a policy whose status is to be written.
type statusWrite struct {
	st     *policyState
	policy *v1alpha1.LoadBalancerPolicy
	// fresh: the load figures are the ones computed now, not the written ones kept (see limitLoad).
	fresh bool
	err   error
}

// sendBatch is how many computed statuses are held before they are sent: each is a copy of its policy, and
// the first statuses of 100,000 policies, all computed before the first was sent, held 250 MB for the
// minutes their writes took.
const sendBatch = 256

// concurrentWrites bounds the status writes in flight: one at a time, each a round trip to the API
// server, the first status of 10,000 policies took minutes on a loaded one.
const concurrentWrites = 8

// send writes the statuses, a few at a time, then notes what came of each.
func (w *statusWriter) send(ctx context.Context, writes []statusWrite, now time.Time) {
	sem := make(chan struct{}, concurrentWrites)
	var wg sync.WaitGroup
	for i := range writes {
		sem <- struct{}{}
		wg.Add(1)
		go func(u *statusWrite) {
			defer func() { <-sem; wg.Done() }()
			// A full status update, not a merge patch: a patch computed against the cached object leaves
			// out counts that are zero on both sides, and the API server then finds them missing on a
			// policy that never had a status.
			u.err = w.s.mgr.GetClient().Status().Update(ctx, u.policy)
		}(&writes[i])
	}
	wg.Wait()
	for _, u := range writes {
		if u.err != nil {
			// A conflict (someone changed the policy) is retried on the next tick.
			u.st.again = true
			if !apierrors.IsConflict(u.err) {
				w.s.Metrics.Error(metrics.StatusWrite)
				w.s.Log.Warn("writing status", "policy", u.st.result.Key.String(), "error", u.err)
			}
			continue
		}
		if u.fresh {
			u.st.loadWritten = now
		}
		// The write comes back as an event and is compared then.
	}
}

// compute computes one policy's status and returns the policy to write when it changed, and whether its
// load figures are the ones computed now. p is the informer's object: it is read, never modified.
func (w *statusWriter) compute(st *policyState, p *v1alpha1.LoadBalancerPolicy, pr *translate.PolicyResult,
	proxies []xdsserver.ProxyStatus, health proxystats.Health, now metav1.Time) (*v1alpha1.LoadBalancerPolicy, bool) {
	computed(kindPolicy, pr.Key)
	st.again, st.settled = false, false
	view := st.runs.view(proxies, pr)
	next := policystatus.Compute(pr, view, health, now)
	if w.s.RolloutStatus != nil {
		policystatus.WithRollout(&next, w.s.RolloutStatus(pr.Key), now)
	}
	prog := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionProgrammed)
	pending := prog != nil && prog.Reason == policystatus.ReasonPending
	// Pending resolves by itself (the proxies acknowledge): look again on the next tick.
	st.again = pending
	if transientPending(&next, &p.Status) {
		if st.pendingSince.IsZero() {
			st.pendingSince = now.Time
		}
		if now.Sub(st.pendingSince) < pendingGrace {
			return nil, false
		}
	} else {
		st.pendingSince = time.Time{}
	}
	fresh := !limitLoad(next.Backends, p.Status.Backends, st.loadWritten, now.Time, w.s.LoadStatusInterval)
	// Onto the written conditions, as apimachinery sets them: a condition whose status did not change
	// keeps its transition time.
	conds := slices.Clone(p.Status.Conditions)
	for _, c := range next.Conditions {
		meta.SetStatusCondition(&conds, c)
	}
	if w.s.RolloutStatus != nil && next.Rollout == nil {
		// The rollout is over and gone (undone, or the policy changed without stages): so is its verdict.
		meta.RemoveStatusCondition(&conds, v1alpha1.ConditionRolledBack)
	}
	next.Conditions = conds
	if equality.Semantic.DeepEqual(next, p.Status) {
		st.settled = !pending && st.runs.covers(proxies, pr.ProxyGroup)
		return nil, false
	}
	// next may share slices with the cached object (see keepLoad): the update decodes the answer into what
	// it sends, so it sends copies.
	updated := p.DeepCopy()
	updated.Status = *next.DeepCopy()
	return updated, fresh
}

// limitLoad keeps the written requests, errors and latency in next while they are younger than interval,
// so that only a change of health makes a write in between; it reports whether it kept them. A status
// written before the Envoys had a window of history carries no load figures and is never kept.
func limitLoad(next, old []v1alpha1.BackendStatus, written, now time.Time, interval time.Duration) bool {
	if now.Sub(written) >= interval || !hasLoad(old) {
		return false
	}
	keepLoad(next, old)
	return true
}

func hasLoad(backends []v1alpha1.BackendStatus) bool {
	for _, b := range backends {
		if b.WindowSeconds == 0 {
			return false
		}
	}
	return len(backends) > 0
}

// keepLoad puts the written requests, errors, latency, responses, connections and bytes back into next, so
// that only a health change makes a write before the load figures are due again.
func keepLoad(next, old []v1alpha1.BackendStatus) {
	for i := range next {
		b := &next[i]
		for _, o := range old {
			if o.Name == b.Name {
				b.Requests, b.Errors, b.LatencyP99Ms, b.WindowSeconds = o.Requests, o.Errors, o.LatencyP99Ms, o.WindowSeconds
				b.Skew = o.Skew
				b.Responses, b.ClientErrorRate, b.NoHealthyEndpoint, b.Connections, b.Bytes = o.Responses, o.ClientErrorRate, o.NoHealthyEndpoint, o.Connections, o.Bytes
				if sameEndpointHealth(b.PerEndpoint, o.PerEndpoint) {
					b.PerEndpoint = o.PerEndpoint
				}
			}
		}
	}
}

// sameEndpointHealth reports whether two perEndpoint lists name the same endpoints not taking traffic (or of
// unknown health), for the same reasons, and the same endpoints warming up: then the written list, whose
// per-second figures move all the time, is kept. An endpoint that starts or ends its slow-start ramp is a
// change written at once; its percentage moving within the window is a load figure.
func sameEndpointHealth(a, b []v1alpha1.EndpointStatus) bool {
	down := func(l []v1alpha1.EndpointStatus) map[string]string {
		m := map[string]string{}
		for _, e := range l {
			if e.EjectedOn > 0 || e.Health == v1alpha1.EndpointUnknown {
				m[e.Address] = fmt.Sprint(e.EjectedOn, e.Reasons, e.Health)
			}
			if e.WarmingPercent != nil {
				m[e.Address] += " warming"
			}
		}
		return m
	}
	return maps.Equal(down(a), down(b))
}
