package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/rollout"
)

// signal sends sig to Envoy e's process.
func signal(t *testing.T, e *Envoy, sig syscall.Signal) {
	t.Helper()
	if err := e.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s to %s: %v", sig, e.NodeID, err)
	}
}

// A stage's bake counts from when its canaries acknowledged the candidate, with real Envoys: canaries that
// are stopped (they neither ACK nor NACK) keep the stage from being judged past its bake, and roll the
// change back once the bound has passed, the message naming each; canaries that take a change late start
// its bake when they do.
func TestStagedRolloutWaitsForTheCanariesAcknowledgement(t *testing.T) {
	stable := startBackend(t, "stable", 0)
	fresh := startBackend(t, "fresh", 0)
	l := startLbplane(t, "--proxy-stats-interval", "250ms", "--rollout-canary-min-age", canaryMinAge.String())
	var envoys []*Envoy
	for _, n := range []string{"envoy-a", "envoy-b", "envoy-c"} {
		envoys = append(envoys, startEnvoy(t, l, n, true))
	}
	port := reservePort(t)
	doc := func(extra string, extraPort, weight int) []byte {
		return policy(t, rolloutPolicy, map[string]any{"Port": port, "Stable": stable.Port, "Bake": "3s", "Min": 20, "Extra": extra,
			"ExtraPort": extraPort, "Weight": weight})
	}
	// The first generation reaches every Envoy at once: there is nothing to compare it with.
	if _, err := l.Client.ApplyRollout(context.Background(), doc("", 0, 0), false, "immediate"); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, l, 3)
	waitSettledFor(t, l, 3)

	// Every Envoy is stopped before the push, so that none takes the change before the test knows the
	// canaries; the others are let go at once. Whatever happens, none is left stopped.
	stopped := map[string]bool{}
	defer func() {
		for _, e := range envoys {
			if stopped[e.NodeID] {
				_ = e.cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	}()
	stopAllAndPush := func(generation int64, weight int) (canaries []*Envoy, placed time.Time) {
		t.Helper()
		for _, e := range envoys {
			signal(t, e, syscall.SIGSTOP)
			stopped[e.NodeID] = true
		}
		push(t, l, doc("fresh", fresh.Port, weight))
		r := rolloutOf(t, l)
		if r.Rollout.Phase != v1alpha1.RolloutProgressing || r.Rollout.CandidateGeneration != generation || len(r.Rollout.Canaries) != 2 ||
			r.Rollout.StageStarted == nil {
			t.Fatalf("after the push: %+v", r.Rollout)
		}
		for _, e := range envoys {
			if slices.Contains(r.Rollout.Canaries, e.NodeID) {
				canaries = append(canaries, e)
				continue
			}
			signal(t, e, syscall.SIGCONT)
			stopped[e.NodeID] = false
		}
		return canaries, r.Rollout.StageStarted.Time
	}

	// pastBake waits until the 3 s bake has passed since placed, with a margin.
	pastBake := func(t *testing.T, placed time.Time) {
		t.Helper()
		eventually(t, 20*time.Second, "a bake past placement", func() error {
			if time.Since(placed) < 5*time.Second {
				return fmt.Errorf("placed %s ago", time.Since(placed).Round(time.Millisecond))
			}
			return nil
		})
	}

	t.Run("canaries that never acknowledge roll the change back, named", func(t *testing.T) {
		canaries, placed := stopAllAndPush(2, 1)
		// Past the 3 s bake from placement nothing is judged: the canaries run the baseline.
		pastBake(t, placed)
		r := rolloutOf(t, l)
		if r.Rollout.Phase != v1alpha1.RolloutProgressing || r.Rollout.Canary != nil || r.Rollout.CandidateSince != nil ||
			!strings.Contains(r.Rollout.Message, "waiting for 2 of 2 canaries to take the candidate") {
			t.Fatalf("a bake after placement, with the canaries stopped: %+v", r.Rollout)
		}
		r = waitPhase(t, l, v1alpha1.RolloutRolledBack, rollout.MinTakeBound+30*time.Second)
		if took := r.Rollout.StageStarted.Sub(placed); took != 0 {
			t.Errorf("the stage's start moved by %s", took)
		}
		t.Logf("rolled back %s after placement: %s", time.Since(placed).Round(time.Millisecond), r.Rollout.Message)
		if !strings.Contains(r.Rollout.Message, "2 of 2 canaries did not take the candidate") {
			t.Errorf("the rollback's message: %s", r.Rollout.Message)
		}
		for _, e := range canaries {
			// "has not answered" once its response is older than the tracker's AckTimeout.
			if !strings.Contains(r.Rollout.Message, "canary "+e.NodeID+" has not answered") && !strings.Contains(r.Rollout.Message, "canary "+e.NodeID+" has not acknowledged") {
				t.Errorf("the rollback's message does not say canary %s has not answered: %s", e.NodeID, r.Rollout.Message)
			}
			signal(t, e, syscall.SIGCONT)
			stopped[e.NodeID] = false
		}
		waitSynced(t, l, 3)
		if got := holders(t, envoys, "fresh"); len(got) != 0 {
			t.Errorf("after the rollback %v hold the candidate's backend", got)
		}
	})

	t.Run("canaries that take the change late start the bake when they do", func(t *testing.T) {
		canaries, placed := stopAllAndPush(3, 2)
		pastBake(t, placed)
		resumed := time.Now()
		for _, e := range canaries {
			signal(t, e, syscall.SIGCONT)
			stopped[e.NodeID] = false
		}
		eventually(t, 20*time.Second, "the canaries run the candidate", func() error {
			r := rolloutOf(t, l)
			if r.Rollout.Phase != v1alpha1.RolloutProgressing {
				t.Fatalf("the rollout ended: %+v", r.Rollout)
			}
			if r.Rollout.CandidateSince == nil {
				return fmt.Errorf("not yet: %s", r.Rollout.Message)
			}
			if r.Rollout.CandidateSince.Time.Before(resumed.Truncate(time.Second)) { // status times are to the second
				t.Errorf("the bake counts from %s, before the canaries were let go at %s", r.Rollout.CandidateSince, resumed)
			}
			if !strings.Contains(r.Rollout.Message, "canaries running the candidate since") {
				t.Errorf("the message does not say since when the canaries run the candidate: %s", r.Rollout.Message)
			}
			return nil
		})
		var names []string
		for _, e := range canaries {
			names = append(names, e.NodeID)
		}
		slices.Sort(names)
		if got := holders(t, envoys, "fresh"); !slices.Equal(got, names) {
			t.Errorf("the candidate's backend is held by %v, the canaries are %v", got, names)
		}
	})
}
