package kubesource

import (
	"context"
	"hash/maphash"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// The status writer's tick computes only the policies whose inputs changed since it last computed them:
// their translation result (a new pointer), their object (an informer event: a spec change, or a status
// written by this writer or anyone else), the proxies of their group (connected or gone, a NACK), the
// health the Envoys report of their clusters, and the policies still waiting for something (Pending, a
// refused write). Everything else stays as written: at 10,000 policies an endpoint change costs one
// computation, not 10,000 copies and comparisons.

// policyState is what the writer knows of one policy since it last computed its status.
type policyState struct {
	result *translate.PolicyResult
	// states is the print of the sync states of the policy's group's proxies then (see proxyPrints).
	states uint64
	// settled: the status as computed is written, and every proxy of the group runs the result or has a
	// NACK. Such a policy does not depend on its proxies' sync states (runs keeps them running it), only on
	// which proxies there are and their NACKs.
	settled bool
	// again: compute on the next tick whatever changed (Pending within its grace, a refused write).
	again bool
	runs  runs
	// pendingSince is when the policy, programmed, was first seen pending (see pendingGrace).
	pendingSince time.Time
	// loadWritten is when its load figures were last written.
	loadWritten time.Time
	// programmed is, for a Gateway's policy, whether the Envoys run it and why not (see gatewayPolicy).
	programmed *programmedState
}

// groupPrint sums up a group's proxies: members covers which streams there are (and the types they
// take), nacks what they rejected, states also their sync states and versions (which move with every
// change of the group). A change of members concerns every policy of the group; a change of nacks only
// the policies the NACKs name (named, before and after), unless a NACK names none (unattributed: it
// counts against every policy); a change of states only the policies not settled.
type groupPrint struct {
	members, nacks, states uint64
	nacked, unattributed   bool
	named                  map[objkey.Key]bool
}

var printSeed = maphash.MakeSeed()

func proxyPrints(proxies []xdsserver.ProxyStatus) map[string]groupPrint {
	out := map[string]groupPrint{}
	var h, n maphash.Hash
	h.SetSeed(printSeed)
	n.SetSeed(printSeed)
	for i := range proxies {
		p := &proxies[i]
		h.Reset()
		n.Reset()
		h.WriteString(p.NodeID)
		h.WriteByte(0)
		h.WriteString(p.API)
		h.WriteByte(0)
		h.WriteString(p.ConnectedAt.UTC().Format(time.RFC3339Nano))
		h.WriteByte(0)
		g := out[p.Group]
		for _, t := range p.Types {
			h.WriteString(t.TypeURL)
			h.WriteByte(0)
			if !t.Nacked {
				continue
			}
			g.nacked = true
			g.unattributed = g.unattributed || t.NackedResources == nil
			n.WriteString(t.TypeURL)
			n.WriteByte(0)
			n.WriteString(t.NackMessage)
			n.WriteByte(0)
			for _, s := range t.NackedResources {
				n.WriteString(s)
				n.WriteByte(0)
			}
			n.WriteByte(1)
			for _, ref := range t.NackedPolicies {
				n.WriteString(ref.Namespace)
				n.WriteByte(0)
				n.WriteString(ref.Name)
				n.WriteByte(0)
				if g.named == nil {
					g.named = map[objkey.Key]bool{}
				}
				g.named[objkey.Key(ref)] = true
			}
			n.WriteByte(1)
		}
		members := h.Sum64()
		// The proxy's NACKs hashed with its identity: the same NACK moving to another proxy is a change.
		n.WriteString(p.NodeID)
		n.WriteByte(0)
		n.WriteString(p.API)
		nacks := n.Sum64()
		h.WriteString(p.State)
		h.WriteByte(0)
		if p.Unresponsive {
			h.WriteByte(1)
		}
		for _, t := range p.Types {
			h.WriteString(t.SentVersion)
			h.WriteByte(0)
			h.WriteString(t.AckedVersion)
			if t.Pending {
				h.WriteByte(1)
			}
		}
		// Added, not chained: the order of the proxies does not matter.
		g.members += members
		g.nacks += nacks
		g.states += h.Sum64() + nacks
		out[p.Group] = g
	}
	return out
}

// proxiesChanged puts into todo the policies that a change of the groups' proxies since the last tick
// (which streams there are, what they rejected) concerns, as groupPrint tells, and the policies not settled
// whose group's sync states moved.
func (w *statusWriter) proxiesChanged(prints map[string]groupPrint, todo map[objkey.Key]bool) {
	mark := func(keys map[objkey.Key]bool) {
		for k := range keys {
			todo[k] = true
		}
	}
	for _, g := range groupNames(prints, w.prints) {
		old, cur := w.prints[g], prints[g]
		switch {
		case old.members != cur.members:
			mark(w.groups[g])
		case old.nacks == cur.nacks:
		case old.unattributed || cur.unattributed:
			mark(w.groups[g])
		default:
			// The policies the NACKs name, and those computed while a proxy had a NACK, which counted it
			// as running them (see policystatus.Compute): they are computed again, the others' statuses
			// do not depend on it.
			mark(old.named)
			mark(cur.named)
			mark(w.nackSeen[g])
			delete(w.nackSeen, g)
		}
	}
	w.prints = prints
	for k := range w.unsettled {
		st := w.policies[k]
		if st.again || (!st.settled && prints[st.result.ProxyGroup].states != st.states) {
			todo[k] = true
		}
	}
}

func groupNames(a, b map[string]groupPrint) []string {
	out := make([]string, 0, len(a))
	for g := range a {
		out = append(out, g)
	}
	for g := range b {
		if _, ok := a[g]; !ok {
			out = append(out, g)
		}
	}
	return out
}

// pendingKeys collects the keys of objects whose informer events came since the writer last took them.
type pendingKeys[K comparable] struct {
	mu   sync.Mutex
	keys map[K]bool
}

func (e *pendingKeys[K]) put(k K) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.keys == nil {
		e.keys = map[K]bool{}
	}
	e.keys[k] = true
}

func (e *pendingKeys[K]) take() map[K]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := e.keys
	e.keys = nil
	return k
}

// policyEvents collects the keys of policies whose object changed, from the informer's events.
type policyEvents struct{ pendingKeys[objkey.Key] }

func (e *policyEvents) add(o any) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if p, ok := o.(*v1alpha1.LoadBalancerPolicy); ok {
		e.put(objkey.Of(p))
	}
}

// watchPolicies subscribes the writer to policy events and finds the informer's store, which it reads
// without copying: nothing read from it is ever modified, and only a policy whose status is written is
// copied.
func (w *statusWriter) watchPolicies(ctx context.Context) error {
	inf, err := w.s.mgr.GetCache().GetInformer(ctx, &v1alpha1.LoadBalancerPolicy{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.events.add,
		UpdateFunc: func(_, cur any) { w.events.add(cur) },
		DeleteFunc: w.events.add,
	}); err != nil {
		return err
	}
	if st, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
		w.store = st.GetStore()
	}
	return nil
}

// policy returns the cached object of k, not a copy (nil when there is none).
func (w *statusWriter) policy(ctx context.Context, k objkey.Key) *v1alpha1.LoadBalancerPolicy {
	if w.store == nil {
		p := &v1alpha1.LoadBalancerPolicy{}
		if err := w.s.mgr.GetCache().Get(ctx, k, p); err != nil {
			return nil
		}
		return p
	}
	o, ok, err := w.store.GetByKey(k.String())
	if err != nil || !ok {
		return nil
	}
	p, _ := o.(*v1alpha1.LoadBalancerPolicy)
	return p
}

// healthChanged lists the policies whose clusters' health changed since the last report: their endpoint
// counts, ejections or endpoints down (see sameHealth). Requests, errors and latency, which move with
// every report, are written at most every LoadStatusInterval (see limitLoad): every policy with a
// report is looked at once per interval for them. It reports whether any cluster's report changed (or was
// due for its load figures).
func (w *statusWriter) healthChanged(h proxystats.Health, now time.Time, todo map[objkey.Key]bool) (moved bool) {
	var ptr uintptr
	if h != nil {
		ptr = reflect.ValueOf(h).Pointer()
	}
	if ptr == w.healthPtr {
		return false
	}
	w.healthPtr = ptr
	due := now.Sub(w.loadDue) >= w.s.LoadStatusInterval
	if due {
		w.loadDue = now
	}
	mark := func(g, c string) {
		moved = true
		if k, ok := w.clusterOwner[groupCluster{g, c}]; ok {
			todo[k] = true
		}
	}
	for g, clusters := range h {
		for c, b := range clusters {
			if old, ok := w.health[g][c]; due || !ok || !sameHealth(old, b) {
				mark(g, c)
			}
		}
	}
	for g, clusters := range w.health {
		for c := range clusters {
			if _, ok := h[g][c]; !ok {
				mark(g, c)
			}
		}
	}
	w.health = h
	return moved
}

// sameHealth tells whether two reports of a cluster differ at most in the figures keepLoad keeps. A first
// window of history is a change: a status written without one is not kept (see limitLoad).
func sameHealth(a, b v1alpha1.BackendStatus) bool {
	return a.Proxies == b.Proxies && a.Endpoints == b.Endpoints && (a.WindowSeconds == 0) == (b.WindowSeconds == 0) &&
		equality.Semantic.DeepEqual(a.Ejected, b.Ejected) && equality.Semantic.DeepEqual(a.Mismatches, b.Mismatches) &&
		equality.Semantic.DeepEqual(a.PerProxy, b.PerProxy) &&
		((len(a.PerEndpoint) == 0 && len(b.PerEndpoint) == 0) || sameEndpointHealth(a.PerEndpoint, b.PerEndpoint))
}

type groupCluster struct{ group, cluster string }

// own notes the clusters and the group of pr as pr's policy's, dropping those of the result it replaces.
func (w *statusWriter) own(old, pr *translate.PolicyResult) {
	if old == pr {
		return
	}
	if old != nil && (pr == nil || old.ProxyGroup != pr.ProxyGroup) {
		if ks := w.groups[old.ProxyGroup]; ks != nil {
			delete(ks, old.Key)
			if len(ks) == 0 {
				delete(w.groups, old.ProxyGroup)
			}
		}
	}
	if pr != nil {
		ks := w.groups[pr.ProxyGroup]
		if ks == nil {
			ks = map[objkey.Key]bool{}
			w.groups[pr.ProxyGroup] = ks
		}
		ks[pr.Key] = true
	}
	if old != nil {
		for _, c := range old.Clusters {
			if gc := (groupCluster{old.ProxyGroup, c}); w.clusterOwner[gc] == old.Key {
				delete(w.clusterOwner, gc)
			}
		}
	}
	if pr != nil {
		for _, c := range pr.Clusters {
			w.clusterOwner[groupCluster{pr.ProxyGroup, c}] = pr.Key
		}
	}
}

// forget drops everything the writer knows of a policy that is gone.
func (w *statusWriter) forget(k objkey.Key) {
	if st, ok := w.policies[k]; ok {
		if st.result != nil {
			delete(w.nackSeen[st.result.ProxyGroup], k)
		}
		w.own(st.result, nil)
		delete(w.policies, k)
		delete(w.unsettled, k)
	}
}
