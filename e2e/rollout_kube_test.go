package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// rolloutKubePolicy is rolloutPolicy in a namespace, as kubectl applies it.
var rolloutKubePolicy = strings.Replace(rolloutPolicy, "metadata: {name: ro}", "metadata: {name: ro, namespace: default}", 1)

// kubeRollout reads status.rollout and the conditions of policy ro with kubectl.
func kubeRollout(t *testing.T, kubeconfig string) v1alpha1.LoadBalancerPolicyStatus {
	t.Helper()
	out, err := kubectl(t, kubeconfig, "", "get", "lbp", "ro", "-n", "default", "-o", "jsonpath={.status}")
	if err != nil {
		t.Fatalf("kubectl get lbp ro: %v\n%s", err, out)
	}
	var st v1alpha1.LoadBalancerPolicyStatus
	if out != "" {
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status %q: %v", out, err)
		}
	}
	return st
}

// waitKubePhase waits until status.rollout (as the API server holds it) is in phase for generation gen,
// and fails at once when it ends in another.
func waitKubePhase(t *testing.T, kubeconfig string, gen int64, phase string, timeout time.Duration) v1alpha1.LoadBalancerPolicyStatus {
	t.Helper()
	var st v1alpha1.LoadBalancerPolicyStatus
	eventually(t, timeout, "status.rollout is "+phase, func() error {
		st = kubeRollout(t, kubeconfig)
		r := st.Rollout
		if r == nil || r.CandidateGeneration != gen {
			return fmt.Errorf("status.rollout %+v, want generation %d", r, gen)
		}
		switch {
		case r.Phase == phase:
			return nil
		case r.Phase != v1alpha1.RolloutProgressing && r.Phase != v1alpha1.RolloutPaused:
			t.Fatalf("the rollout ended %s, not %s: %s", r.Phase, phase, r.Message)
		}
		return fmt.Errorf("%s at stage %d: %s", r.Phase, r.Stage, r.Message)
	})
	return st
}

// TestStagedRolloutKubernetes: two lbplane replicas on a real kube-apiserver and etcd, three real Envoys
// under a steady client. A bad change applied with spec.rollout reaches only the first stage's Envoys (two
// of three, drawn at random) and is rolled back (RolledBack in status, through the status subresource); a
// good change passes every stage with the elected replica killed during its first stage (the other takes
// over and finishes it); lbctl rollout works in Kubernetes mode; the abort annotation of a policy in
// another namespace aborts that policy alone.
func TestStagedRolloutKubernetes(t *testing.T) {
	cluster := kubetest.Start(t)
	kc := cluster.Kubeconfig
	args := []string{"--kubernetes", "--kubeconfig", kc, "--leader-election-namespace", "default", "--address-backends-namespaces", "default,team-a",
		"--proxy-stats-interval", "250ms", "--rollout-canary-min-age", canaryMinAge.String()}
	replicas := []*Lbplane{startLbplane(t, args...), startLbplane(t, args...)}
	stable := startBackend(t, "stable", 0)
	broken := startBackend(t, "broken", 0)
	broken.FailWith(500)
	fresh := startBackend(t, "fresh", 0)
	port := reservePort(t)
	apply := func(extra string, extraPort, weight int, bake string) {
		t.Helper()
		kubeApply(t, kc, rolloutKubePolicy, map[string]any{"Port": port, "Stable": stable.Port, "Bake": bake, "Min": 20,
			"Extra": extra, "ExtraPort": extraPort, "Weight": weight})
	}
	// The first generation: nothing to compare it with, so every Envoy gets it (a new policy with
	// spec.rollout would be staged; it starts with the stages of a rollout that has no baseline).
	kubeApply(t, kc, strings.Replace(rolloutKubePolicy, "metadata: {name: ro, namespace: default}",
		"metadata: {name: ro, namespace: default, annotations: {lbplane.io/rollout-mode: \"1\"}}", 1),
		map[string]any{"Port": port, "Stable": stable.Port, "Bake": "3s", "Min": 20})
	// envoy-a on replica 1, the others on replica 0.
	envoys := []*Envoy{startEnvoy(t, replicas[1], "envoy-a", true), startEnvoy(t, replicas[0], "envoy-b", true), startEnvoy(t, replicas[0], "envoy-c", true)}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServing(t, url, "stable")
	load := startLoadWith(newClient(false), url, 150, 6, 4*time.Minute)
	defer load.Stop()
	load.WaitServed(t, 100)
	waitEveryEnvoyServes(t, envoys)
	leader := electedReplica(t, replicas)

	t.Run("a bad change reaches the first stage's two Envoys and is rolled back", func(t *testing.T) {
		okBefore, failedBefore := load.OK.Load(), load.Failed.Load()
		apply("broken", broken.Port, 3, "3s")
		eventually(t, 10*time.Second, "only the canaries have the broken backend", func() error {
			got := holders(t, envoys, "broken")
			if len(got) > 2 {
				// What the replicas decided, for the reader of a failure.
				var said []string
				for i, r := range replicas {
					b, _ := os.ReadFile(r.log)
					for _, l := range strings.Split(string(b), "\n") {
						if strings.Contains(l, "msg=\"rollout") || strings.Contains(l, "is held") {
							said = append(said, fmt.Sprintf("replica %d: %s", i, l))
						}
					}
				}
				t.Fatalf("the broken backend reached %v; status.rollout %+v; the replicas said:\n%s", got, kubeRollout(t, kc).Rollout, strings.Join(said, "\n"))
			}
			st := kubeRollout(t, kc)
			if st.Rollout != nil && st.Rollout.CandidateGeneration == 2 && st.Rollout.Phase == v1alpha1.RolloutRolledBack {
				return nil
			}
			if st.Rollout == nil || len(st.Rollout.Canaries) != 2 || !slices.Equal(got, st.Rollout.Canaries) {
				return fmt.Errorf("held by %v, status %+v", got, st.Rollout)
			}
			return nil
		})
		st := waitKubePhase(t, kc, 2, v1alpha1.RolloutRolledBack, 60*time.Second)
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRolledBack)
		if st.Rollout.Stage != 1 || st.Rollout.Canary == nil || st.Rollout.Canary.ErrorRate < 0.3 || c == nil || c.Status != "True" || !strings.Contains(c.Message, "error rate") {
			t.Errorf("rolled back with %+v canary %+v, condition %+v", st.Rollout, st.Rollout.Canary, c)
		}
		waitHeldBy(t, envoys, "broken", nil)
		ok, failed := load.OK.Load()-okBefore, load.Failed.Load()-failedBefore
		t.Logf("during the bad rollout: %d of %d requests failed", failed, ok+failed)
		// Two Envoys of three took it: below the stage's share of the Envoys (about two thirds of the 75 %
		// without stages while it lasts, as the kernel spreads the connections).
		if failed == 0 || 3*failed >= 2*(ok+failed) {
			t.Errorf("%d of %d requests failed during the bad rollout: want some (the canaries'), and fewer than the stage's two thirds", failed, ok+failed)
		}
		if code, out := lbctlKubeExit(t, kc, "rollout", "status", "ro"); code != 1 || !strings.Contains(out, "RolledBack") {
			t.Errorf("lbctl rollout status in Kubernetes mode after a rollback: exit %d, %s", code, out)
		}
	})

	t.Run("the elected replica killed mid-rollout: the other finishes it", func(t *testing.T) {
		apply("fresh", fresh.Port, 1, "8s")
		st := waitKubeCanaries(t, kc, 3, 2)
		started := st.Rollout.StageStarted
		eventually(t, 10*time.Second, "only the canaries have the fresh backend", func() error {
			if got := holders(t, envoys, "fresh"); !slices.Equal(got, st.Rollout.Canaries) {
				return fmt.Errorf("held by %v, canaries %v", got, st.Rollout.Canaries)
			}
			return nil
		})
		if code, out := lbctlKubeExit(t, kc, "rollout", "status", "ro", "--watch=false"); code != 0 || !strings.Contains(out, "Progressing, stage 1 of 2") {
			t.Errorf("lbctl rollout status --watch=false in Kubernetes mode: exit %d, %s", code, out)
		}
		failedBefore := load.Failed.Load()
		replicas[leader].Kill()
		other := 1 - leader
		waitWritesStatus(t, replicas[other])
		st = waitKubePhase(t, kc, 3, v1alpha1.RolloutSucceeded, 90*time.Second)
		t.Logf("after the takeover: %s", st.Rollout.Message)
		if started == nil {
			t.Errorf("no stage start in status")
		}
		// The Envoys of the killed replica are gone with it (startEnvoy names one replica); the other's
		// Envoy runs the candidate.
		live := envoysOfReplica(envoys, other)
		eventually(t, 10*time.Second, "the surviving replica's Envoys have the fresh backend", func() error {
			if got := holders(t, live, "fresh"); len(got) != len(live) {
				return fmt.Errorf("held by %v of %d", got, len(live))
			}
			return nil
		})
		if n := load.Failed.Load() - failedBefore; n > 0 {
			t.Logf("%d requests failed across the takeover (Envoys whose replica died keep their config)", n)
		}
		if code, out := lbctlKubeExit(t, kc, "rollout", "status", "ro", "--timeout", "10s"); code != 0 || !strings.Contains(out, "Succeeded") {
			t.Errorf("lbctl rollout status after the takeover: exit %d, %s", code, out)
		}
		envoys = live
	})

	t.Run("lbctl rollout pause, resume, abort and undo in Kubernetes mode", func(t *testing.T) {
		// Held at its first stage by a long bake.
		apply("broken", broken.Port, 3, "10m")
		waitKubePhase(t, kc, 4, v1alpha1.RolloutProgressing, 20*time.Second)
		steer := func(action string) {
			t.Helper()
			if code, out := lbctlKubeExit(t, kc, "rollout", action, "ro"); code != 0 || !strings.Contains(out, "default/ro") {
				t.Fatalf("lbctl rollout %s: exit %d, %s", action, code, out)
			}
		}
		steer("pause")
		waitKubePhase(t, kc, 4, v1alpha1.RolloutPaused, 20*time.Second)
		steer("resume")
		waitKubePhase(t, kc, 4, v1alpha1.RolloutProgressing, 20*time.Second)
		steer("abort")
		st := waitKubePhase(t, kc, 4, v1alpha1.RolloutAborted, 20*time.Second)
		if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionRolledBack) {
			t.Errorf("conditions after the abort: %+v", st.Conditions)
		}
		eventually(t, 10*time.Second, "every Envoy runs the baseline", func() error {
			if got := holders(t, envoys, "broken"); len(got) != 0 {
				return fmt.Errorf("broken held by %v", got)
			}
			if got := holders(t, envoys, "fresh"); len(got) != len(envoys) {
				return fmt.Errorf("fresh held by %v", got)
			}
			return nil
		})
		if code, out := lbctlKubeExit(t, kc, "rollout", "status", "ro"); code != 1 || !strings.Contains(out, "Aborted") {
			t.Errorf("lbctl rollout status of an aborted rollout: exit %d, %s", code, out)
		}
		// Undo: the baseline (generation 3, with fresh) is the spec again, as generation 5, at once.
		steer("undo")
		eventually(t, 20*time.Second, "generation 5 is generation 3's spec, with no rollout", func() error {
			out, err := kubectl(t, kc, "", "get", "lbp", "ro", "-n", "default", "-o", "jsonpath={.metadata.generation} {.spec.backends[*].name}")
			if err != nil {
				return err
			}
			if out != "5 stable fresh" {
				return fmt.Errorf("generation and backends: %q", out)
			}
			st := kubeRollout(t, kc)
			if st.Rollout != nil || st.ObservedGeneration != 5 || meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRolledBack) != nil ||
				!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionProgrammed) {
				return fmt.Errorf("status after the undo: %+v", st)
			}
			return nil
		})
		if got := holders(t, envoys, "fresh"); len(got) != len(envoys) {
			t.Errorf("after the undo fresh is held by %v", got)
		}
		// Settled, as kubectl rollout status answers a settled Deployment.
		if code, out := lbctlKubeExit(t, kc, "rollout", "status", "ro"); code != 0 || !strings.Contains(out, "settled") {
			t.Errorf("lbctl rollout status after the undo: exit %d, %s", code, out)
		}
	})

	t.Run("an abort annotation on another namespace's policy aborts that policy alone", func(t *testing.T) {
		// Tenant team-a's policy ta beside default/ro, both in a rollout held by a long bake.
		if out, err := kubectl(t, kc, "", "create", "namespace", "team-a"); err != nil {
			t.Fatalf("kubectl create namespace: %v\n%s", err, out)
		}
		ta := strings.Replace(rolloutKubePolicy, "metadata: {name: ro, namespace: default}", "metadata: {name: ta, namespace: team-a}", 1)
		taPort := reservePort(t)
		kubeApply(t, kc, strings.Replace(ta, "metadata: {name: ta, namespace: team-a}",
			"metadata: {name: ta, namespace: team-a, annotations: {lbplane.io/rollout-mode: \"1\"}}", 1),
			map[string]any{"Port": taPort, "Stable": stable.Port, "Bake": "10m", "Min": 20})
		kubeApply(t, kc, ta, map[string]any{"Port": taPort, "Stable": stable.Port, "Bake": "10m", "Min": 20, "Extra": "fresh", "ExtraPort": fresh.Port, "Weight": 1})
		apply("fresh", fresh.Port, 2, "10m")
		roStatus := waitKubePhase(t, kc, 6, v1alpha1.RolloutProgressing, 20*time.Second)
		eventually(t, 20*time.Second, "ta's rollout is under way", func() error {
			out, err := kubectl(t, kc, "", "get", "lbp", "ta", "-n", "team-a", "-o", "jsonpath={.status.rollout.phase}")
			if err != nil || out != v1alpha1.RolloutProgressing {
				return fmt.Errorf("ta's phase %q (%v)", out, err)
			}
			return nil
		})
		// The tenant annotates its own policy, as kubectl lets it.
		if out, err := kubectl(t, kc, "", "annotate", "lbp", "ta", "-n", "team-a", "lbplane.io/rollout-abort=2"); err != nil {
			t.Fatalf("kubectl annotate: %v\n%s", err, out)
		}
		eventually(t, 20*time.Second, "ta is aborted", func() error {
			out, err := kubectl(t, kc, "", "get", "lbp", "ta", "-n", "team-a", "-o", "jsonpath={.status.rollout.phase}")
			if err != nil || out != v1alpha1.RolloutAborted {
				return fmt.Errorf("ta's phase %q (%v)", out, err)
			}
			return nil
		})
		// default/ro goes on as it was, and its canaries keep its candidate.
		st := kubeRollout(t, kc)
		if st.Rollout == nil || st.Rollout.Phase != v1alpha1.RolloutProgressing || st.Rollout.CandidateGeneration != 6 ||
			!st.Rollout.StageStarted.Equal(roStatus.Rollout.StageStarted) || meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionRolledBack) {
			t.Errorf("default/ro after team-a/ta's abort: %+v, conditions %+v", st.Rollout, st.Conditions)
		}
		if code, out := lbctlKubeExit(t, kc, "rollout", "abort", "ro"); code != 0 {
			t.Fatalf("abort: exit %d, %s", code, out)
		}
		waitKubePhase(t, kc, 6, v1alpha1.RolloutAborted, 60*time.Second)
	})

	t.Run("a replica restarted mid-rollout splits its Envoys again and resumes", func(t *testing.T) {
		other := 1 - leader
		// One more Envoy, so that the group is split: a canary and at least one on the baseline.
		envoys = append(envoys, startEnvoy(t, replicas[other], "envoy-z", true))
		waitSynced(t, replicas[other], len(envoys))
		eventually(t, 20*time.Second, "every Envoy has generation 5", func() error {
			if got := holders(t, envoys, "fresh"); len(got) != len(envoys) {
				return fmt.Errorf("fresh held by %v", got)
			}
			return nil
		})
		apply("broken", broken.Port, 3, "10m")
		// Two Envoys (the killed replica's went with it): one canary.
		st := waitKubeCanaries(t, kc, 7, 1)
		canaries, started := st.Rollout.Canaries, st.Rollout.StageStarted
		eventually(t, 10*time.Second, "the canaries have the broken backend", func() error {
			if got := holders(t, envoys, "broken"); !slices.Equal(got, canaries) {
				return fmt.Errorf("held by %v, canaries %v", got, canaries)
			}
			return nil
		})
		replicas[other].Kill()
		replicas[other].Restart(t)
		if len(canaries) != 1 {
			t.Fatalf("canaries %v of %d Envoys", canaries, len(envoys))
		}
		// The restarted replica read the rollout before it served xDS: its own answer says so.
		r := rolloutOf(t, replicas[other])
		if r.Generation != 7 || r.Rollout.Phase != v1alpha1.RolloutProgressing || !slices.Equal(r.Rollout.Canaries, canaries) ||
			r.Rollout.StageStarted == nil || !r.Rollout.StageStarted.Equal(started) {
			t.Errorf("after the restart: %+v; before: canaries %v, stage started %v", r.Rollout, canaries, started)
		}
		waitSynced(t, replicas[other], len(envoys))
		if got := holders(t, envoys, "broken"); !slices.Equal(got, canaries) {
			t.Errorf("after the restart broken is held by %v, canaries %v", got, canaries)
		}
		if code, out := lbctlKubeExit(t, kc, "rollout", "abort", "ro"); code != 0 {
			t.Fatalf("abort: exit %d, %s", code, out)
		}
		waitKubePhase(t, kc, 7, v1alpha1.RolloutAborted, 60*time.Second)
		waitHeldBy(t, envoys, "broken", nil)
	})
}

// waitKubeCanaries waits until generation gen's rollout is progressing with n canaries (the elected
// replica chose them).
func waitKubeCanaries(t *testing.T, kubeconfig string, gen int64, n int) v1alpha1.LoadBalancerPolicyStatus {
	t.Helper()
	var st v1alpha1.LoadBalancerPolicyStatus
	eventually(t, 20*time.Second, "the elected replica chose the canaries", func() error {
		st = waitKubePhase(t, kubeconfig, gen, v1alpha1.RolloutProgressing, 20*time.Second)
		if len(st.Rollout.Canaries) != n {
			return fmt.Errorf("canaries %v", st.Rollout.Canaries)
		}
		return nil
	})
	return st
}

// lbctlKubeExit runs lbctl in Kubernetes mode (the kubeconfig, and lbplane's namespace) and returns its exit
// code and output.
func lbctlKubeExit(t *testing.T, kubeconfig string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "lbctl"), append([]string{"--kubeconfig", kubeconfig, "--lbplane-namespace", "default"}, args...)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("lbctl %v: %v", args, err)
	return 0, ""
}

// writesStatus is what the elected replica logs when it starts writing status.
const writesStatus = "this replica writes policy status"

// electedReplica waits until one of replicas says it writes status (it was elected), and returns it.
func electedReplica(t *testing.T, replicas []*Lbplane) int {
	t.Helper()
	leader := -1
	eventually(t, 30*time.Second, "a replica writes status", func() error {
		for i, r := range replicas {
			if b, _ := os.ReadFile(r.log); strings.Contains(string(b), writesStatus) {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	t.Logf("replica %d leads", leader)
	return leader
}

// waitWritesStatus waits until replica r says it writes status: it took over from the one killed.
func waitWritesStatus(t *testing.T, r *Lbplane) {
	t.Helper()
	eventually(t, 60*time.Second, "the other replica writes status", func() error {
		if b, _ := os.ReadFile(r.log); !strings.Contains(string(b), writesStatus) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// envoysOfReplica are the Envoys of the two-replica rollout tests connected to replica i: envoy-a to
// replica 1, the others to replica 0.
func envoysOfReplica(envoys []*Envoy, i int) []*Envoy {
	var out []*Envoy
	for _, e := range envoys {
		if (e.NodeID == "envoy-a") == (i == 1) {
			out = append(out, e)
		}
	}
	return out
}
