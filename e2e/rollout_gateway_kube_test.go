package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// gwRolloutRoute sends every request of Gateway gw to Service stable, and to Extra with weight Weight. Its
// changes reach the Envoys in stages: two Envoys first, then every one, each judged after a bake of Bake.
const gwRolloutRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: ro
  namespace: apps
  annotations:
    gateway.lbplane.io/rollout: '{stages: [{envoys: 2}, {percent: 100}], bakeTime: {{.Bake}}, analysis: {minRequests: 20, maxP99Ratio: 50}}'
spec:
  parentRefs: [{name: gw}]
  rules:
    - backendRefs:
        - {name: stable, port: 80, weight: 1}
{{- if .Extra}}
        - {name: {{.Extra}}, port: 80, weight: {{.Weight}}}
{{- end}}
`

// gwRolledOut reads the RolledOut condition of HTTPRoute apps/ro's parent gw, as lbplane wrote it (nil:
// none).
func gwRolledOut(t *testing.T, kubeconfig string) *metav1.Condition {
	t.Helper()
	out, err := kubectl(t, kubeconfig, "", "get", "httproute", "ro", "-n", "apps", "-o",
		`jsonpath={.status.parents[?(@.controllerName=="lbplane.io/gateway-controller")].conditions}`)
	if err != nil {
		t.Fatalf("kubectl get httproute ro: %v\n%s", err, out)
	}
	var conds []metav1.Condition
	if out != "" {
		if err := json.Unmarshal([]byte(out), &conds); err != nil {
			t.Fatalf("conditions %q: %v", out, err)
		}
	}
	for i := range conds {
		if conds[i].Type == "lbplane.io/RolledOut" {
			return &conds[i]
		}
	}
	return nil
}

// waitGWRolledOut waits until the route's RolledOut condition has reason (a rollout phase), and fails at
// once when it ends in another phase.
func waitGWRolledOut(t *testing.T, kubeconfig, reason string, timeout time.Duration) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	eventually(t, timeout, "the route's rollout is "+reason, func() error {
		c = gwRolledOut(t, kubeconfig)
		switch {
		case c == nil:
			return fmt.Errorf("no RolledOut condition")
		case c.Reason == reason:
			return nil
		case c.Reason != v1alpha1.RolloutProgressing && c.Reason != v1alpha1.RolloutPaused:
			t.Fatalf("the rollout ended %s, not %s: %s", c.Reason, reason, c.Message)
		}
		return fmt.Errorf("%s: %s", c.Reason, c.Message)
	})
	return c
}

// gwHolders are the Envoys whose config holds a cluster of Service apps/name (the Gateway's clusters are
// named after the Service port they send to).
func gwHolders(t *testing.T, envoys []*Envoy, name string) []string {
	t.Helper()
	var out []string
	for _, e := range envoys {
		if strings.Contains(e.ConfigDump(t), "service/apps/"+name+"/") {
			out = append(out, e.NodeID)
		}
	}
	return out
}

// TestStagedRolloutGatewayAPI: an HTTPRoute that asks for staged rollouts (its annotation), two lbplane
// replicas on a real kube-apiserver and etcd, three real Envoys under a steady client through the Gateway's
// port. A change of the route that sends half of the requests to a failing Service reaches only the first
// stage's two Envoys and is rolled back, and the route's status says so; the route's annotations pause and
// abort a rollout; a good change passes every stage with the elected replica killed during its first
// stage: the other replica, which took the generations of the Gateway's policy from the one that numbered
// them, finishes it; restarted during the next rollout, that replica keeps the number it gave the candidate
// and serves each Envoy the side it was on, and numbers the next change higher.
func TestStagedRolloutGatewayAPI(t *testing.T) {
	cluster := kubetest.Start(t)
	cluster.InstallCRDs(t, "charts/lbplane/crds/gateway-api")
	kc := cluster.Kubeconfig
	kubeApply(t, kc, gwBase, nil)
	stable, broken, fresh := startGWBackend(t, "stable"), startGWBackend(t, "broken"), startGWBackend(t, "fresh")
	broken.failing.Store(true)
	for _, b := range []*gwBackend{stable, broken, fresh} {
		kubeApply(t, kc, gwService, map[string]any{"Name": b.name, "Namespace": "apps", "Port": b.port, "IP": b.ip})
	}
	route := func(extra string, weight int, bake string) {
		t.Helper()
		kubeApply(t, kc, gwRolloutRoute, map[string]any{"Extra": extra, "Weight": weight, "Bake": bake})
	}
	route("", 0, "3s")
	port := reservePort(t)
	args := []string{"--kubernetes", "--kubeconfig", kc, "--leader-election-namespace", "lbplane-system", "--gateway-api",
		"--gateway-api-address", "127.0.0.1", "--gateway-api-ports", strconv.Itoa(port), "--namespace", "lbplane-system",
		"--gateway-api-envoy-selector", "app=envoy", "--proxy-stats-interval", "250ms", "--rollout-canary-min-age", canaryMinAge.String()}
	replicas := []*Lbplane{startLbplane(t, args...), startLbplane(t, args...)}
	// envoy-a on replica 1, the others on replica 0.
	envoys := []*Envoy{startEnvoy(t, replicas[1], "envoy-a", true), startEnvoy(t, replicas[0], "envoy-b", true), startEnvoy(t, replicas[0], "envoy-c", true)}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServing(t, url, "stable")
	load := startLoadWith(newClient(false), url, 150, 6, 4*time.Minute)
	defer load.Stop()
	load.WaitServed(t, 100)
	waitEveryEnvoyServesCluster(t, envoys, "cluster.service/apps/stable/")
	leader := electedReplica(t, replicas)
	if c := gwRolledOut(t, kc); c != nil {
		t.Errorf("a RolledOut condition before any change was staged: %+v", c)
	}

	t.Run("a bad change reaches the first stage's two Envoys and is rolled back", func(t *testing.T) {
		okBefore, failedBefore := load.OK.Load(), load.Failed.Load()
		route("broken", 1, "3s")
		eventually(t, 60*time.Second, "the rollout is rolled back", func() error {
			if got := gwHolders(t, envoys, "broken"); len(got) > 2 {
				// The route's RolledOut condition says why the stage moved on (passed, widened by one canary, or
				// superseded).
				t.Fatalf("the failing Service reached %v: more than the first stage's two Envoys; RolledOut: %+v", got, gwRolledOut(t, kc))
			}
			if c := gwRolledOut(t, kc); c == nil || c.Reason != v1alpha1.RolloutRolledBack {
				return fmt.Errorf("RolledOut %+v", c)
			}
			return nil
		})
		c := gwRolledOut(t, kc)
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "every host name on port 80: RolledBack at stage 1 of 2") || !strings.Contains(c.Message, "error rate") {
			t.Errorf("after the rollback the route says %+v", c)
		}
		// The on-call person sees it as any rollback: the RolledBack condition of the host name's policy.
		var series []string
		for k, v := range scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", replicas[leader].metricsPort)) {
			if strings.HasPrefix(k, "lbplane_policy_condition{condition=RolledBack,name=gateway.gw.80.any,namespace=apps,") && strings.HasSuffix(k, "status=True}") && v == 1 {
				series = append(series, k)
			}
		}
		if len(series) != 1 {
			t.Errorf("lbplane_policy_condition of the rollback: %v, want one RolledBack True series of apps/gateway.gw.80.any", series)
		}
		eventually(t, 10*time.Second, "no Envoy holds the failing Service", func() error {
			if got := gwHolders(t, envoys, "broken"); len(got) > 0 {
				return fmt.Errorf("held by %v", got)
			}
			return nil
		})
		ok, failed := load.OK.Load()-okBefore, load.Failed.Load()-failedBefore
		t.Logf("during the bad rollout: %d of %d requests failed", failed, ok+failed)
		// Two Envoys of three sent half of their requests to the failing Service: some failed, and fewer than
		// the half every Envoy at once would have failed.
		if failed == 0 || 2*failed >= ok+failed {
			t.Errorf("%d of %d requests failed during the bad rollout: want some (the canaries'), and fewer than half", failed, ok+failed)
		}
	})

	t.Run("paused and aborted through the route's annotations", func(t *testing.T) {
		route("fresh", 1, "60s")
		// Until the new rollout starts, the route says how the last one ended.
		eventually(t, 30*time.Second, "the rollout starts", func() error {
			if c := gwRolledOut(t, kc); c == nil || c.Reason != v1alpha1.RolloutProgressing {
				return fmt.Errorf("RolledOut %+v", c)
			}
			return nil
		})
		if out, err := kubectl(t, kc, "", "annotate", "httproute", "ro", "-n", "apps", "lbplane.io/rollout-paused=true"); err != nil {
			t.Fatalf("kubectl annotate: %v\n%s", err, out)
		}
		waitGWRolledOut(t, kc, v1alpha1.RolloutPaused, 30*time.Second)
		gen, err := kubectl(t, kc, "", "get", "httproute", "ro", "-n", "apps", "-o", "jsonpath={.metadata.generation}")
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, gen)
		}
		if out, err := kubectl(t, kc, "", "annotate", "httproute", "ro", "-n", "apps", "lbplane.io/rollout-paused-", "lbplane.io/rollout-abort="+gen); err != nil {
			t.Fatalf("kubectl annotate: %v\n%s", err, out)
		}
		eventually(t, 30*time.Second, "the rollout is aborted", func() error {
			if c := gwRolledOut(t, kc); c == nil || c.Reason != v1alpha1.RolloutAborted {
				return fmt.Errorf("RolledOut %+v", c)
			}
			return nil
		})
		eventually(t, 10*time.Second, "no Envoy holds the new Service", func() error {
			if got := gwHolders(t, envoys, "fresh"); len(got) > 0 {
				return fmt.Errorf("held by %v", got)
			}
			return nil
		})
	})

	other := 1 - leader
	t.Run("the elected replica killed mid-rollout: the other finishes it", func(t *testing.T) {
		// A new generation of the route (the abort above named the last one, and does not apply to it).
		route("fresh", 2, "8s")
		var canaries []string
		eventually(t, 30*time.Second, "the first stage's two Envoys have the new Service", func() error {
			c := gwRolledOut(t, kc)
			if c == nil || c.Reason != v1alpha1.RolloutProgressing || !strings.Contains(c.Message, "stage 1 of 2") {
				return fmt.Errorf("RolledOut %+v", c)
			}
			if canaries = gwHolders(t, envoys, "fresh"); len(canaries) != 2 {
				return fmt.Errorf("held by %v", canaries)
			}
			return nil
		})
		replicas[leader].Kill()
		waitWritesStatus(t, replicas[other])
		c := waitGWRolledOut(t, kc, v1alpha1.RolloutSucceeded, 90*time.Second)
		if c.Status != metav1.ConditionTrue {
			t.Errorf("after the rollout the route says %+v", c)
		}
		t.Logf("after the takeover: %s", c.Message)
		live := envoysOfReplica(envoys, other)
		eventually(t, 10*time.Second, "the surviving replica's Envoys have the new Service", func() error {
			if got := gwHolders(t, live, "fresh"); len(got) != len(live) {
				return fmt.Errorf("held by %v of %d", got, len(live))
			}
			return nil
		})
		// The survivor numbered the change as the elected replica had: had it given the candidate another
		// generation, taking over would have superseded the rollout with a newer one.
		if b, _ := os.ReadFile(replicas[other].log); strings.Contains(string(b), "superseded") {
			t.Errorf("the surviving replica superseded the rollout it took over")
		}
	})

	t.Run("a replica restarted mid-rollout keeps the generations it numbered", func(t *testing.T) {
		// Two more Envoys on the surviving replica, so that the first stage's two canaries leave Envoys on
		// the baseline (the killed replica's Envoys are connected to no replica).
		live := append(envoysOfReplica(envoys, other), startEnvoy(t, replicas[other], "envoy-y", true), startEnvoy(t, replicas[other], "envoy-z", true))
		waitSynced(t, replicas[other], len(live))
		before := gwGeneration(t, kc)
		route("broken", 1, "10m")
		var canaries []string
		eventually(t, 30*time.Second, "the first stage's canaries have the failing Service", func() error {
			c := gwRolledOut(t, kc)
			if c == nil || c.Reason != v1alpha1.RolloutProgressing {
				return fmt.Errorf("RolledOut %+v", c)
			}
			if canaries = gwHolders(t, live, "broken"); len(canaries) != 2 {
				return fmt.Errorf("held by %v of %d", canaries, len(live))
			}
			return nil
		})
		staged := gwGeneration(t, kc)
		if staged <= before {
			t.Fatalf("the change was numbered %d, after %d", staged, before)
		}
		replicas[other].Kill()
		replicas[other].Restart(t)
		waitSynced(t, replicas[other], len(live))
		if got := gwHolders(t, live, "broken"); !slices.Equal(got, canaries) {
			t.Errorf("after the restart the failing Service is held by %v, canaries %v", got, canaries)
		}
		if after := gwGeneration(t, kc); after != staged {
			t.Errorf("after the restart the policy is numbered %d, before %d", after, staged)
		}
		if c := gwRolledOut(t, kc); c == nil || c.Reason != v1alpha1.RolloutProgressing || !strings.Contains(c.Message, "stage 1 of 2") {
			t.Errorf("after the restart the route says %+v", c)
		}
		gen, err := kubectl(t, kc, "", "get", "httproute", "ro", "-n", "apps", "-o", "jsonpath={.metadata.generation}")
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, gen)
		}
		if out, err := kubectl(t, kc, "", "annotate", "--overwrite", "httproute", "ro", "-n", "apps", "lbplane.io/rollout-abort="+gen); err != nil {
			t.Fatalf("kubectl annotate: %v\n%s", err, out)
		}
		waitGWRolledOut(t, kc, v1alpha1.RolloutAborted, 60*time.Second)
		eventually(t, 10*time.Second, "no Envoy holds the failing Service", func() error {
			if got := gwHolders(t, live, "broken"); len(got) > 0 {
				return fmt.Errorf("held by %v", got)
			}
			return nil
		})
		route("fresh", 3, "3s")
		eventually(t, 30*time.Second, "the next change is numbered", func() error {
			if next := gwGeneration(t, kc); next <= staged {
				return fmt.Errorf("numbered %d, after %d", next, staged)
			}
			return nil
		})
	})
}

// gwGeneration reads the generation lbplane numbered the policy of Gateway gw's port 80 with, from the
// ConfigMap the elected replica keeps them in.
func gwGeneration(t *testing.T, kubeconfig string) int64 {
	t.Helper()
	out, err := kubectl(t, kubeconfig, "", "get", "configmap", "lbplane-gateway-generations", "-n", "lbplane-system", "-o", "jsonpath={.data.generations}")
	if err != nil {
		t.Fatalf("kubectl get configmap: %v\n%s", err, out)
	}
	var st struct {
		Policies map[string]struct {
			Generation int64 `json:"generation"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("the generations %q: %v", out, err)
	}
	p, ok := st.Policies["apps/gateway.gw.80.any"]
	if !ok {
		t.Fatalf("no generation of apps/gateway.gw.80.any in %s", out)
	}
	return p.Generation
}
