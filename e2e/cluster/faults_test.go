//go:build cluster

package cluster

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// faultRate is the k6 load each fault runs under: LBPLANE_CLUSTER_FAULT_RATE requests per second (default
// 50), through the Envoy Service.
func faultRate(t *testing.T) int {
	rate := 50
	if v := os.Getenv("LBPLANE_CLUSTER_FAULT_RATE"); v != "" {
		if _, err := fmt.Sscan(v, &rate); err != nil || rate <= 0 {
			t.Fatalf("LBPLANE_CLUSTER_FAULT_RATE=%q: want a positive number of requests per second", v)
		}
	}
	return rate
}

// faultResult is what one fault did to the traffic, for the summary at the end.
type faultResult struct {
	what     string
	took     time.Duration
	r        k6Result
	expected string // why failures are expected, or "" when the target is none
}

// underLoad runs fault 10 s after k6 started sending load through the Envoy Service for duration, checks
// that the fault was over at least 5 s before the load ended (so the load covers its whole effect), and
// returns k6's summary.
func (c *cluster) underLoad(t *testing.T, what string, duration time.Duration, fault func()) (k6Result, time.Duration) {
	t.Helper()
	c.k6Script(t)
	job := c.startK6(t, fmt.Sprintf("http://%s-envoy.%s.svc.cluster.local/", release, namespace), faultRate(t), duration.String())
	var running time.Time
	eventually(t, 2*time.Minute, "the k6 pod runs", func() error {
		out, err := c.run("", "-n", "default", "get", "pods", "-l", "job-name="+job.name, "-o", "jsonpath={.items[*].status.phase}")
		if err != nil || out != "Running" {
			return fmt.Errorf("phase %q %v", out, err)
		}
		running = time.Now()
		return nil
	})
	time.Sleep(10 * time.Second) // load before the fault; k6's own duration bounds the run
	start := time.Now()
	fault()
	took := time.Since(start)
	t.Logf("%s: done in %.1fs", what, took.Seconds())
	if left := time.Until(running.Add(duration)); left < 5*time.Second {
		t.Errorf("%s took %.0fs: the %s of load ended %.0fs before it was over, or too soon after; the load does not cover it",
			what, took.Seconds(), duration, -left.Seconds())
	}
	r := job.wait(t)
	t.Logf("%s under k6 load: %.0f requests, %.0f failed %s, %.0f dropped; p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		what, r.Requests, r.Failed, errorsText(r.Errors), r.Dropped, r.P50, r.P99, r.Max)
	if r.Requests == 0 {
		t.Fatalf("%s: k6 sent no requests", what)
	}
	return r, took
}

func errorsText(errs map[string]int) string {
	if len(errs) == 0 {
		return ""
	}
	var parts []string
	for e, n := range errs {
		parts = append(parts, fmt.Sprintf("%d× %s", n, e))
	}
	sort.Strings(parts)
	return "(" + strings.Join(parts, "; ") + ")"
}

// podNames are the names of the pods in ns that sel selects.
func (c *cluster) podNames(t *testing.T, ns, sel string) []string {
	t.Helper()
	return strings.Fields(c.must(t, "", "-n", ns, "get", "pods", "-l", sel, "-o", "jsonpath={.items[*].metadata.name}"))
}

const (
	envoySelector   = "app.kubernetes.io/component=envoy"
	lbplaneSelector = "app.kubernetes.io/component=control-plane"
)

// faults runs each fault under k6 load through the Envoy Service and reports the failed requests: none is
// the target for every fault but the Envoy restart, whose loss is measured and explained.
func (c *cluster) faults(t *testing.T) {
	var results []faultResult
	defer func() {
		var b strings.Builder
		for _, f := range results {
			fmt.Fprintf(&b, "  %-44s %5.1fs  %4.0f requests  %3.0f failed %s\n", f.what, f.took.Seconds(), f.r.Requests, f.r.Failed, errorsText(f.r.Errors))
		}
		t.Logf("faults under %d requests/s through the Envoy Service:\n%s", faultRate(t), b.String())
	}()
	record := func(t *testing.T, what string, r k6Result, took time.Duration, expected string) {
		results = append(results, faultResult{what: what, took: took, r: r, expected: expected})
		if expected == "" && r.Failed > 0 {
			t.Errorf("%s: %.0f of %.0f requests failed %s; want none", what, r.Failed, r.Requests, errorsText(r.Errors))
		}
	}

	t.Run("backend-pod-deleted", func(t *testing.T) {
		what := "a backend pod deleted"
		r, took := c.underLoad(t, what, 30*time.Second, func() {
			pod := c.podNames(t, "default", "app=demo-backend")[0]
			c.must(t, "", "-n", "default", "delete", "pod", pod, "--wait=true", "--timeout=60s")
		})
		record(t, what, r, took, "")
		c.must(t, "", "-n", "default", "wait", "--for=condition=Available", "deployment/demo-backend", "--timeout=120s")
		c.demoHealthy(t) // the replacement probed healthy, the deleted pod's endpoint gone
	})

	t.Run("leader-deleted", func(t *testing.T) {
		what := "the lbplane leader pod deleted"
		r, took := c.underLoad(t, what, 40*time.Second, func() {
			leader := strings.TrimSpace(c.must(t, "", "-n", namespace, "get", "lease", "lbplane-status-writer", "-o", "jsonpath={.spec.holderIdentity}"))
			pod, _, _ := strings.Cut(leader, "_")
			if pod == "" {
				t.Fatalf("no leader in Lease lbplane-status-writer: %q", leader)
			}
			c.must(t, "", "-n", namespace, "delete", "pod", pod, "--wait=true", "--timeout=60s")
			// A new leader is elected (the other replica, or the replacement).
			eventually(t, 2*time.Minute, "another pod leads", func() error {
				now := strings.TrimSpace(c.must(t, "", "-n", namespace, "get", "lease", "lbplane-status-writer", "-o", "jsonpath={.spec.holderIdentity}"))
				if now == "" || strings.HasPrefix(now, pod+"_") {
					return fmt.Errorf("holder %q", now)
				}
				return nil
			})
		})
		record(t, what, r, took, "")
		c.must(t, "", "-n", namespace, "rollout", "status", "deployment/"+release, "--timeout=180s")
	})

	t.Run("helm-upgrade", func(t *testing.T) {
		// A changed value that changes lbplane's pod template only: a rolling update of lbplane, two
		// replicas, one at a time; the Envoys keep running and reconnect.
		what := "helm upgrade (logLevel=debug): lbplane rolls"
		envoys := c.podNames(t, namespace, envoySelector)
		before := c.podNames(t, namespace, lbplaneSelector)
		r, took := c.underLoad(t, what, 50*time.Second, func() {
			c.helmRun(t, "upgrade", release, "charts/lbplane", "-n", namespace, "--reuse-values", "--set", "logLevel=debug", "--timeout", "5m")
			c.must(t, "", "-n", namespace, "rollout", "status", "deployment/"+release, "--timeout=180s")
		})
		record(t, what, r, took, "")
		after := c.podNames(t, namespace, lbplaneSelector)
		for _, p := range before {
			if strings.Contains(" "+strings.Join(after, " ")+" ", " "+p+" ") {
				t.Errorf("lbplane pod %s was not replaced by the upgrade (before %v, after %v)", p, before, after)
			}
		}
		if now := c.podNames(t, namespace, envoySelector); strings.Join(now, " ") != strings.Join(envoys, " ") {
			t.Errorf("the upgrade of lbplane restarted the Envoys: %v, then %v", envoys, now)
		}
	})

	t.Run("envoy-rolling-restart", func(t *testing.T) {
		// kubectl rollout restart: a new Envoy first (maxSurge), then the old one gets SIGTERM after its
		// preStop hook has drained it (envoy.drain.seconds, then until its connections are gone).
		what := "Envoy rolling restart (preStop drain)"
		old := c.podNames(t, namespace, envoySelector)
		// How long each old Envoy took from its deletion to its end: the preStop hook holds it for
		// envoy.drain.seconds (15) at least, unless the hook failed (then SIGTERM ends Envoy at once). The
		// deletion time is the API server's (deletionTimestamp less the grace period, to the second), so a
		// slow look from a busy machine only makes the time longer.
		terminating := map[string]time.Duration{}
		r, took := c.underLoad(t, what, 75*time.Second, func() {
			c.must(t, "", "-n", namespace, "rollout", "restart", "deployment/"+release+"-envoy")
			deleted := map[string]time.Time{}
			eventually(t, 4*time.Minute, "every old Envoy has been replaced and has ended", func() error {
				out := c.must(t, "", "-n", namespace, "get", "pods", "-l", envoySelector, "-o",
					`jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.metadata.deletionGracePeriodSeconds}{"\n"}{end}`)
				present := map[string]bool{}
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					f := strings.Fields(l)
					if len(f) == 0 {
						continue
					}
					present[f[0]] = true
					if _, ok := deleted[f[0]]; !ok && len(f) == 3 {
						at, err := time.Parse(time.RFC3339, f[1])
						var grace int
						if _, err2 := fmt.Sscan(f[2], &grace); err != nil || err2 != nil {
							t.Fatalf("pod %s: deletionTimestamp %q, deletionGracePeriodSeconds %q", f[0], f[1], f[2])
						}
						deleted[f[0]] = at.Add(-time.Duration(grace) * time.Second)
					}
				}
				for _, p := range old {
					if present[p] {
						return fmt.Errorf("old Envoy %s still there", p)
					}
					if _, ok := terminating[p]; !ok {
						if at, ok := deleted[p]; ok {
							terminating[p] = time.Since(at).Round(100 * time.Millisecond)
						} else {
							terminating[p] = -1 // deleted and ended between two looks
						}
					}
				}
				return nil
			})
			c.must(t, "", "-n", namespace, "rollout", "status", "deployment/"+release+"-envoy", "--timeout=120s")
		})
		record(t, what, r, took, "measured")
		t.Logf("%s: %.0f of %.0f requests failed %s; each old Envoy from deletion to end: %v", what, r.Failed, r.Requests, errorsText(r.Errors), terminating)
		for p, d := range terminating {
			if d < 10*time.Second {
				t.Errorf("old Envoy %s ended %v after its deletion: the preStop drain (15 s) did not hold it", p, d)
			}
		}
		if out := c.must(t, "", "-n", namespace, "get", "events", "--field-selector", "reason=FailedPreStopHook", "-o", "name"); strings.TrimSpace(out) != "" {
			ev, _ := c.run("", "-n", namespace, "get", "events", "--field-selector", "reason=FailedPreStopHook")
			t.Errorf("the preStop hook failed:\n%s", ev)
		}
		// The drain is meant to lose nothing; a request that races a closing keep-alive connection can
		// still fail. More than 1 % is a broken drain.
		if r.Failed > r.Requests/100 {
			t.Errorf("%s: %.0f of %.0f requests failed %s; want at most 1 %%", what, r.Failed, r.Requests, errorsText(r.Errors))
		}
	})

	t.Run("node-drain", func(t *testing.T) {
		// kubectl drain of the release's pods, through the eviction API: each PodDisruptionBudget
		// (maxUnavailable 1) lets one Envoy and one lbplane go. On a one-node cluster their replacements
		// cannot start on the cordoned node, so the PDBs then hold the other two, and the drain gives up
		// at its timeout saying so. Traffic keeps flowing through the Envoy that stays.
		node := strings.TrimSpace(c.must(t, "", "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"))
		nodes := strings.Fields(c.must(t, "", "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
		what := "node drain (release's pods, PDBs respected)"
		var drainOut string
		r, took := c.underLoad(t, what, 70*time.Second, func() {
			t.Cleanup(func() { c.run("", "uncordon", node) })
			out, err := c.run("", "drain", node, "--pod-selector", "app.kubernetes.io/instance="+release,
				"--delete-emptydir-data", "--ignore-daemonsets", "--timeout=40s")
			drainOut = out
			if len(nodes) == 1 && err == nil {
				t.Errorf("the drain of the only node finished: the PDBs did not hold any pod:\n%s", out)
			}
			if len(nodes) > 1 && err != nil {
				t.Errorf("kubectl drain %s: %v\n%s", node, err, out)
			}
		})
		record(t, what, r, took, "")
		if len(nodes) == 1 {
			if !strings.Contains(drainOut, "disruption budget") {
				t.Errorf("the drain did not stop at a PodDisruptionBudget:\n%s", drainOut)
			}
			// One of each was evicted; the other is still running and Ready.
			for _, sel := range []string{envoySelector, lbplaneSelector} {
				out := c.must(t, "", "-n", namespace, "get", "pods", "-l", sel, "-o",
					`jsonpath={range .items[*]}{.status.phase}/{.status.conditions[?(@.type=="Ready")].status} {end}`)
				if n := strings.Count(out, "Running/True"); n != 1 {
					t.Errorf("%s: %d pods Running and Ready during the drain, want 1 (the PDB's maxUnavailable 1 of 2): %s", sel, n, out)
				}
			}
		}
		t.Logf("kubectl drain:\n%s", drainOut)
		c.must(t, "", "uncordon", node)
		for _, d := range []string{release, release + "-envoy"} {
			c.must(t, "", "-n", namespace, "rollout", "status", "deployment/"+d, "--timeout=180s")
		}
	})
}

// envoyWaitsForLbplane: an Envoy that starts while no lbplane runs waits for it, unready, and is not
// restarted: neither its init container, which waits for lbplane to sign the pod's certificate (per-pod
// identity, the chart's default), nor Envoy by its liveness probe; once lbplane is back it becomes Ready.
// Liveness has no event for a success, so the test watches the restart counts for 45 s: more than three
// liveness periods (10 s) with the failure threshold (3), after which the httpGet probe the chart used to
// have had restarted it, and long past the kubelet's first restarts of an init container that exits.
func (c *cluster) envoyWaitsForLbplane(t *testing.T) {
	c.must(t, "", "-n", namespace, "scale", "deployment/"+release, "--replicas=0")
	c.cleanup(t, func() { c.run("", "-n", namespace, "scale", "deployment/"+release, "--replicas=2") })
	eventually(t, 2*time.Minute, "no lbplane pod runs", func() error {
		if p := c.podNames(t, namespace, lbplaneSelector); len(p) != 0 {
			return fmt.Errorf("still %v", p)
		}
		return nil
	})
	old := c.podNames(t, namespace, envoySelector)
	c.must(t, "", "-n", namespace, "delete", "pod", old[0], "--wait=false")
	var fresh string
	eventually(t, 2*time.Minute, "a replacement Envoy runs or waits in its init container", func() error {
		for _, p := range c.podNames(t, namespace, envoySelector) {
			if p != old[0] && p != old[1] {
				st := c.must(t, "", "-n", namespace, "get", "pod", p, "-o", "jsonpath={.status.phase} {.status.initContainerStatuses[0].state.running.startedAt}")
				if phase, initRunning, _ := strings.Cut(st, " "); phase == "Running" || (phase == "Pending" && initRunning != "") {
					fresh = p
					return nil
				}
			}
		}
		return fmt.Errorf("none yet")
	})
	restarts := func() string {
		return c.must(t, "", "-n", namespace, "get", "pod", fresh, "-o", "jsonpath={.status.initContainerStatuses[*].restartCount} {.status.containerStatuses[*].restartCount}")
	}
	noRestart := func(out string) bool { return strings.Trim(out, "0 ") == "" }
	time.Sleep(45 * time.Second)
	out, ready := restarts(), c.must(t, "", "-n", namespace, "get", "pod", fresh, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if !noRestart(out) || ready != "False" {
		t.Errorf("an Envoy waiting 45 s for lbplane: restarts %q (init containers, containers) and Ready %q, want none and False (waiting, not restarted)", out, ready)
	}
	c.must(t, "", "-n", namespace, "scale", "deployment/"+release, "--replicas=2")
	c.must(t, "", "-n", namespace, "wait", "--for=condition=Ready", "pod/"+fresh, "--timeout=180s")
	if out := restarts(); !noRestart(out) {
		t.Errorf("the Envoy's containers restarted before lbplane came back: %q (init containers, containers)", out)
	}
	t.Logf("an Envoy waited for lbplane 45 s without a restart, and became Ready once lbplane was back")
}
