package kubesource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// The generations of the Gateways' policies. A policy made from Gateway API objects is no object of the
// API server: no metadata.generation moves for it. A staged rollout needs one that every replica gives the
// same spec, that a restart keeps and that only goes up: the rollout names its candidate and its baseline
// by generation. So they are numbered here, from one counter for all the Gateways' policies: a policy made
// with another spec than the last one numbered under its name gets the counter's next number.
//
// The numbers of the policies whose changes are staged, and the counter, are kept in a ConfigMap
// (GatewayGenerationsConfigMap, in the leader election's namespace), written by the elected replica before
// it serves them. The other replicas take the numbers from it: they hold a staged change (their Envoys keep
// what they run) until the elected replica has numbered it, as they hold it until that replica has chosen
// its canaries. A policy a replica finds at its start is served at once, with the stored number of its spec
// or a number of its own. Without leader election nothing is stored: one replica numbers alone, and a
// restart numbers again, as it starts its rollouts again (they are not stored either).

// GatewayGenerationsConfigMap holds the numbers of the Gateways' policies whose changes are staged.
const (
	GatewayGenerationsConfigMap = "lbplane-gateway-generations"
	gatewayGenerationsKey       = "generations"
)

// storedGenerations is the ConfigMap's content.
type storedGenerations struct {
	// Last is the counter: the last number given.
	Last int64 `json:"last"`
	// Policies are the staged policies' numbers, by namespace/name.
	Policies map[string]numbered `json:"policies,omitempty"`
}

// numbered is one policy's number: the generation given to the spec of that hash.
type numbered struct {
	Spec       string `json:"spec"`
	Generation int64  `json:"generation"`
}

// gatewayGenerations numbers the Gateways' policies; used by the resync loop alone.
type gatewayGenerations struct {
	last  int64
	known map[types.NamespacedName]numbered
	// stored is the ConfigMap as last read or written, at resourceVersion rev; read says it was.
	stored storedGenerations
	rev    string
	read   bool
	// retry is set while a poke is due to number held changes again.
	retry atomic.Bool
}

// specHash is the hash of a policy's spec: what its generation stands for.
func specHash(p *v1alpha1.LoadBalancerPolicy) string {
	b, _ := json.Marshal(&p.Spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// numberGateways gives a generation to each policy of the translation that is not the one the engine has
// (published: the last policies handed over, by name), and returns what to hand over: each policy, or, for
// a staged change that cannot be numbered yet, the published one.
func (s *Source) numberGateways(ctx context.Context, made []*v1alpha1.LoadBalancerPolicy, published map[types.NamespacedName]*v1alpha1.LoadBalancerPolicy) []*v1alpha1.LoadBalancerPolicy {
	g := &s.gw.gens
	if g.known == nil {
		g.known = map[types.NamespacedName]numbered{}
	}
	store := s.LeaderElectionNamespace != ""
	leader := s.Leader()
	if store && !g.read {
		if err := s.readGenerations(ctx); err != nil {
			s.Log.Warn("reading the generations of the Gateways' policies", "error", err)
		}
	}
	type pending struct {
		i    int
		key  types.NamespacedName
		hash string
	}
	out := make([]*v1alpha1.LoadBalancerPolicy, len(made))
	var toStore []pending
	held := false
	reread := false
	for i, p := range made {
		out[i] = p
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		old := published[key]
		if p == old {
			continue
		}
		h := specHash(p)
		if k, ok := g.known[key]; ok && k.Spec == h {
			p.Generation = k.Generation // the same spec: its metadata changed, not what the Envoys run
			continue
		}
		staged := store && s.Rollouts != nil && s.Rollouts.Staged(p)
		if staged {
			st, ok := g.stored.Policies[key.String()]
			if !ok || st.Spec != h {
				if !leader && !reread {
					// The elected replica may have numbered it since this replica read.
					reread = true
					if err := s.readGenerations(ctx); err != nil {
						s.Log.Warn("reading the generations of the Gateways' policies", "error", err)
					}
					st, ok = g.stored.Policies[key.String()]
				}
			}
			switch {
			case ok && st.Spec == h:
				s.give(key, p, h, st.Generation)
				continue
			case leader:
				s.give(key, p, h, max(g.last, g.stored.Last)+1)
				toStore = append(toStore, pending{i, key, h})
				continue
			case old != nil:
				// A staged change the elected replica has not numbered: every Envoy keeps what it runs.
				s.Log.Debug("a staged change of a Gateway's policy waits for the elected replica to number it", "policy", key.String())
				out[i], held = old, true
				continue
			}
		}
		s.give(key, p, h, max(g.last, g.stored.Last)+1)
	}
	if len(g.known) > len(made) {
		// The numbers of policies gone go with them (the counter keeps its place).
		present := make(map[types.NamespacedName]bool, len(made))
		for _, p := range made {
			present[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
		for key := range g.known {
			if !present[key] {
				delete(g.known, key)
			}
		}
	}
	if len(toStore) > 0 {
		next := storedGenerations{Last: max(g.last, g.stored.Last), Policies: map[string]numbered{}}
		// The staged policies there are now, with their numbers; a policy gone takes its number with it (the
		// counter never goes back, so a policy made again under its name gets a higher one).
		for _, p := range out {
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			if k, ok := g.known[key]; ok && s.Rollouts.Staged(p) {
				next.Policies[key.String()] = k
			}
		}
		if err := s.writeGenerations(ctx, next); err != nil {
			s.Log.Warn("storing the generations of the Gateways' policies: their staged changes are held until it succeeds", "error", err)
			for _, ps := range toStore {
				out[ps.i] = published[ps.key] // nil for a new policy: not served until its number is stored
				delete(g.known, ps.key)
			}
			held = true
			out = slices.DeleteFunc(out, func(p *v1alpha1.LoadBalancerPolicy) bool { return p == nil })
		}
	}
	if held && g.retry.CompareAndSwap(false, true) {
		time.AfterFunc(time.Second, func() {
			g.retry.Store(false)
			s.gatewayChanged()
		})
	}
	return out
}

// give makes gen p's generation, the number of the spec of hash h.
func (s *Source) give(key types.NamespacedName, p *v1alpha1.LoadBalancerPolicy, h string, gen int64) {
	g := &s.gw.gens
	p.Generation = gen
	g.known[key] = numbered{Spec: h, Generation: gen}
	g.last = max(g.last, gen)
}

// readGenerations reads the stored numbers.
func (s *Source) readGenerations(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g := &s.gw.gens
	var cm corev1.ConfigMap
	err := s.mgr.GetAPIReader().Get(ctx, types.NamespacedName{Namespace: s.LeaderElectionNamespace, Name: GatewayGenerationsConfigMap}, &cm)
	if apierrors.IsNotFound(err) {
		g.stored, g.rev, g.read = storedGenerations{}, "", true
		return nil
	}
	if err != nil {
		return err
	}
	var st storedGenerations
	if err := json.Unmarshal([]byte(cm.Data[gatewayGenerationsKey]), &st); err != nil {
		return fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	g.stored, g.rev, g.read = st, cm.ResourceVersion, true
	return nil
}

// writeGenerations stores next over the version last read; when another replica wrote since (it was the
// elected one), its counter is read and kept below next's.
func (s *Source) writeGenerations(ctx context.Context, next storedGenerations) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g := &s.gw.gens
	b, _ := json.Marshal(next)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.LeaderElectionNamespace, Name: GatewayGenerationsConfigMap, ResourceVersion: g.rev},
		Data: map[string]string{gatewayGenerationsKey: string(b)}}
	c := s.mgr.GetClient()
	var err error
	if g.rev == "" {
		err = c.Create(ctx, cm)
	} else {
		err = c.Update(ctx, cm)
	}
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			// Read again: the next try numbers from the counter stored there.
			g.read = false
		}
		return err
	}
	g.stored, g.rev = next, cm.ResourceVersion
	return nil
}
