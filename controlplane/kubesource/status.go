package kubesource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// statusWriter writes each policy's status, on the leader only, at most every StatusInterval, and only when
// something other than a transition time changed.
type statusWriter struct {
	s *Source
	// loadWritten is when each policy's load figures were last written.
	loadWritten map[translate.Key]time.Time
	// pendingSince is when a programmed policy was first seen pending (see pendingGrace).
	pendingSince map[translate.Key]time.Time
	// ran is, per policy, the translation result and the proxies that ran it when it was last computed
	// Programmed (see runsUnchanged).
	ran map[translate.Key]ranBy
}

// ranBy records that proxies ran a policy's result: every one of them had acknowledged a config that
// carried it.
type ranBy struct {
	result  *translate.PolicyResult
	proxies map[proxyID]bool
}

// proxyID names one stream: an Envoy that reconnects starts from nothing and must acknowledge again.
// connectedAt is in nanoseconds: a time.Time read back from another replica's report is not == to itself
// as this replica's tracker holds it (monotonic reading, location).
type proxyID struct {
	node, api   string
	connectedAt int64
}

func idOf(p *xdsserver.ProxyStatus) proxyID {
	return proxyID{node: p.NodeID, api: p.API, connectedAt: p.ConnectedAt.UnixNano()}
}

// runsUnchanged returns proxies as this policy sees them: a proxy that ran the policy's current result
// still runs it while it catches up with a newer version of the group, since the translator hands out
// the same result (the same pointer) for a policy until its spec or anything it references changes. A
// group has one version, so a change to any policy, or to an EndpointSlice behind one, makes every proxy
// of the group Stale until it acknowledges; without this every policy of the group would turn Pending
// for each change to one of them (a write storm at 10,000 policies, or under endpoint churn).
func runsUnchanged(proxies []xdsserver.ProxyStatus, pr *translate.PolicyResult, ran ranBy) []xdsserver.ProxyStatus {
	if ran.result != pr {
		return proxies
	}
	var out []xdsserver.ProxyStatus
	for i := range proxies {
		p := &proxies[i]
		if p.Group != pr.ProxyGroup || p.State != xdsserver.Stale || !ran.proxies[idOf(p)] {
			continue
		}
		if out == nil {
			out = slices.Clone(proxies)
		}
		out[i].State = xdsserver.Synced
	}
	if out == nil {
		return proxies
	}
	return out
}

// record notes which proxies run pr when st says they all do.
func (w *statusWriter) record(pr *translate.PolicyResult, proxies []xdsserver.ProxyStatus, st *v1alpha1.LoadBalancerPolicyStatus) {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgrammed)
	if c == nil || c.Status != metav1.ConditionTrue {
		delete(w.ran, pr.Key)
		return
	}
	if r, ok := w.ran[pr.Key]; ok && r.result == pr && !slices.ContainsFunc(proxies, func(p xdsserver.ProxyStatus) bool {
		return p.Group == pr.ProxyGroup && !r.proxies[idOf(&p)]
	}) {
		return
	}
	ids := map[proxyID]bool{}
	for i := range proxies {
		if proxies[i].Group == pr.ProxyGroup {
			ids[idOf(&proxies[i])] = true
		}
	}
	w.ran[pr.Key] = ranBy{result: pr, proxies: ids}
}

// pendingGrace is how long a programmed policy whose resources changed (an EndpointSlice behind it, a
// Secret) may show its proxies as pending before that is written: the proxies usually acknowledge within
// milliseconds, and writing Pending then Programmed would write its status twice per endpoint change. The
// group's other policies are not pending at all (see runsUnchanged).
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
	t := time.NewTicker(s.StatusInterval)
	defer t.Stop()
	for {
		w.writeAll(ctx)
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
	proxies := s.AllProxies(ctx)
	var health proxystats.Health
	if s.Health != nil {
		health = s.Health()
	}
	if w.pendingSince == nil {
		w.pendingSince = map[translate.Key]time.Time{}
	}
	if w.loadWritten == nil {
		w.loadWritten = map[translate.Key]time.Time{}
	}
	if w.ran == nil {
		w.ran = map[translate.Key]ranBy{}
	}
	var list v1alpha1.LoadBalancerPolicyList
	if err := s.mgr.GetCache().List(ctx, &list); err != nil {
		return
	}
	now := metav1.Now()
	listed := make(map[translate.Key]bool, len(list.Items))
	defer func() {
		maps.DeleteFunc(w.ran, func(k translate.Key, _ ranBy) bool { return !listed[k] })
	}()
	for i := range list.Items {
		p := &list.Items[i]
		k := translate.KeyOf(p)
		listed[k] = true
		pr := res.Policies.Of(k)
		if pr == nil || origin[k] != engine.SourceKubernetes || pr.Generation != p.Generation {
			continue // not translated from this generation yet
		}
		view := runsUnchanged(proxies, pr, w.ran[k])
		next := policystatus.Compute(pr, view, health, now)
		w.record(pr, view, &next)
		if transientPending(&next, &p.Status) {
			since, seen := w.pendingSince[k]
			if !seen {
				w.pendingSince[k] = now.Time
			}
			if !seen || now.Sub(since) < pendingGrace {
				continue
			}
		} else {
			delete(w.pendingSince, k)
		}
		fresh := limitLoad(&next, &p.Status, w.loadWritten[k], now.Time, s.LoadStatusInterval)
		// Onto the written conditions, as apimachinery sets them: a condition whose status did not change
		// keeps its transition time.
		conds := slices.Clone(p.Status.Conditions)
		for _, c := range next.Conditions {
			meta.SetStatusCondition(&conds, c)
		}
		next.Conditions = conds
		if equality.Semantic.DeepEqual(next, p.Status) {
			continue
		}
		// A full status update, not a merge patch: a patch computed against the cached object leaves out
		// counts that are zero on both sides, and the API server then finds them missing on a policy that
		// never had a status. A conflict (someone changed the policy) is retried on the next tick.
		updated := p.DeepCopy()
		updated.Status = next
		if err := s.mgr.GetClient().Status().Update(ctx, updated); err != nil && !apierrors.IsConflict(err) {
			s.Metrics.Error(metrics.StatusWrite)
			s.Log.Warn("writing status", "policy", k.String(), "error", err)
		} else if err == nil && !fresh {
			w.loadWritten[k] = now.Time
		}
	}
}

// limitLoad keeps the written requests, errors and latency in next while they are younger than interval,
// so that only a change of health makes a write in between; it reports whether it kept them. A status
// written before the Envoys had a window of history carries no load figures and is never kept.
func limitLoad(next, old *v1alpha1.LoadBalancerPolicyStatus, written, now time.Time, interval time.Duration) bool {
	if now.Sub(written) >= interval || !hasLoad(old) {
		return false
	}
	keepLoad(next, old)
	return true
}

func hasLoad(st *v1alpha1.LoadBalancerPolicyStatus) bool {
	for _, b := range st.Backends {
		if b.WindowSeconds == 0 {
			return false
		}
	}
	return len(st.Backends) > 0
}

// keepLoad puts the written requests, errors and latency back into next, so that only a health change
// makes a write before the load figures are due again.
func keepLoad(next, old *v1alpha1.LoadBalancerPolicyStatus) {
	for i := range next.Backends {
		b := &next.Backends[i]
		for _, o := range old.Backends {
			if o.Name == b.Name {
				b.Requests, b.Errors, b.LatencyP99, b.WindowSeconds = o.Requests, o.Errors, o.LatencyP99, o.WindowSeconds
				b.Skew = o.Skew
				if sameEndpointHealth(b.PerEndpoint, o.PerEndpoint) {
					b.PerEndpoint = o.PerEndpoint
				}
			}
		}
	}
}

// sameEndpointHealth reports whether two perEndpoint lists name the same endpoints not taking traffic, for
// the same reasons: then the written list, whose per-second figures move all the time, is kept.
func sameEndpointHealth(a, b []v1alpha1.EndpointStatus) bool {
	down := func(l []v1alpha1.EndpointStatus) map[string]string {
		m := map[string]string{}
		for _, e := range l {
			if e.EjectedOn > 0 {
				m[e.Address] = fmt.Sprint(e.EjectedOn, e.Reasons)
			}
		}
		return m
	}
	return maps.Equal(down(a), down(b))
}
