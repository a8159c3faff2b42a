package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// pushBehind pushes policy name's next generation while every Envoy of f is behind (acknowledges
// nothing new), and returns its rollout's status.
func (f *fleet) pushBehind(name string, port int32, edit func(*v1alpha1.LoadBalancerPolicy)) *v1alpha1.RolloutStatus {
	f.t.Helper()
	for _, p := range f.proxies {
		f.behind[p.NodeID] = true
	}
	f.push(name, port, edit)
	st := f.status(name)
	if st.Phase != v1alpha1.RolloutProgressing || len(st.Canaries) == 0 {
		f.t.Fatalf("no stage under way: %+v", st)
	}
	return st
}

// A stage's bake and its numbers count from when its canaries acknowledged the candidate, not from when
// they were placed: a canary that takes a bad change late has served the baseline's good traffic until
// then, which counted from placement would dilute the candidate's errors below the threshold and pass it.
func TestTheBakeCountsFromTheCanariesAcknowledgement(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3")
	f.push("shop", 80, nil)
	f.acked()
	st := f.pushBehind("shop", 81, nil)
	placed := st.StageStarted.Time
	took := placed.Add(8 * time.Second)
	// Each canary served 2,000 good requests on the baseline before it took the candidate, then 100 on the
	// candidate, all failed; the other Envoy served the baseline throughout.
	cluster := "default/shop/app"
	at := []time.Time{placed, took, took.Add(10 * time.Second)}
	f.c.Histories = func() []proxystats.History {
		var out []proxystats.History
		for _, p := range f.proxies {
			done, failed := []uint64{0, 2000, 2100}, []uint64{0, 0, 100}
			if !strings.Contains(strings.Join(st.Canaries, ","), p.NodeID) {
				done, failed = []uint64{0, 2000, 2100}, []uint64{0, 0, 0}
			}
			h := proxystats.History{Node: p.NodeID, Group: p.Group}
			for i := range at {
				h.Samples = append(h.Samples, &proxystats.Sample{At: at[i], Clusters: map[string]*proxystats.Cluster{
					cluster: {Counters: proxystats.Counters{Completed: done[i], Errors5xx: failed[i]}}}})
			}
			out = append(out, h)
		}
		return out
	}

	// A bake after placement, the canaries still run the baseline: nothing is judged.
	f.c.step(placed.Add(11 * time.Second))
	got := f.status("shop")
	if got.Phase != v1alpha1.RolloutProgressing || got.Canary != nil || got.CandidateSince != nil ||
		!strings.Contains(got.Message, "waiting for 2 of 2 canaries to take the candidate") {
		t.Fatalf("a bake after placement, before any canary took the candidate: %+v", got)
	}

	// The canaries acknowledge the candidate 8 s after placement: the bake counts from then.
	for _, n := range st.Canaries {
		f.behind[n] = false
	}
	f.ackAt = took
	f.c.step(placed.Add(12 * time.Second))
	got = f.status("shop")
	if got.Phase != v1alpha1.RolloutProgressing || got.Canary != nil || got.CandidateSince == nil || !got.CandidateSince.Time.Equal(took) ||
		!strings.Contains(got.Message, "canaries running the candidate since "+took.UTC().Format(time.RFC3339)) ||
		!strings.Contains(got.Message, "judged at "+took.Add(10*time.Second).UTC().Format(time.RFC3339)) {
		t.Fatalf("after the canaries took the candidate: %+v", got)
	}

	// A bake after they took it, the window is theirs alone: 100 failed of 100.
	f.c.step(took.Add(10 * time.Second))
	got = f.status("shop")
	if got.Phase != v1alpha1.RolloutRolledBack || got.Canary == nil || got.Canary.Requests != 200 || got.Canary.ErrorRate != 1 {
		t.Fatalf("judged from the canaries' acknowledgement: %+v (canary %+v)", got, got.Canary)
	}
}

// A canary that never takes the candidate (it does not answer, or rejects it) is a breach once the bake
// time (at least MinTakeBound) has passed, and the message names each canary and why; a canary that
// reconnects late is waited for.
func TestCanariesThatNeverTakeTheCandidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		nack bool
		want []string
	}{
		{"no answer", false, []string{"2 of 2 canaries did not take the candidate", "has not acknowledged the candidate's config within 30s"}},
		{"a rejection and no answer", true, []string{"2 of 2 canaries did not take the candidate", "rejected the candidate (Listener: bind: address already in use)",
			"has not acknowledged the candidate's config within 30s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, "n1", "n2", "n3", "n4", "n5")
			f.push("shop", 80, nil)
			f.acked()
			st := f.pushBehind("shop", 81, nil)
			placed := st.StageStarted.Time
			if tc.nack {
				for i, p := range f.proxies {
					if p.NodeID == st.Canaries[0] {
						f.proxies[i].Types = []xdsserver.TypeStatus{{TypeURL: "type.googleapis.com/envoy.config.listener.v3.Listener", Nacked: true,
							NackMessage: "bind: address already in use", NackedAt: placed.Add(time.Second), NackedResources: []string{"l"},
							NackedPolicies: []apiwire.PolicyRef{{Namespace: "default", Name: "shop"}}}}
					}
				}
			}
			f.c.step(placed.Add(time.Second))
			f.c.step(placed.Add(30 * time.Second))
			if got := f.status("shop"); got.Phase != v1alpha1.RolloutProgressing || !strings.Contains(got.Message, "waiting for") {
				t.Fatalf("before the bound: %+v", got)
			}
			f.c.step(placed.Add(31 * time.Second))
			got := f.status("shop")
			if got.Phase != v1alpha1.RolloutRolledBack {
				t.Fatalf("past the bound: %+v", got)
			}
			for _, w := range append(tc.want, "canary "+st.Canaries[0], "canary "+st.Canaries[1]) {
				if !strings.Contains(got.Message, w) {
					t.Errorf("the message %q does not say %q", got.Message, w)
				}
			}
		})
	}
}

// One canary of three that does not take the candidate is left out, not a breach (no single Envoy decides):
// the bake counts from the others', and it is flagged.
func TestOneLateCanaryIsLeftOut(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3", "n4", "n5")
	f.push("shop", 80, nil)
	f.acked()
	three := func(p *v1alpha1.LoadBalancerPolicy) {
		p.Spec.Rollout.Stages = []v1alpha1.RolloutStage{{Envoys: 3}, {Percent: 100}}
	}
	st := f.pushBehind("shop", 81, three)
	if len(st.Canaries) != 3 {
		t.Fatalf("canaries %v, want three", st.Canaries)
	}
	placed := st.StageStarted.Time
	late := st.Canaries[2]
	for _, n := range st.Canaries[:2] {
		f.behind[n] = false
	}
	f.ackAt = placed.Add(2 * time.Second)
	f.c.step(placed.Add(2 * time.Second))
	if got := f.status("shop"); got.CandidateSince != nil || !strings.Contains(got.Message, "waiting for 1 of 3 canaries to take the candidate ("+late+")") {
		t.Fatalf("one canary behind: %+v", got)
	}
	f.c.step(placed.Add(32 * time.Second))
	got := f.status("shop")
	if got.Phase != v1alpha1.RolloutProgressing || got.CandidateSince == nil || !got.CandidateSince.Time.Equal(placed.Add(2*time.Second)) {
		t.Fatalf("past the bound, one canary of three behind: %+v", got)
	}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		f.serve(n, "shop", 200, 0)
	}
	f.from = placed.Add(2 * time.Second)
	f.c.step(placed.Add(33 * time.Second))
	got = f.status("shop")
	if got.Phase != v1alpha1.RolloutSucceeded && (got.Phase != v1alpha1.RolloutProgressing || got.Stage != 2) {
		t.Fatalf("judged on the two canaries that took the candidate: %+v", got)
	}
	if got.Canary == nil || got.Canary.Envoys != 2 || !strings.Contains(got.Message, late+" took the candidate after the other canaries' bake began") {
		t.Errorf("the late canary is not left out: %+v (canary %+v)", got, got.Canary)
	}
	// The next stage does not wait for it again: the bake starts once the others took the candidate.
	if got.Phase != v1alpha1.RolloutProgressing || got.Stage != 2 {
		t.Fatalf("after stage 1: %+v", got)
	}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if n != late {
			f.behind[n] = false
		}
	}
	f.ackAt = placed.Add(34 * time.Second)
	f.c.step(placed.Add(35 * time.Second))
	got = f.status("shop")
	if got.CandidateSince == nil || !got.CandidateSince.Time.Equal(f.ackAt) || !strings.Contains(got.Message, "canaries running the candidate since") {
		t.Errorf("stage 2 waits for the canary left out at stage 1: %+v", got)
	}
}
