package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// changeSteps are the policies pushed one after the other while traffic flows. Each names the backends that
// must be serving once it is live.
var changeSteps = []struct {
	name, yaml string
	serving    []string
	// active, when set, must appear in Envoy's config once the step is live.
	active string
}{
	{"three endpoints", `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: live}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 0).Port}}}
        - {address: 127.0.0.1, port: {{(index .B 1).Port}}}
        - {address: 127.0.0.1, port: {{(index .B 2).Port}}}
`, []string{"b0", "b1", "b2"}, ""},
	{"new weights", `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: live}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 0).Port}}, weight: 5}
        - {address: 127.0.0.1, port: {{(index .B 1).Port}}, weight: 1}
        - {address: 127.0.0.1, port: {{(index .B 2).Port}}, weight: 1}
`, []string{"b0", "b1", "b2"}, ""},
	{"a new algorithm and a health check (a cluster update)", `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: live}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {algorithm: Random}
      healthCheck: {active: {type: HTTP, interval: 1s, http: {path: /healthz}}}
      endpoints:   # the same as the step before: only the cluster changes
        - {address: 127.0.0.1, port: {{(index .B 0).Port}}, weight: 5}
        - {address: 127.0.0.1, port: {{(index .B 1).Port}}, weight: 1}
        - {address: 127.0.0.1, port: {{(index .B 2).Port}}, weight: 1}
`, []string{"b0", "b1", "b2"}, "envoy.load_balancing_policies.random"},
	{"a new endpoint", `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: live}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 0).Port}}, weight: 5}
        - {address: 127.0.0.1, port: {{(index .B 1).Port}}, weight: 1}
        - {address: 127.0.0.1, port: {{(index .B 2).Port}}, weight: 1}
        - {address: 127.0.0.1, port: {{(index .B 3).Port}}, weight: 1}
`, []string{"b0", "b1", "b2", "b3"}, ""},
	{"a removed endpoint", `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: live}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 1).Port}}}
        - {address: 127.0.0.1, port: {{(index .B 2).Port}}}
        - {address: 127.0.0.1, port: {{(index .B 3).Port}}}
`, []string{"b1", "b2", "b3"}, ""},
	{"a new backend behind a weighted route (a new cluster)", `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: live}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - backends: [{name: app, weight: 1}, {name: green, weight: 1}]
  backends:
    - name: app
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 1).Port}}}
        - {address: 127.0.0.1, port: {{(index .B 2).Port}}}
    - name: green
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 4).Port}}}
`, []string{"b1", "b2", "b4"}, ""},
	{"the old backend removed (a removed cluster)", `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: live}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: green
      loadBalancing: {algorithm: LeastRequest}
      endpoints:
        - {address: 127.0.0.1, port: {{(index .B 4).Port}}}
        - {address: 127.0.0.1, port: {{(index .B 0).Port}}}
`, []string{"b4", "b0"}, ""},
}

func TestChangesUnderLoadLoseNoRequest(t *testing.T) {
	t.Parallel()
	for _, delta := range []bool{true, false} {
		t.Run(map[bool]string{true: "delta", false: "sotw"}[delta], func(t *testing.T) {
			bs := startBackends(t, "b0", "b1", "b2", "b3", "b4")
			e := setup(t, delta, changeSteps[0].yaml, bs...)
			waitServing(t, e.URL, "b0", "b1", "b2")
			waitSynced(t, e.L, 1)
			dumpBefore := e.E.ConfigDump(t)
			load := startLoad(e.URL, 400, 8, 2*time.Minute)
			c := newClient(true)
			for _, step := range changeSteps[1:] {
				push(t, e.L, policy(t, step.yaml, e))
				want := map[string]bool{}
				for _, s := range step.serving {
					want[s] = true
				}
				// Each change is live within seconds; a cluster update that waited for Envoy's EDS fetch timeout
				// would take 15.
				eventually(t, 5*time.Second, "step "+step.name+" is live", func() error {
					got := c.Spread(t, e.URL, 60, nil)
					for b := range got {
						if !want[b] {
							return fmt.Errorf("still served by %s: %v", b, got)
						}
					}
					for b := range want {
						if got[b] == 0 {
							return fmt.Errorf("%s not serving yet: %v", b, got)
						}
					}
					// Serving is not enough: while an updated cluster warms, the old one serves on.
					dump := e.E.ConfigDump(t)
					if strings.Contains(dump, "dynamic_warming_clusters") {
						return fmt.Errorf("a cluster is still warming")
					}
					if step.active != "" && !strings.Contains(dump, step.active) {
						return fmt.Errorf("Envoy does not run %s yet", step.active)
					}
					return nil
				})
				waitSynced(t, e.L, 1)
				time.Sleep(300 * time.Millisecond)
			}
			load.Stop()
			load.RequireNoFailures(t, 300)
			t.Logf("%d requests during %d changes, %d failed; served by %v", load.OK.Load(), len(changeSteps)-1, load.Failed.Load(), load.Backends)
			if e.E.ConfigDump(t) == dumpBefore {
				t.Error("Envoy's config did not change")
			}
		})
	}
}

const twoPolicies = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: good}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: other}
spec:
  listener: {address: 127.0.0.1, port: {{.Port2}}, protocol: HTTP}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
`

func lbctl(t *testing.T, l *Lbplane, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "lbctl"), append([]string{"--server", l.APIURL, "--token", token}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func TestInvalidPolicyIsRejectedAndNothingChanges(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "good", "other", "newer")
	l := startLbplane(t)
	port, port2 := reservePort(t), reservePort(t)
	data := map[string]any{"Port": port, "Port2": port2, "B": bs}
	startEnvoy(t, l, "envoy-1", true)
	push(t, l, policy(t, twoPolicies, data))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitServing(t, url, "good")
	waitSynced(t, l, 1)
	before, _, err := lbctl(t, l, "", "get", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}

	bad := fmt.Sprintf(`
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: good}
spec:
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {algorithm: RoundRobn}
      endpoints: [{address: 127.0.0.1, port: 0}, {address: no_where, port: %d}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: other}
spec:
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: %d}]
`, port, bs[1].Port, port2, bs[2].Port)
	load := startLoad(url, 200, 4, time.Minute)
	_, stderr, err := lbctl(t, l, bad, "push-config", "-f", "-")
	if err == nil {
		t.Fatal("lbctl push-config accepted an invalid policy")
	}
	for _, want := range []string{
		`error: default/good (<stdin>#1): spec.backends[0].loadBalancing.algorithm: unsupported value "RoundRobn"; supported: RoundRobin, LeastRequest, Random, RingHash, Maglev, BackendUtilization`,
		`error: default/good (<stdin>#1): spec.backends[0].endpoints[0].port: must be between 1 and 65535, got 0`,
		`error: default/good (<stdin>#1): spec.backends[0].endpoints[1].address: must be an IP address or a lowercase DNS name, got "no_where"`,
	} {
		if !strings.Contains(stderr, want+"\n") {
			t.Errorf("stderr lacks the line %q:\n%s", want, stderr)
		}
	}
	if n := strings.Count(stderr, "\n"); n != 3 {
		t.Errorf("want one line per error (3), got %d:\n%s", n, stderr)
	}
	// All or nothing: the valid "other" in the same push was not applied either.
	after, _, _ := lbctl(t, l, "", "get", "-o", "json")
	if stripVolatile(after) != stripVolatile(before) {
		t.Errorf("the accepted state changed after a refused push:\nbefore %s\nafter %s", before, after)
	}
	// Envoy keeps serving the previous config...
	got := newClient(true).Spread(t, url, 100, nil)
	if got["good"] != 100 {
		t.Errorf("after the refused push: %v, want all on good", got)
	}
	// ...and other policies still update.
	fixed := strings.SplitN(bad, "---", 2)[1]
	if out, stderr, err := lbctl(t, l, fixed, "push-config", "-f", "-"); err != nil {
		t.Fatalf("a valid push after a refused one: %v %s", err, stderr)
	} else if !strings.Contains(out, "default/other configured (generation 2)") {
		t.Errorf("push output: %q", out)
	}
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port2), "newer")
	load.WaitServed(t, 100)
	load.Stop()
	load.RequireNoFailures(t, 100)
}

// stripVolatile drops what changes on its own (ages and transition times).
// stripVolatile drops what changes with time rather than with config from lbctl get -o json: condition
// transition times, and status.backends (endpoint health and load, as the Envoys observe them).
func stripVolatile(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	var strip func(any)
	strip = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			delete(t, "lastTransitionTime")
			if st, ok := t["status"].(map[string]any); ok {
				// What the Envoys' stats say, read every few seconds: the backends' health and Ready.
				delete(st, "backends")
				if cs, ok := st["conditions"].([]any); ok {
					kept := cs[:0]
					for _, c := range cs {
						if m, ok := c.(map[string]any); !ok || m["type"] != "Ready" {
							kept = append(kept, c)
						}
					}
					st["conditions"] = kept
				}
			}
			for _, e := range t {
				strip(e)
			}
		case []any:
			for _, e := range t {
				strip(e)
			}
		}
	}
	strip(v)
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

func TestRestartLosesNothing(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "r0", "r1", "r2")
	e := setup(t, true, roundRobin, bs...)
	waitServing(t, e.URL, "r0", "r1", "r2")
	waitSynced(t, e.L, 1)
	getBefore, _, err := lbctl(t, e.L, "", "get", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	dumpBefore := e.E.ConfigDump(t)

	down := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("LBPLANE_E2E_DOWNTIME")); err == nil {
		down = d // e2e/README.md: the 10-minute run
	}
	load := startLoad(e.URL, 300, 6, down+2*time.Minute)
	time.Sleep(500 * time.Millisecond)
	e.L.Kill() // SIGKILL: no chance to clean up
	time.Sleep(down)
	okWhileDown := load.OK.Load()
	e.L.Restart(t)
	waitSynced(t, e.L, 1)
	time.Sleep(time.Second)
	load.Stop()
	load.RequireNoFailures(t, 1000)
	if okWhileDown == 0 {
		t.Error("no request succeeded while lbplane was down")
	}

	getAfter, _, err := lbctl(t, e.L, "", "get", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if stripVolatile(getAfter) != stripVolatile(getBefore) {
		t.Errorf("policies differ after the restart:\nbefore %s\nafter %s", getBefore, getAfter)
	}
	p, err := e.L.Client.Get(context.Background(), "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation != 1 || p.CreationTimestamp.IsZero() {
		t.Errorf("metadata not kept: generation %d created %v", p.Generation, p.CreationTimestamp)
	}
	if dumpAfter := e.E.ConfigDump(t); dumpAfter != dumpBefore {
		t.Errorf("Envoy's config changed across the restart (-before +after):\n%s", cmp.Diff(dumpBefore, dumpAfter))
	}
	out, _, err := lbctl(t, e.L, "", "status")
	if err != nil || !strings.Contains(out, "SYNCED") {
		t.Errorf("lbctl status after restart: %v\n%s", err, out)
	}
	t.Logf("%d requests, %d while lbplane was down for %s, 0 failed", load.OK.Load(), okWhileDown, down)
}

// twentyChanges returns a sequence of policies that changes weights, endpoints, the algorithm and the health
// check, one step at a time.
func twentyChanges(t *testing.T, e *env) [][]byte {
	algos := []string{"RoundRobin", "LeastRequest", "Random", "RoundRobin", "LeastRequest"}
	var out [][]byte
	for i := 0; i < 20; i++ {
		var b strings.Builder
		fmt.Fprintf(&b, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: twenty}
spec:
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {algorithm: %s}
`, e.Port, algos[i%len(algos)])
		if i%3 == 1 {
			b.WriteString("      healthCheck: {active: {type: HTTP, interval: 1s, http: {path: /healthz}}}\n")
		}
		b.WriteString("      endpoints:\n")
		// Between two and four endpoints, a different set and weights each time.
		for j, be := range e.B {
			if (i+j)%5 == 4 && j > 1 {
				continue
			}
			fmt.Fprintf(&b, "        - {address: 127.0.0.1, port: %d, weight: %d}\n", be.Port, 1+(i*7+j*3)%5)
		}
		out = append(out, []byte(b.String()))
	}
	return out
}

func TestTwentyChangesUnderLoad(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "t0", "t1", "t2", "t3")
	e := &env{L: startLbplane(t), Port: reservePort(t), B: bs}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
	e.E = startEnvoy(t, e.L, "envoy-twenty", true)
	changes := twentyChanges(t, e)
	push(t, e.L, changes[0])
	waitServing(t, e.URL, "t0", "t1", "t2", "t3")
	waitSynced(t, e.L, 1)
	load := startLoad(e.URL, 300, 6, 2*time.Minute)
	for _, c := range changes[1:] {
		push(t, e.L, c)
		waitSynced(t, e.L, 1)
		time.Sleep(150 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	load.Stop()
	load.RequireNoFailures(t, 300)
	t.Logf("20 changes (weights, endpoints, algorithm, health check) under load: %d requests, %d not 2xx", load.OK.Load(), load.Failed.Load())
}

// Without retries (and without the default outlier ejection) a killed backend costs requests until something
// notices; the count is reported, and it
// must not be zero, or the retry test above would prove nothing. lbplane's default (no retry block) retries
// connection failures elsewhere, so it must cost fewer: only the requests in flight on the killed backend's
// connections, which may have reached it.
func TestKilledBackendWithoutRetriesCostsRequests(t *testing.T) {
	t.Parallel()
	failed := map[string]int64{}
	for _, c := range []struct{ name, retry string }{{"retries-off", "\n      retry: {attempts: 0}"}, {"default-retry", ""}} {
		t.Run(c.name, func(t *testing.T) {
			bs := startBackends(t, "k1", "k2", "k3")
			tmpl := strings.Replace(roundRobin, "\n  backends:", "\n  routes:\n    - backends: [{name: app}]"+c.retry+"\n  backends:", 1)
			// Without the default ejection at the first refused connect, which would hide what the retry does.
			tmpl = strings.Replace(tmpl, "    - name: app\n", "    - name: app\n      healthCheck: {passive: {disabled: true}}\n", 1)
			e := setup(t, true, tmpl, bs...)
			waitServing(t, e.URL, "k1", "k2", "k3")
			load := startLoad(e.URL, 300, 6, time.Minute)
			time.Sleep(time.Second)
			bs[2].Stop()
			time.Sleep(3 * time.Second)
			load.Stop()
			failed[c.name] = load.Failed.Load()
			t.Logf("a backend killed under 300 req/s, no health checks, %s: %d of %d requests failed in 3s",
				c.name, load.Failed.Load(), load.Failed.Load()+load.OK.Load())
		})
	}
	if failed["retries-off"] == 0 {
		t.Errorf("no request failed after a backend was killed without retries or health checks")
	}
	if failed["default-retry"] >= failed["retries-off"] {
		t.Errorf("the default retry did not help: %d failed with it, %d without", failed["default-retry"], failed["retries-off"])
	}
}

// A restarted Envoy takes no traffic before it has its full config: every connection it accepts is served.
func TestRestartedEnvoyServesOnlyWithFullConfig(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "e1", "e2")
	e := setup(t, true, routesLikeFor2(), bs...)
	waitServing(t, e.URL+"/b", "e2")
	e.E.Kill()
	deadline := time.Now().Add(30 * time.Second)
	startEnvoy(t, e.L, "envoy-restarted", true)
	c := newClient(false)
	refused, served := 0, 0
	for time.Now().Before(deadline) && served < 200 {
		b, code, err := doWith(c, e.URL+"/b", nil)
		switch {
		case err != nil && strings.Contains(err.Error(), "connection refused"):
			refused++
			time.Sleep(2 * time.Millisecond)
		case err != nil:
			t.Fatalf("after %d refused connections: %v", refused, err)
		case code != 200 || b != "e2":
			t.Fatalf("after %d refused connections the first answers came from a partial config: status %d backend %q", refused, code, b)
		default:
			served++
		}
	}
	if served < 200 {
		t.Fatalf("the restarted Envoy served %d requests in 30s", served)
	}
	t.Logf("restarted Envoy: %d connections refused while it loaded its config, then %d requests all served by the right route", refused, served)
}

func routesLikeFor2() string {
	return `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: two-routes}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - match: {path: {value: /b}}
      backends: [{name: b}]
    - backends: [{name: a}]
  backends:
    - name: a
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}]
    - name: b
      endpoints: [{address: 127.0.0.1, port: {{(index .B 1).Port}}}]
`
}
