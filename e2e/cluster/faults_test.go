//go:build cluster

package cluster

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// faultLoad is the k6 load each fault runs under: LBPLANE_CLUSTER_FAULT_RATE requests per second (default 50)
// for 40 s, through the Envoy Service.
func faultRate(t *testing.T) int {
	rate := 50
	if v := os.Getenv("LBPLANE_CLUSTER_FAULT_RATE"); v != "" {
		if _, err := fmt.Sscan(v, &rate); err != nil || rate <= 0 {
			t.Fatalf("LBPLANE_CLUSTER_FAULT_RATE=%q: want a positive number of requests per second", v)
		}
	}
	return rate
}

// underLoad runs fault while k6 sends load through the Envoy Service, 10 s after the load started, and
// returns k6's summary.
func (c *cluster) underLoad(t *testing.T, what string, fault func()) k6Result {
	t.Helper()
	c.k6Script(t)
	job := c.startK6(t, fmt.Sprintf("http://%s-envoy.%s.svc.cluster.local/", release, namespace), faultRate(t), "40s")
	eventually(t, 2*time.Minute, "the k6 pod runs", func() error {
		out, err := c.run("", "-n", "default", "get", "pods", "-l", "job-name="+job.name, "-o", "jsonpath={.items[*].status.phase}")
		if err != nil || out != "Running" {
			return fmt.Errorf("phase %q %v", out, err)
		}
		return nil
	})
	time.Sleep(10 * time.Second) // load before the fault; k6's own duration bounds the run
	start := time.Now()
	fault()
	t.Logf("%s: done in %.1fs", what, time.Since(start).Seconds())
	r := job.wait(t)
	t.Logf("%s under k6 load: %.0f requests, %.0f failed, %.0f dropped; p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		what, r.Requests, r.Failed, r.Dropped, r.P50, r.P99, r.Max)
	if r.Requests == 0 {
		t.Fatalf("%s: k6 sent no requests", what)
	}
	return r
}

// faults runs each fault under k6 load and reports the failed requests; the target is none.
func (c *cluster) faults(t *testing.T) {
	t.Run("backend-pod-deleted", func(t *testing.T) {
		r := c.underLoad(t, "a backend pod deleted", func() {
			pod := strings.Fields(c.must(t, "", "-n", "default", "get", "pods", "-l", "app=demo-backend", "-o", "jsonpath={.items[0].metadata.name}"))[0]
			c.must(t, "", "-n", "default", "delete", "pod", pod, "--wait=true", "--timeout=60s")
		})
		if r.Failed > 0 {
			t.Errorf("%.0f of %.0f requests failed while a backend pod was deleted", r.Failed, r.Requests)
		}
		c.must(t, "", "-n", "default", "wait", "--for=condition=Available", "deployment/demo-backend", "--timeout=120s")
	})
	t.Run("leader-deleted", func(t *testing.T) {
		r := c.underLoad(t, "the lbplane leader pod deleted", func() {
			leader := strings.TrimSpace(c.must(t, "", "-n", namespace, "get", "lease", "lbplane-status-writer", "-o", "jsonpath={.spec.holderIdentity}"))
			pod, _, _ := strings.Cut(leader, "_")
			if pod == "" {
				t.Fatalf("no leader in Lease lbplane-status-writer: %q", leader)
			}
			c.must(t, "", "-n", namespace, "delete", "pod", pod, "--wait=true", "--timeout=60s")
		})
		if r.Failed > 0 {
			t.Errorf("%.0f of %.0f requests failed while the lbplane leader was deleted", r.Failed, r.Requests)
		}
		c.must(t, "", "-n", namespace, "rollout", "status", "deployment/"+release, "--timeout=180s")
	})
}
