package e2e

// Staged rollouts that one node cannot steer, and that one tenant cannot couple to another's (issue 41,
// findings 4 and 5; issue 49, finding 2): real lbplane, three real Envoys under load, real backends.
//   - A client with a valid node certificate named "attacker" acknowledges its config and serves made-up
//     stats from the stats port it declares: every request failed (to roll a good change back) or none (to
//     pass a bad one).
//   - Tenant A's bad change is rolled back on A's numbers; B's good change, at the same time on the same
//     Envoys, goes on; A's staged pushes every few seconds do not keep B's stage from ending.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// fakeStats serves, on a loopback port, Envoy's /stats/prometheus as an attacker would: for each cluster
// of clusters, a thousand requests more at every read, every one failed when failing says so (read at
// each request), none otherwise; and /clusters with no cluster.
func fakeStats(t *testing.T, clusters []string, failing func() bool) int {
	t.Helper()
	var mu sync.Mutex
	var done, failed int
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/clusters") {
			w.Write([]byte(`{"cluster_statuses":[]}`))
			return
		}
		mu.Lock()
		done += 1000
		if failing() {
			failed += 1000
		}
		d, f := done, failed
		mu.Unlock()
		// As Envoy prints them: each family typed once, then its counters.
		fmt.Fprintln(w, "# TYPE envoy_cluster_upstream_rq_completed counter")
		for _, c := range clusters {
			fmt.Fprintf(w, "envoy_cluster_upstream_rq_completed{envoy_cluster_name=%q} %d\n", c, d)
		}
		fmt.Fprintln(w, "# TYPE envoy_cluster_upstream_rq_xx counter")
		for _, c := range clusters {
			fmt.Fprintf(w, "envoy_cluster_upstream_rq_xx{envoy_response_code_class=\"5\",envoy_cluster_name=%q} %d\n", c, f)
		}
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return lis.Addr().(*net.TCPAddr).Port
}

// rolloutFleet is lbplane with three real Envoys sharing listener ports (SO_REUSEPORT), and backends.
type rolloutFleet struct {
	l                     *Lbplane
	envoys                []*Envoy
	stable, broken, fresh *Backend
}

func startRolloutFleet(t *testing.T, extra ...string) *rolloutFleet {
	t.Helper()
	f := &rolloutFleet{stable: startBackend(t, "stable", 0), broken: startBackend(t, "broken", 0), fresh: startBackend(t, "fresh", 0)}
	f.broken.FailWith(500)
	f.l = startLbplane(t, append([]string{"--proxy-stats-interval", "250ms", "--rollout-canary-min-age", canaryMinAge.String()}, extra...)...)
	for _, n := range []string{"envoy-a", "envoy-b", "envoy-c"} {
		f.envoys = append(f.envoys, startEnvoy(t, f.l, n, true))
	}
	return f
}

// doc is policy name (rolloutPolicy) on port with stable, and extra (weight) when set, baked for bake.
func (f *rolloutFleet) doc(t *testing.T, name string, port int, extra string, weight int, bake string) []byte {
	t.Helper()
	d := map[string]any{"Port": port, "Stable": f.stable.Port, "Bake": bake, "Min": 20, "Extra": extra, "Weight": weight}
	switch extra {
	case "broken":
		d["ExtraPort"] = f.broken.Port
	case "fresh":
		d["ExtraPort"] = f.fresh.Port
	}
	return []byte(strings.Replace(string(policy(t, rolloutPolicy, d)), "metadata: {name: ro}", "metadata: {name: "+name+"}", 1))
}

// serve pushes policy name's first generation at once and puts it under load.
func (f *rolloutFleet) serve(t *testing.T, name string) (*Load, int) {
	t.Helper()
	port := reservePort(t)
	if _, err := f.l.Client.ApplyRollout(context.Background(), f.doc(t, name, port, "", 0, "3s"), false, "immediate"); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitServing(t, url, "stable")
	load := startLoadWith(newClient(false), url, 150, 6, 4*time.Minute)
	t.Cleanup(load.Stop)
	load.WaitServed(t, 100)
	waitEveryEnvoyServesPolicy(t, f.envoys, name)
	return load, port
}

// TestAttackFakeStatsCannotSteerARollout: an "attacker" node serving fake stats from its declared stats port
// neither rolls a good change back nor lets a bad one pass, whether it is drawn a canary or not: with
// three real Envoys and the attacker, each stage has two canaries at least, each Envoy counts once, and
// one that disagrees with the others is flagged, not believed.
func TestAttackFakeStatsCannotSteerARollout(t *testing.T) {
	t.Parallel()
	f := startRolloutFleet(t)
	var lying sync.Mutex
	failing := true
	fake := fakeStats(t, []string{"default/ro/stable", "default/ro/broken", "default/ro/fresh"}, func() bool {
		lying.Lock()
		defer lying.Unlock()
		return failing
	})
	intruderStream(t, f.l, "attacker", "default", fake)
	load, port := f.serve(t, "ro")
	waitSynced(t, f.l, 4)
	waitSettledFor(t, f.l, 4)

	t.Run("a good change is not rolled back by fake errors", func(t *testing.T) {
		push(t, f.l, f.doc(t, "ro", port, "fresh", 1, "3s"))
		var canaries [][]string
		eventually(t, 90*time.Second, "the good change succeeded", func() error {
			r := rolloutOf(t, f.l)
			if len(r.Rollout.Canaries) > 0 && (len(canaries) == 0 || !slices.Equal(canaries[len(canaries)-1], r.Rollout.Canaries)) {
				canaries = append(canaries, r.Rollout.Canaries)
			}
			switch r.Rollout.Phase {
			case v1alpha1.RolloutSucceeded:
				return nil
			case v1alpha1.RolloutProgressing:
				return fmt.Errorf("stage %d: %s", r.Rollout.Stage, r.Rollout.Message)
			}
			t.Fatalf("the good change ended %s: %s (canaries %v)", r.Rollout.Phase, r.Rollout.Message, canaries)
			return nil
		})
		r := rolloutOf(t, f.l)
		t.Logf("canaries over the rollout: %v; flagged %v; %s; lbplane: %s", canaries, r.Rollout.Flagged, r.Rollout.Message,
			logLines(t, f.l.Process, "rollout started"))
		if !slices.Contains(r.Rollout.Flagged, "attacker") {
			t.Errorf("the attacker's fake errors were not flagged: %+v", r.Rollout)
		}
		if len(canaries) == 0 || len(canaries[0]) < 2 {
			t.Errorf("the first stage had canaries %v; want two at least", canaries)
		}
	})

	t.Run("a bad change is not passed by fake successes", func(t *testing.T) {
		lying.Lock()
		failing = false
		lying.Unlock()
		okBefore, failedBefore := load.OK.Load(), load.Failed.Load()
		push(t, f.l, f.doc(t, "ro", port, "broken", 3, "3s"))
		first := rolloutOf(t, f.l).Rollout.Canaries
		r := waitPhase(t, f.l, v1alpha1.RolloutRolledBack, 60*time.Second)
		t.Logf("first canaries %v; rolled back: %s (flagged %v)", first, r.Rollout.Message, r.Rollout.Flagged)
		if slices.Contains(first, "attacker") != slices.Contains(r.Rollout.Flagged, "attacker") {
			t.Errorf("the attacker was a canary (%v) but not flagged, or flagged without being one: %v", first, r.Rollout.Flagged)
		}
		if r.Rollout.Canary == nil || r.Rollout.Canary.ErrorRate < 0.3 {
			t.Errorf("the canaries' numbers judged are not the real Envoys': %+v", r.Rollout.Canary)
		}
		waitHeldBy(t, f.envoys, "broken", nil)
		ok, failed := load.OK.Load()-okBefore, load.Failed.Load()-failedBefore
		t.Logf("during the bad rollout: %d of %d real requests failed", failed, ok+failed)
		noFailuresOver(t, load, 150, "requests failed after the rollback")
	})
}

// TestAttackTenantRolloutsAreApart: tenant A's bad change and tenant B's good change, staged at the same
// time in the same proxy group: A's is rolled back on A's numbers, B's goes on with B's own; then A's staged
// pushes every two seconds do not keep B's six-second stage from ending.
func TestAttackTenantRolloutsAreApart(t *testing.T) {
	t.Parallel()
	f := startRolloutFleet(t)
	loadA, portA := f.serve(t, "tenant-a")
	_, portB := f.serve(t, "tenant-b")
	waitSettledFor(t, f.l, 3)

	t.Run("A's bad change does not roll B's good change back", func(t *testing.T) {
		push(t, f.l, f.doc(t, "tenant-a", portA, "broken", 3, "3s"))
		push(t, f.l, f.doc(t, "tenant-b", portB, "fresh", 1, "3s"))
		a := waitRollout(t, f.l, "tenant-a", v1alpha1.RolloutRolledBack, 60*time.Second)
		b := waitRollout(t, f.l, "tenant-b", v1alpha1.RolloutSucceeded, 90*time.Second)
		t.Logf("A: %s; B: %s", a.Rollout.Message, b.Rollout.Message)
		if a.Rollout.Canary == nil || a.Rollout.Canary.ErrorRate < 0.3 {
			t.Errorf("A's rollback: %+v", a.Rollout.Canary)
		}
		if b.Rollout.Canary == nil || b.Rollout.Canary.ErrorRate > 0.05 || strings.Contains(b.Rollout.Message, "tenant-a") {
			t.Errorf("B's numbers carry A's: %+v, %s", b.Rollout.Canary, b.Rollout.Message)
		}
		eventually(t, 10*time.Second, "every Envoy has B's fresh backend and none A's broken one", func() error {
			for _, e := range f.envoys {
				dump := e.ConfigDump(t)
				if !strings.Contains(dump, "/tenant-b/fresh") || strings.Contains(dump, "/tenant-a/broken") {
					return fmt.Errorf("%s: B's fresh %v, A's broken %v", e.NodeID, strings.Contains(dump, "/tenant-b/fresh"), strings.Contains(dump, "/tenant-a/broken"))
				}
			}
			return nil
		})
		noFailuresOver(t, loadA, 150, "of A's requests failed after its rollback")
	})

	t.Run("A's pushes every two seconds do not hold B's stage", func(t *testing.T) {
		push(t, f.l, f.doc(t, "tenant-b", portB, "", 0, "6s"))
		start := time.Now()
		// A good change of A's each time: the weight of fresh moves between 1 and 2.
		docsA := [][]byte{f.doc(t, "tenant-a", portA, "fresh", 1, "3s"), f.doc(t, "tenant-a", portA, "fresh", 2, "3s")}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for i := 0; i < 40; i++ { // bounded: at most 80 s
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := f.l.Client.ApplyRollout(context.Background(), docsA[i%2], false, "staged"); err != nil {
					return
				}
			}
		}()
		b := waitRollout(t, f.l, "tenant-b", v1alpha1.RolloutSucceeded, 60*time.Second)
		close(stop)
		wg.Wait()
		a := rolloutNamed(t, f.l, "tenant-a")
		t.Logf("B succeeded %s after its push (%s); A meanwhile at generation %d: %s", time.Since(start).Round(time.Millisecond), b.Rollout.Message,
			a.Rollout.CandidateGeneration, a.Rollout.Message)
		if a.Rollout.CandidateGeneration < 5 {
			t.Errorf("A was pushed only up to generation %d while B baked", a.Rollout.CandidateGeneration)
		}
	})
}

// logLines are the lines of p's log that contain substr.
func logLines(t *testing.T, p *Process, substr string) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
