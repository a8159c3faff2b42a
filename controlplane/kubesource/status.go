package kubesource

import (
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// statusWriter writes each policy's status, on the leader only, at most every StatusInterval, and only when
// something other than a transition time changed.
type statusWriter struct {
	s *Source
	// loadWritten is when each policy's load figures were last written.
	loadWritten map[translate.Key]time.Time
	// pendingSince is when a programmed policy was first seen pending (see pendingGrace).
	pendingSince map[translate.Key]time.Time
}

// pendingGrace is how long a programmed policy may show its proxies as pending before that is written.
// Any change publishes a new version of the whole group, so every policy of the group is pending until
// the proxies acknowledge it, usually within milliseconds: writing that would write every policy's status
// twice for a change to one of them (a thousand writes for one endpoint).
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
	var list v1alpha1.LoadBalancerPolicyList
	if err := s.mgr.GetCache().List(ctx, &list); err != nil {
		return
	}
	now := metav1.Now()
	for i := range list.Items {
		p := &list.Items[i]
		k := translate.KeyOf(p)
		pr := res.Policies.Of(k)
		if pr == nil || origin[k] != engine.SourceKubernetes || pr.Generation != p.Generation {
			continue // not translated from this generation yet
		}
		next := policystatus.Compute(pr, proxies, health, now)
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
		// Keep transition times of conditions whose status did not change.
		for j := range next.Conditions {
			if old := meta.FindStatusCondition(p.Status.Conditions, next.Conditions[j].Type); old != nil && old.Status == next.Conditions[j].Status {
				next.Conditions[j].LastTransitionTime = old.LastTransitionTime
			}
		}
		if equality.Semantic.DeepEqual(next, p.Status) {
			continue
		}
		// A full status update, not a merge patch: a patch computed against the cached object leaves out
		// counts that are zero on both sides, and the API server then finds them missing on a policy that
		// never had a status. A conflict (someone changed the policy) is retried on the next tick.
		updated := p.DeepCopy()
		updated.Status = next
		if err := s.mgr.GetClient().Status().Update(ctx, updated); err != nil && !apierrors.IsConflict(err) {
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
