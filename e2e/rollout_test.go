package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/serve"
)

// rolloutPolicy is one policy served by three Envoys: stable always, and Extra (a second backend) when set,
// with route weights. The rollout judges after a short bake on real stats: at least 20 canary requests.
// These tests judge error rates; on a shared machine loopback p99 swings from 5 to 70 ms between windows, so
// the p99 bound is set wide here (Judge's unit test covers it).
const rolloutPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: ro}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  rollout:
    stages: [{envoys: 1}, {percent: 100}]
    bakeTime: {{.Bake}}
    analysis: {minRequests: {{.Min}}, maxP99Ratio: 50}
  routes:
    - name: all
      backends:
        - {name: stable, weight: 1}
{{- if .Extra}}
        - {name: {{.Extra}}, weight: {{.Weight}}}
{{- end}}
  backends:
    - name: stable
      endpoints: [{address: 127.0.0.1, port: {{.Stable}}}]
{{- if .Extra}}
    - name: {{.Extra}}
      endpoints: [{address: 127.0.0.1, port: {{.ExtraPort}}}]
{{- end}}
`

// shiftPolicy moves route "all" to backend To in steps of 25, 50 and 100 %, judged after a short bake.
const shiftPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: ro}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  rollout:
    bakeTime: 3s
    analysis: {minRequests: 20, maxP99Ratio: 50}
    trafficShift: {backend: {{.To}}, steps: [25, 50, 100]}
  routes:
    - name: all
      backends: [{name: {{.To}}}]
  backends:
    - name: stable
      endpoints: [{address: 127.0.0.1, port: {{.Stable}}}]
    - name: {{.To}}
      endpoints: [{address: 127.0.0.1, port: {{.ToPort}}}]
`

// holders are the Envoys whose config holds a cluster of the backend named name.
func holders(t *testing.T, envoys []*Envoy, name string) []string {
	t.Helper()
	var out []string
	for _, e := range envoys {
		if strings.Contains(e.ConfigDump(t), "/ro/"+name) {
			out = append(out, e.NodeID)
		}
	}
	return out
}

func rolloutOf(t *testing.T, l *Lbplane) *apiwire.RolloutResult {
	t.Helper()
	return rolloutNamed(t, l, "ro")
}

// rolloutNamed reads the rollout of policy default/name.
func rolloutNamed(t *testing.T, l *Lbplane, name string) *apiwire.RolloutResult {
	t.Helper()
	r, err := l.Client.Rollout(context.Background(), "default", name)
	if err != nil {
		t.Fatalf("rollout status of %s: %v", name, err)
	}
	return r
}

// waitPhase waits until the rollout of policy ro is in phase, and fails at once if it ends in another.
func waitPhase(t *testing.T, l *Lbplane, phase string, timeout time.Duration) *apiwire.RolloutResult {
	t.Helper()
	return waitRollout(t, l, "ro", phase, timeout)
}

// canaryMinAge is the --rollout-canary-min-age the rollout tests run lbplane with.
const canaryMinAge = time.Second

// waitSettledFor waits until n Envoys are connected to l, each for longer than canaryMinAge: only those can
// be drawn as canaries.
func waitSettledFor(t *testing.T, l *Lbplane, n int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%d Envoys connected for %s", n, canaryMinAge), func() error {
		ps, err := l.Client.Proxies(context.Background())
		if err != nil {
			return err
		}
		settled := 0
		for _, p := range ps {
			if time.Since(p.ConnectedAt) > canaryMinAge+250*time.Millisecond {
				settled++
			}
		}
		if settled < n {
			return fmt.Errorf("%d of %d", settled, len(ps))
		}
		return nil
	})
}

// noFailuresOver waits for n more requests of load to succeed, and fails the test if any sent meanwhile
// failed (what says when, for the message). A request sent before, on the config that was replaced, and
// answered meanwhile is that config's.
func noFailuresOver(t *testing.T, load *Load, n int64, what string) {
	t.Helper()
	since := time.Now()
	load.WaitServed(t, load.OK.Load()+n)
	if f, errs := load.FailedSince(since); f > 0 {
		t.Errorf("%d %s: %v", f, what, errs)
	}
}

// lbctlExit runs lbctl and returns its exit code and output.
func lbctlExit(t *testing.T, l *Lbplane, args ...string) (int, string) {
	t.Helper()
	out, errOut, err := lbctl(t, l, "", args...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out
	case errors.As(err, &ee):
		return ee.ExitCode(), out + errOut
	}
	t.Fatalf("lbctl %v: %v", args, err)
	return 0, ""
}

func TestStagedRolloutUnderLoad(t *testing.T) {
	stable := startBackend(t, "stable", 0)
	broken := startBackend(t, "broken", 0)
	broken.FailWith(500)
	fresh := startBackend(t, "fresh", 0)
	l := startLbplane(t, "--proxy-stats-interval", "250ms", "--rollout-canary-min-age", canaryMinAge.String())
	var envoys []*Envoy
	for _, n := range []string{"envoy-a", "envoy-b", "envoy-c"} {
		envoys = append(envoys, startEnvoy(t, l, n, true))
	}
	// Two of the three Envoys at the first stage: a stage is never judged on one Envoy's numbers alone.
	stage := 2.0 / 3
	others := func(canaries []string) []string {
		var out []string
		for _, e := range envoys {
			if !slices.Contains(canaries, e.NodeID) {
				out = append(out, e.NodeID)
			}
		}
		return out
	}
	port := reservePort(t)
	data := map[string]any{"Port": port, "Stable": stable.Port, "Bake": "3s", "Min": 20}
	doc := func(extra string, extraPort, weight int, bake string, min int) []byte {
		d := map[string]any{}
		for k, v := range data {
			d[k] = v
		}
		d["Extra"], d["ExtraPort"], d["Weight"], d["Bake"], d["Min"] = extra, extraPort, weight, bake, min
		return policy(t, rolloutPolicy, d)
	}
	// The first generation reaches every Envoy at once: there is nothing to compare it with.
	if _, err := l.Client.ApplyRollout(context.Background(), doc("", 0, 0, "2s", 20), false, "immediate"); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitSynced(t, l, 3)
	waitServing(t, url, "stable")

	// A steady client: a new connection per request, so the kernel spreads the requests over the three
	// Envoys, which share the listener's port (SO_REUSEPORT). Bounded in rate and time.
	load := startLoadWith(newClient(false), url, 150, 6, 3*time.Minute)
	defer load.Stop()
	load.WaitServed(t, 100)
	// Every Envoy serves part of it (the analysis compares canaries with the others).
	waitEveryEnvoyServes(t, envoys)
	waitSettledFor(t, l, 3)

	// The same bad change without a rollout: every Envoy takes it, until a second push.
	withoutShare := 0.0
	t.Run("without a rollout a bad change fails everywhere", func(t *testing.T) {
		okBefore, failedBefore := load.OK.Load(), load.Failed.Load()
		if _, err := l.Client.ApplyRollout(context.Background(), doc("broken", broken.Port, 3, "3s", 20), false, "immediate"); err != nil {
			t.Fatal(err)
		}
		load.WaitServed(t, load.OK.Load()+100)
		if _, err := l.Client.ApplyRollout(context.Background(), doc("", 0, 0, "3s", 20), false, "immediate"); err != nil {
			t.Fatal(err)
		}
		ok, failed := load.OK.Load()-okBefore, load.Failed.Load()-failedBefore
		withoutShare = float64(failed) / float64(ok+failed)
		t.Logf("without a rollout: %d of %d requests failed (%.1f %%)", failed, ok+failed, 100*withoutShare)
		if withoutShare < 0.5 {
			t.Errorf("the bad change (3 of 4 requests to a backend answering 500) failed only %.1f %% of the requests", 100*withoutShare)
		}
		waitSynced(t, l, 3)
		if got := holders(t, envoys, "broken"); len(got) != 0 {
			t.Fatalf("the second push left the broken backend on %v", got)
		}
	})

	t.Run("a policy that never had a rollout is settled", func(t *testing.T) {
		if code, out := lbctlExit(t, l, "rollout", "status", "ro"); code != 0 || !strings.Contains(out, "settled") {
			t.Errorf("lbctl rollout status of a policy pushed at once: exit %d, %s", code, out)
		}
	})

	t.Run("a bad change reaches two Envoys of three and is rolled back", func(t *testing.T) {
		okBefore, failedBefore := load.OK.Load(), load.Failed.Load()
		pushed := time.Now()
		push(t, l, doc("broken", broken.Port, 3, "3s", 20))
		// Stage 1: two canaries, drawn at random, and only they have the broken backend.
		r := rolloutOf(t, l)
		if r.Rollout.Phase != v1alpha1.RolloutProgressing || r.Rollout.Stage != 1 || len(r.Rollout.Canaries) != 2 {
			t.Fatalf("right after the push: %+v", r.Rollout)
		}
		canaries := r.Rollout.Canaries
		eventually(t, 10*time.Second, "only the canaries have the broken backend", func() error {
			if got := holders(t, envoys, "broken"); !slices.Equal(got, canaries) {
				return fmt.Errorf("held by %v, canaries %v", got, canaries)
			}
			return nil
		})
		r = waitPhase(t, l, v1alpha1.RolloutRolledBack, 60*time.Second)
		// Within two analysis windows (the bake, and a stats reading), with a generous margin.
		if took := time.Since(pushed); took > 2*3*time.Second+10*time.Second {
			t.Errorf("rolled back %s after the push", took)
		}
		t.Logf("rolled back %s after the push", time.Since(pushed).Round(time.Millisecond))
		if r.Rollout.Stage != 1 || r.Rollout.Canary == nil || r.Rollout.Canary.ErrorRate < 0.3 || r.Rollout.Baseline == nil || r.Rollout.Baseline.ErrorRate > 0.05 {
			t.Errorf("rolled back with %+v canary %+v baseline %+v", r.Rollout, r.Rollout.Canary, r.Rollout.Baseline)
		}
		c := meta.FindStatusCondition(r.Conditions, v1alpha1.ConditionRolledBack)
		if c == nil || c.Status != "True" || !strings.Contains(c.Message, "error rate") || !strings.Contains(c.Message, "stage 1 of 2") {
			t.Errorf("RolledBack condition: %+v", c)
		}
		waitHeldBy(t, envoys, "broken", nil)
		// The status the API shows says the same.
		// lbctl status NAME -o json prints the policy, as lbctl get NAME -o json does.
		var pol v1alpha1.LoadBalancerPolicy
		if err := json.Unmarshal([]byte(lbctlOK(t, l, "status", "ro", "-o", "json")), &pol); err != nil {
			t.Fatal(err)
		}
		st := pol.Status
		if st.Rollout == nil || st.Rollout.Phase != v1alpha1.RolloutRolledBack || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionRolledBack) {
			t.Errorf("lbctl status: %+v", st)
		}
		if code, out := lbctlExit(t, l, "rollout", "status", "ro"); code != 1 || !strings.Contains(out, "RolledBack") {
			t.Errorf("lbctl rollout status after a rollback: exit %d, %s", code, out)
		}
		// Only the canaries' share failed: below what the change would have failed everywhere (75 %) times
		// the stage's share of the Envoys.
		ok, failed := load.OK.Load()-okBefore, load.Failed.Load()-failedBefore
		share := float64(failed) / float64(ok+failed)
		t.Logf("during the bad rollout: %d of %d requests failed (%.1f %%)", failed, ok+failed, 100*share)
		if failed == 0 || share > stage*withoutShare {
			t.Errorf("%d of %d requests failed during the bad rollout (%.1f %%); want some (the canaries'), and at most %.0f %% of the %.1f %% without a rollout",
				failed, ok+failed, 100*share, 100*stage, 100*withoutShare)
		}
		// After the rollback nothing fails any more.
		noFailuresOver(t, load, 200, "requests failed after the rollback")
	})

	t.Run("a good change passes every stage", func(t *testing.T) {
		push(t, l, doc("fresh", fresh.Port, 1, "3s", 20))
		seen := map[int32]bool{}
		eventually(t, 90*time.Second, "the rollout succeeded", func() error {
			// Read after the Envoys: a rollout still at stage 1 was at stage 1 while they were read.
			got := holders(t, envoys, "fresh")
			r := rolloutOf(t, l)
			switch r.Rollout.Phase {
			case v1alpha1.RolloutProgressing:
				seen[r.Rollout.Stage] = true
				if r.Rollout.Stage == 1 && len(got) > 2 {
					t.Errorf("stage 1: %v hold the candidate", got)
				}
			case v1alpha1.RolloutSucceeded:
				return nil
			default:
				t.Fatalf("the good change ended %s: %s", r.Rollout.Phase, r.Rollout.Message)
			}
			return fmt.Errorf("stage %d: %s", r.Rollout.Stage, r.Rollout.Message)
		})
		if !seen[1] || !seen[2] {
			t.Errorf("stages seen: %v", seen)
		}
		eventually(t, 10*time.Second, "every Envoy has the fresh backend", func() error {
			if got := holders(t, envoys, "fresh"); len(got) != 3 {
				return fmt.Errorf("held by %v", got)
			}
			return nil
		})
		if code, out := lbctlExit(t, l, "rollout", "status", "ro", "--watch", "--timeout", "10s"); code != 0 || !strings.Contains(out, "Succeeded") {
			t.Errorf("lbctl rollout status after success: exit %d, %s", code, out)
		}
		p, err := l.Client.Get(context.Background(), "default", "ro")
		if err != nil {
			t.Fatal(err)
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionProgrammed) || meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionRolledBack) {
			t.Errorf("conditions after success: %+v", p.Status.Conditions)
		}
	})

	t.Run("a canary that rejects the change rolls it back at once", func(t *testing.T) {
		// A port another socket holds passes every check lbplane makes; Envoy rejects the listener when it
		// fails to bind. The bake is long: only the NACK can end this rollout soon.
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		d := map[string]any{"Stable": stable.Port, "Bake": "10m", "Min": 20, "Port": taken.Addr().(*net.TCPAddr).Port}
		push(t, l, policy(t, rolloutPolicy, d))
		r := waitPhase(t, l, v1alpha1.RolloutRolledBack, 30*time.Second)
		if !strings.Contains(r.Rollout.Message, "rejected the config") || r.Rollout.Stage != 1 {
			t.Errorf("rolled back with %+v", r.Rollout)
		}
		// Every Envoy serves the baseline's port again.
		noFailuresOver(t, load, 200, "requests failed after the NACK's rollback")
	})
	t.Run("a traffic shift goes forward on a healthy backend", func(t *testing.T) {
		// From stable alone, pushed at once.
		if _, err := l.Client.ApplyRollout(context.Background(), doc("", 0, 0, "2s", 20), false, "immediate"); err != nil {
			t.Fatal(err)
		}
		push(t, l, policy(t, shiftPolicy, map[string]any{"Port": port, "Stable": stable.Port, "To": "fresh", "ToPort": fresh.Port}))
		steps := map[int32]bool{}
		firstShare := -1.0
		last := ""
		eventually(t, 90*time.Second, "the traffic shift succeeded", func() error {
			r := rolloutOf(t, l)
			ro := r.Rollout
			if line := fmt.Sprintf("%s %d: %s", ro.Phase, ro.Stage, ro.Message); line != last {
				t.Logf("%s %s", time.Now().Format("15:04:05.000"), line)
				last = line
			}
			if ro.TrafficBackend != "fresh" {
				t.Fatalf("not a traffic shift to fresh: %+v", ro)
			}
			switch ro.Phase {
			case v1alpha1.RolloutProgressing:
				if firstShare < 0 && ro.Stage == 2 && ro.Canary != nil && ro.Baseline != nil {
					// The first step's numbers, as judged: fresh had about a quarter of the requests.
					firstShare = float64(ro.Canary.Requests) / float64(ro.Canary.Requests+ro.Baseline.Requests)
					if firstShare < 0.1 || firstShare > 0.45 || ro.Canary.LatencyP99Ms == nil || *ro.Canary.LatencyP99Ms > 1000 {
						t.Errorf("at 25 %%, fresh served %.2f of the requests (%+v, %+v)", firstShare, ro.Canary, ro.Baseline)
					}
				}
				steps[ro.Stage] = true
			case v1alpha1.RolloutSucceeded:
				return nil
			default:
				t.Fatalf("the shift ended %s: %s", ro.Phase, ro.Message)
			}
			return fmt.Errorf("step %d: %s", ro.Stage, ro.Message)
		})
		if firstShare < 0 || !steps[2] || !steps[3] {
			t.Errorf("steps seen: %v; the first step's numbers seen: %v", steps, firstShare >= 0)
		}
		// Every request goes to fresh now.
		load.mu.Lock()
		before := load.Backends["stable"]
		load.mu.Unlock()
		load.WaitServed(t, load.OK.Load()+200)
		load.mu.Lock()
		after := load.Backends["stable"]
		load.mu.Unlock()
		if after-before > 5 { // requests on their way when the last step passed
			t.Errorf("%d requests went to stable after the shift to fresh succeeded", after-before)
		}
	})

	t.Run("a traffic shift to a failing backend shifts back", func(t *testing.T) {
		okBefore, failedBefore := load.OK.Load(), load.Failed.Load()
		push(t, l, policy(t, shiftPolicy, map[string]any{"Port": port, "Stable": stable.Port, "To": "broken", "ToPort": broken.Port}))
		r := waitPhase(t, l, v1alpha1.RolloutRolledBack, 60*time.Second)
		if r.Rollout.Stage != 1 || r.Rollout.TrafficPercent == nil || *r.Rollout.TrafficPercent != 0 || !strings.Contains(r.Rollout.Message, "broken error rate") {
			t.Errorf("shifted back with %+v", r.Rollout)
		}
		ok, failed := load.OK.Load()-okBefore, load.Failed.Load()-failedBefore
		share := float64(failed) / float64(ok+failed)
		t.Logf("during the failing shift: %d of %d requests failed (%.1f %%)", failed, ok+failed, 100*share)
		// Bounded by the first step's share (25 %), with room for the requests sent after it was judged.
		if failed == 0 || share > 0.35 {
			t.Errorf("%d of %d requests failed during the shift; want some, and at most about the first step's 25 %%", failed, ok+failed)
		}
		waitHeldBy(t, envoys, "broken", nil)
		noFailuresOver(t, load, 200, "requests failed after the shift back")
	})

	// Last: the restarted lbplane ends with this subtest (its process belongs to the subtest).
	t.Run("a restart in the middle resumes the rollout", func(t *testing.T) {
		// Back to stable alone, held at stage 1 by a canary minimum the load cannot reach soon.
		push(t, l, doc("", 0, 0, "1s", 1000000))
		// Canaries are drawn from Envoys settled on the baseline: the stage may start a moment after the push.
		var r *apiwire.RolloutResult
		eventually(t, 30*time.Second, "stage 1 chose its canaries", func() error {
			if r = rolloutOf(t, l); r.Rollout.Phase != v1alpha1.RolloutProgressing || r.Rollout.Stage != 1 || len(r.Rollout.Canaries) == 0 {
				return fmt.Errorf("rollout %+v", r.Rollout)
			}
			return nil
		})
		canary := r.Rollout.Canaries
		eventually(t, 10*time.Second, "only the canaries lost the fresh backend", func() error {
			if got := holders(t, envoys, "fresh"); !slices.Equal(got, others(canary)) {
				return fmt.Errorf("fresh held by %v, canaries %v", got, canary)
			}
			return nil
		})
		started := r.Rollout.StageStarted
		l.Kill()
		l.Restart(t)
		waitSynced(t, l, 3)
		r = rolloutOf(t, l)
		if r.Rollout.Phase != v1alpha1.RolloutProgressing || r.Rollout.Stage != 1 || strings.Join(r.Rollout.Canaries, ",") != strings.Join(canary, ",") {
			t.Fatalf("after the restart: %+v", r.Rollout)
		}
		// The bake goes on where it was: the stage's start is the stored one, not the restart.
		if started == nil || r.Rollout.StageStarted == nil || !r.Rollout.StageStarted.Equal(started) {
			t.Errorf("after the restart the stage started at %v, before it at %v", r.Rollout.StageStarted, started)
		}
		if got := holders(t, envoys, "fresh"); !slices.Equal(got, others(canary)) {
			t.Errorf("after the restart the fresh backend is on %v (canaries %v)", got, canary)
		}
		// lbctl rollout status: once, where it stands (exit 0); followed, it gives up at --timeout (exit 2).
		if code, out := lbctlExit(t, l, "rollout", "status", "ro", "--watch=false"); code != 0 || !strings.Contains(out, "Progressing, stage 1 of 2, canaries "+strings.Join(canary, ",")) {
			t.Errorf("lbctl rollout status --watch=false during the rollout: exit %d, %s", code, out)
		}
		if code, out := lbctlExit(t, l, "rollout", "status", "ro", "--timeout", "1s"); code != 2 || !strings.Contains(out, "timed out") {
			t.Errorf("lbctl rollout status --timeout 1s of a held rollout: exit %d, %s", code, out)
		}
		// The dashboard shows the same: the phase, the canary on the candidate, the others on the baseline.
		ctx := openDashboard(t, l, "default/ro")
		var shown struct {
			Phase string            `json:"phase"`
			Gens  map[string]string `json:"gens"`
		}
		eventually(t, 20*time.Second, "the dashboard shows the rollout", func() error {
			if err := chromedp.Run(ctx, chromedp.Evaluate(readRollout, &shown)); err != nil {
				return err
			}
			for _, e := range envoys {
				want := "baseline"
				if slices.Contains(canary, e.NodeID) {
					want = "candidate"
				}
				if !strings.Contains(shown.Gens[e.NodeID], want) {
					return fmt.Errorf("%s shows %q, want %s: %+v", e.NodeID, shown.Gens[e.NodeID], want, shown)
				}
			}
			if shown.Phase != v1alpha1.RolloutProgressing {
				return fmt.Errorf("phase %q", shown.Phase)
			}
			return nil
		})
		// Abort: every Envoy back on the baseline (the fresh backend).
		if code, out := lbctlExit(t, l, "rollout", "abort", "ro"); code != 0 {
			t.Fatalf("abort: exit %d: %s", code, out)
		}
		eventually(t, 10*time.Second, "every Envoy runs the baseline again", func() error {
			if got := holders(t, envoys, "fresh"); len(got) != 3 {
				return fmt.Errorf("fresh held by %v", got)
			}
			return nil
		})
		if code, _ := lbctlExit(t, l, "rollout", "status", "ro"); code != 1 {
			t.Errorf("lbctl rollout status of an aborted rollout: exit %d, want 1", code)
		}
		eventually(t, 20*time.Second, "the dashboard shows the abort", func() error {
			if err := chromedp.Run(ctx, chromedp.Evaluate(readRollout, &shown)); err != nil {
				return err
			}
			for _, e := range envoys {
				if !strings.Contains(shown.Gens[e.NodeID], "baseline") {
					return fmt.Errorf("%s shows %q: %+v", e.NodeID, shown.Gens[e.NodeID], shown)
				}
			}
			if shown.Phase != v1alpha1.RolloutAborted {
				return fmt.Errorf("phase %q", shown.Phase)
			}
			return nil
		})
		// Undo: the baseline is the spec again, and the policy is settled (kubectl exits 0 for a settled
		// Deployment).
		if code, out := lbctlExit(t, l, "rollout", "undo", "ro"); code != 0 {
			t.Fatalf("undo: exit %d: %s", code, out)
		}
		if code, out := lbctlExit(t, l, "rollout", "status", "ro"); code != 0 || !strings.Contains(out, "settled") {
			t.Errorf("lbctl rollout status after undo: exit %d, %s", code, out)
		}
	})
}

// readRollout reads the dashboard's rollout panel: the phase and each Envoy's generation, as the page shows them.
const readRollout = `({phase: document.querySelector('#rollout [data-phase]')?.textContent || "",
  gens: Object.fromEntries([...document.querySelectorAll('#rollout .rollout-envoys [data-node]')].map(s => [s.getAttribute('data-node'), s.textContent]))})`

// openDashboard logs in to the dashboard with the read-only token in a headless chromium and selects a policy.
func openDashboard(t *testing.T, l *Lbplane, policy string) context.Context {
	t.Helper()
	ctx := browser(t)
	roToken, err := os.ReadFile(filepath.Join(l.DataDir, serve.ReadOnlyTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, 30*time.Second, "logging in to the dashboard",
		chromedp.Navigate(l.APIURL+"/dashboard/#"+policy),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		chromedp.SendKeys(`#token`, strings.TrimSpace(string(roToken)), chromedp.ByID),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#policies li[data-policy="`+policy+`"]`, chromedp.ByQuery))
	// The list is drawn again on every server-sent event, so a node found by one command may be gone by the
	// next (chromedp: "Could not find node with given id"): the click is done in the page, in one step.
	sel, _ := json.Marshal(`#policies li[data-policy="` + policy + `"]`)
	eventually(t, 10*time.Second, "selecting "+policy+" in the dashboard", func() error {
		var clicked bool
		if err := chromedp.Run(ctx, chromedp.Evaluate(`(() => { const li = document.querySelector(`+string(sel)+`); if (!li) return false; li.click(); return true })()`, &clicked)); err != nil {
			return err
		}
		if !clicked {
			return fmt.Errorf("%s is not in the list", policy)
		}
		return nil
	})
	return ctx
}

// waitHeldBy waits until the Envoys whose config holds backend name's cluster (of policy ro, or any policy
// with that backend name) are want (nil: none).
func waitHeldBy(t *testing.T, envoys []*Envoy, name string, want []string) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%s is held by %v", name, want), func() error {
		if got := holders(t, envoys, name); !slices.Equal(got, want) {
			return fmt.Errorf("held by %v", got)
		}
		return nil
	})
}

// waitEveryEnvoyServes waits until each of envoys has sent requests to the rollout policy's stable backend:
// the analysis compares the canaries with the others, so each needs a share of the load.
func waitEveryEnvoyServes(t *testing.T, envoys []*Envoy) {
	t.Helper()
	waitEveryEnvoyServesPolicy(t, envoys, "ro")
}

// waitEveryEnvoyServesPolicy waits until each of envoys has sent requests to policy name's stable backend.
func waitEveryEnvoyServesPolicy(t *testing.T, envoys []*Envoy, name string) {
	t.Helper()
	waitEveryEnvoyServesCluster(t, envoys, "cluster.default/"+name+"/stable")
}

// waitEveryEnvoyServesCluster waits until each of envoys has sent requests to the clusters whose stats
// start with prefix.
func waitEveryEnvoyServesCluster(t *testing.T, envoys []*Envoy, prefix string) {
	t.Helper()
	eventually(t, 30*time.Second, "every Envoy serves "+prefix, func() error {
		for _, e := range envoys {
			if n := envoyStatSum(t, e, prefix, ".upstream_rq_total"); n < 10 {
				return fmt.Errorf("%s served %d", e.NodeID, n)
			}
		}
		return nil
	})
}
