package pushapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
)

// stage splits a push's spec changes into those to roll out in stages and those that reach every Envoy at
// once. A change is staged when the push asks for it (?rollout=staged), or names no mode and the policy
// sets spec.rollout or the server's default is staged; ?rollout=immediate never stages. A change of
// metadata alone (same generation) is never staged. The caller holds a.mu; a.recs is still the store
// before the push.
func (a *Admission) stage(pl *plan, mode string) (staged []rollout.Change, unstaged []objkey.Key) {
	if a.Rollouts == nil {
		return nil, nil
	}
	for _, k := range slices.SortedFunc(func(yield func(objkey.Key) bool) {
		for k := range pl.changes {
			if !yield(k) {
				return
			}
		}
	}, store.CompareKeys) {
		rec := pl.changes[k]
		old := a.recs[k]
		if rec == nil || (old != nil && old.Generation == rec.Generation) {
			continue
		}
		pr := pl.after.Policies.Of(k)
		var spec *v1alpha1.Rollout
		if i, found := searchKey(pl.candidate, k); found {
			spec = pl.candidate[i].Spec.Rollout
		}
		want := mode
		if want == "" {
			want = a.RolloutDefault
			if spec != nil {
				want = rollout.ModeStaged
			}
		}
		if want != rollout.ModeStaged || pr == nil {
			unstaged = append(unstaged, k)
			continue
		}
		next, err := rec.Policy()
		if err != nil {
			// Never: the push decoded it. Without its policy the change cannot be staged.
			unstaged = append(unstaged, k)
			continue
		}
		var before *v1alpha1.LoadBalancerPolicy
		if old != nil {
			// A stored version that no longer decodes is served to no Envoy: the baseline is then none.
			before, _ = old.Policy()
		}
		staged = append(staged, rollout.Change{Key: k, Group: pr.ProxyGroup, Old: before, New: next, Generation: rec.Generation, Rollout: spec})
	}
	return staged, unstaged
}

// beginRollouts hands staged changes to the rollouts, before they are stored and published; undo takes
// them back when the push is not stored after all.
func (a *Admission) beginRollouts(staged []rollout.Change) (undo func(), err error) {
	if a.Rollouts == nil || len(staged) == 0 {
		return func() {}, nil
	}
	return a.Rollouts.Begin(staged)
}

// unstageRollouts takes the policies a push changed without stages out of their rollouts.
func (a *Admission) unstageRollouts(unstaged []objkey.Key) error {
	if a.Rollouts == nil || len(unstaged) == 0 {
		return nil
	}
	return a.Rollouts.Unstage(unstaged)
}

// RolloutResult is the answer of GET .../rollout and of its actions (see apiwire).
type RolloutResult = apiwire.RolloutResult

func (s *Server) rolloutStatus(w http.ResponseWriter, r *http.Request) {
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	for _, v := range s.views() {
		if objkey.Of(v) != k {
			continue
		}
		if v.Status.Rollout == nil {
			// Settled: no rollout, or one forgotten since (kubectl rollout status answers a settled Deployment).
			writeJSON(w, http.StatusOK, RolloutResult{Policy: k.String(), Generation: v.Generation, Rollout: apiwire.NoRollout(v.Generation), Conditions: v.Status.Conditions})
			return
		}
		writeJSON(w, http.StatusOK, RolloutResult{Policy: k.String(), Generation: v.Generation, Rollout: *v.Status.Rollout, Conditions: v.Status.Conditions})
		return
	}
	writeErr(w, http.StatusNotFound, fmt.Sprintf("policy %s not found", k))
}

// rolloutAction pauses, resumes or aborts a rollout, or undoes it: undo pushes the baseline back as the
// policy's spec, to every Envoy at once (a new generation, as kubectl rollout undo makes one).
func (s *Server) rolloutAction(w http.ResponseWriter, r *http.Request) {
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if s.ReadOnly != "" {
		writeErr(w, http.StatusConflict, s.ReadOnly)
		return
	}
	if s.Rollouts == nil {
		writeErr(w, http.StatusConflict, "staged rollouts are not available on this server")
		return
	}
	action := r.PathValue("action")
	var err error
	code := http.StatusConflict
	if action == "undo" {
		code, err = s.undo(k)
	} else {
		err = s.Rollouts.Action(k, action)
	}
	if errors.Is(err, rollout.ErrNoRollout) {
		code = http.StatusNotFound
	}
	if err != nil {
		writeErr(w, code, fmt.Sprintf("%s: %v", k, err))
		return
	}
	s.Log.Info("rollout "+action, "policy", k.String())
	if action == "undo" {
		// The policy has no rollout any more: its previous generation is its spec, on every Envoy.
		res := RolloutResult{Policy: k.String(), Rollout: v1alpha1.RolloutStatus{Phase: "Undone",
			Message: "the previous generation is the policy's spec again, on every Envoy"}}
		for _, v := range s.views() {
			if objkey.Of(v) == k {
				res.Generation, res.Rollout.CandidateGeneration = v.Generation, v.Generation
			}
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	s.rolloutStatus(w, r)
}

func (s *Server) undo(k objkey.Key) (int, error) {
	base, err := s.Rollouts.Baseline(k)
	if err != nil {
		return http.StatusConflict, err
	}
	if base == nil {
		return http.StatusConflict, errors.New("the policy was new in this rollout: there is no earlier generation to go back to (delete it instead)")
	}
	// The baseline as it was pushed (its spec, labels and annotations): it names the same policy.
	doc, err := json.Marshal(&v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: base.Namespace, Name: base.Name, Labels: base.Labels, Annotations: base.Annotations},
		Spec:       base.Spec})
	if err != nil {
		return http.StatusInternalServerError, err
	}
	if _, _, code, errs := s.admission().apply(doc, false, rollout.ModeImmediate); len(errs) > 0 {
		return code, errors.New(errs[0])
	}
	return http.StatusOK, nil
}
