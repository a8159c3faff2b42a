package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConditionTimesSurviveARestart: in standalone mode a policy's conditions keep their lastTransitionTime
// across a restart of lbplane (killed, not stopped), as Kubernetes keeps them in the status it stores; a
// condition that changes after the restart takes the time of its change.
func TestConditionTimesSurviveARestart(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a")
	l := startLbplane(t)
	port := reservePort(t)
	push(t, l, policy(t, dashboardStatsPolicy, map[string]any{"B": bs, "Port": port}))
	conditions := func() map[string]metav1.Condition {
		p, err := l.Client.Get(context.Background(), "default", "stats")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]metav1.Condition{}
		for _, c := range p.Status.Conditions {
			out[c.Type] = c
		}
		return out
	}
	before := conditions()
	if _, ok := before["Accepted"]; !ok || len(before) < 2 {
		t.Fatalf("conditions before the restart: %+v", before)
	}
	// Times are whole seconds: wait until a restart's own time could not be mistaken for them.
	latest := time.Time{}
	for _, c := range before {
		if c.LastTransitionTime.After(latest) {
			latest = c.LastTransitionTime.Time
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !time.Now().After(latest.Add(2 * time.Second)); {
		if time.Now().After(deadline) {
			t.Fatalf("the clock is far behind the conditions' times (%s)", latest)
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.Process.Kill()
	l.Restart(t)
	after := conditions()
	for typ, c := range before {
		a, ok := after[typ]
		if !ok {
			t.Errorf("%s: gone after the restart", typ)
			continue
		}
		if a.Status == c.Status && !a.LastTransitionTime.Equal(&c.LastTransitionTime) {
			t.Errorf("%s (%s): lastTransitionTime %s before the restart, %s after", typ, c.Status, c.LastTransitionTime, a.LastTransitionTime)
		}
	}
	// An Envoy connects and runs the policy: Programmed turns True at a time after the restart.
	restarted := time.Now().Add(-time.Second)
	startEnvoy(t, l, "envoy-times", true)
	eventually(t, 30*time.Second, "Programmed turns True after the restart, at its own time", func() error {
		c, ok := conditions()["Programmed"]
		if !ok || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Programmed: %+v", c)
		}
		if c.LastTransitionTime.Time.Before(restarted.Truncate(time.Second)) {
			return fmt.Errorf("Programmed True since %s, before the restart (%s)", c.LastTransitionTime, restarted)
		}
		return nil
	})
}
