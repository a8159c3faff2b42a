package pushapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/rollout"
)

// rolloutDoc is a policy with two routes' worth of backends; shift, when set, asks for a traffic shift to b.
func rolloutDoc(name, weightB string, shift bool) string {
	extra := ""
	if shift {
		extra = "\n  rollout: {trafficShift: {backend: b}}"
	}
	return `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: ` + name + `}
spec:
  listener: {port: 8080, protocol: HTTP, hostnames: [` + name + `.example.com]}` + extra + `
  routes: [{name: all, backends: [{name: a}, {name: b, weight: ` + weightB + `}]}]
  backends:
    - {name: a, endpoints: [{address: 10.0.0.1, port: 80}]}
    - {name: b, endpoints: [{address: 10.0.0.2, port: 80}]}
`
}

func TestPushesStageAsAsked(t *testing.T) {
	var ro *rollout.Controller
	s, url, _ := pushapitest.Start(t, "secret", func(s *pushapi.Server) {
		ro = &rollout.Controller{Engine: s.Engine, Proxies: s.Tracker.Proxies, Persist: s.Store.(rollout.Persist)}
		s.Rollouts = ro
	})
	c := &pushapi.Client{BaseURL: url, Token: "secret"}
	ctx := context.Background()
	if _, err := c.ApplyRollout(ctx, []byte(rolloutDoc("p", "0", false)+"---\n"+rolloutDoc("q", "0", false)), false, ""); err != nil {
		t.Fatal(err)
	}
	// Settled: no rollout, as kubectl rollout status answers a Deployment that has none under way.
	if r, err := c.Rollout(ctx, "default", "p"); err != nil || r.Rollout.Phase != "" || r.Rollout.CandidateGeneration != 1 {
		t.Fatalf("a push without stages: %+v, %v", r, err)
	}

	// Asked by the push: a rollout of generation 2 over 1.
	if _, err := c.ApplyRollout(ctx, []byte(rolloutDoc("p", "1", false)), false, "staged"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Rollout(ctx, "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	if r.Rollout.Phase != v1alpha1.RolloutProgressing || r.Rollout.CandidateGeneration != 2 || r.Rollout.BaselineGeneration != 1 || r.Rollout.Stages != 3 {
		t.Errorf("staged push: %+v", r.Rollout)
	}
	if got := s.Engine.Splits(); len(got) != 1 || got[0] != "default" {
		t.Errorf("split groups: %v", got)
	}

	// A traffic shift of q while p's rollout is under way in the same group: a rollout of its own.
	if _, err := c.ApplyRollout(ctx, []byte(rolloutDoc("q", "1", true)), false, ""); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Rollout(ctx, "default", "q"); err != nil || r.Rollout.TrafficBackend != "b" || r.Rollout.Phase != v1alpha1.RolloutProgressing {
		t.Errorf("q's traffic shift: %+v, %v", r, err)
	}
	if r, _ := c.Rollout(ctx, "default", "p"); r.Rollout.CandidateGeneration != 2 || r.Rollout.Phase != v1alpha1.RolloutProgressing || r.Rollout.TrafficBackend != "" {
		t.Errorf("p's rollout after q's shift began: %+v", r.Rollout)
	}
	// A staged push of q during its traffic shift: refused, naming it and the way out.
	_, err = c.ApplyRollout(ctx, []byte(rolloutDoc("q", "2", false)), false, "staged")
	if e := apiErr(t, err); e.Status != http.StatusConflict || !strings.Contains(e.Error(), "default/q") || !strings.Contains(e.Error(), "abort") {
		t.Errorf("a staged push during a traffic shift: %v", err)
	}
	// Nothing was written: q is still generation 2.
	if p, err := c.Get(ctx, "default", "q"); err != nil || p.Generation != 2 {
		t.Errorf("q after the refused push: generation %d, %v", p.Generation, err)
	}

	// Abort, then undo: generation 3 is generation 1's spec, everywhere, and the rollout is over.
	if _, err := c.RolloutAction(ctx, "default", "p", "abort"); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Rollout(ctx, "default", "p"); r.Rollout.Phase != v1alpha1.RolloutAborted {
		t.Errorf("after abort: %+v", r.Rollout)
	}
	p, _ := c.Get(ctx, "default", "p")
	if !strings.Contains(conditionTypes(p), v1alpha1.ConditionRolledBack) {
		t.Errorf("no RolledBack condition after abort: %+v", p.Status.Conditions)
	}
	if _, err := c.RolloutAction(ctx, "default", "p", "undo"); err != nil {
		t.Fatal(err)
	}
	p, _ = c.Get(ctx, "default", "p")
	if p.Generation != 3 || p.Spec.Routes[0].Backends[1].Weight == nil || *p.Spec.Routes[0].Backends[1].Weight != 0 {
		t.Errorf("after undo: generation %d, routes %+v", p.Generation, p.Spec.Routes)
	}
	if r, err := c.Rollout(ctx, "default", "p"); err != nil || r.Rollout.Phase != "" || r.Rollout.CandidateGeneration != 3 {
		t.Errorf("after undo: %+v, %v", r, err)
	}
	// q's shift is still under way, alone in the group's split.
	if r, _ := c.Rollout(ctx, "default", "q"); r.Rollout.Phase != v1alpha1.RolloutProgressing {
		t.Errorf("q's traffic shift after p's undo: %+v", r.Rollout)
	}
	if _, err := c.ApplyRollout(ctx, []byte(rolloutDoc("q", "2", false)), false, "immediate"); err != nil {
		t.Fatal(err)
	}
	if got := s.Engine.Splits(); len(got) != 0 {
		t.Errorf("split groups after undo and an immediate push: %v", got)
	}
	// Unknown actions and modes are refused with the reason.
	if _, err := c.RolloutAction(ctx, "default", "q", "pause"); apiErr(t, err).Status != http.StatusNotFound {
		t.Errorf("pause without a rollout: %v", err)
	}
	if _, err := c.ApplyRollout(ctx, []byte(rolloutDoc("q", "2", false)), false, "canary"); apiErr(t, err).Status != http.StatusBadRequest {
		t.Errorf("an unknown rollout mode: %v", err)
	}
}

func conditionTypes(p *v1alpha1.LoadBalancerPolicy) string {
	var out []string
	for _, c := range p.Status.Conditions {
		out = append(out, c.Type)
	}
	return strings.Join(out, ",")
}
