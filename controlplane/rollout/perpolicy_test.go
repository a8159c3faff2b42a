package rollout

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// fleet is a controller over a real engine, a group of Envoys and the stats each serves: traffic[node]
// [cluster] is what that node's stats port says it served since the stage began (requests, errors).
type fleet struct {
	t       *testing.T
	c       *Controller
	eng     *engine.Engine
	cache   *xdscache.Cache
	proxies []xdsserver.ProxyStatus
	traffic map[string]map[string][2]uint64
	// from is when the stats read began: every window starts there.
	from     time.Time
	policies map[string]*v1alpha1.LoadBalancerPolicy
	gen      map[string]int64
	// behind are the nodes that do not acknowledge what they are served; the others acknowledge it, at
	// ackAt (zero: when they connected, before any stage began).
	behind map[string]bool
	ackAt  time.Time
}

// acked are f's Envoys, each having acknowledged the config it is served unless it is behind.
func (f *fleet) acked() []xdsserver.ProxyStatus {
	for i, p := range f.proxies {
		if !f.behind[p.NodeID] {
			f.proxies[i].Version, f.proxies[i].AckedAt = f.cache.TargetFor(p.Group, p.NodeID).Version, p.ConnectedAt
			if !f.ackAt.IsZero() {
				f.proxies[i].AckedAt = f.ackAt
			}
		}
	}
	return f.proxies
}

func newFleet(t *testing.T, nodes ...string) *fleet {
	f := &fleet{t: t, cache: xdscache.New(), traffic: map[string]map[string][2]uint64{}, policies: map[string]*v1alpha1.LoadBalancerPolicy{},
		gen: map[string]int64{}, behind: map[string]bool{}}
	f.eng = engine.New(f.cache, slog.New(slog.DiscardHandler))
	for _, n := range nodes {
		f.proxies = append(f.proxies, proxy(n, "default"))
	}
	f.c = &Controller{Engine: f.eng, Persist: newMem(), Log: slog.New(slog.DiscardHandler), MinCanaryAge: time.Minute,
		Proxies:   f.acked,
		Histories: f.histories}
	return f
}

// spec is policy name's generation with its backend on port.
func spec(name string, gen int64, port int32) *v1alpha1.LoadBalancerPolicy {
	return &v1alpha1.LoadBalancerPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: gen},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8000 + int32(len(name)), Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{name + ".example.com"}},
			Backends: []v1alpha1.Backend{{Name: "app", Endpoints: []v1alpha1.Endpoint{{Address: "198.51.100.10", Port: port}}}},
			Rollout:  &v1alpha1.Rollout{BakeTime: &metav1.Duration{Duration: 10 * time.Second}, Analysis: &v1alpha1.RolloutAnalysis{MinRequests: ptr(int64(100))}},
		},
	}
}

// record is p as a source hands it to rollouts: a copy of its own, not modified afterwards.
func record(p *v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicy {
	if p == nil {
		return nil
	}
	return p.DeepCopy()
}

// push stages policy name's next generation (its backend on port) and publishes it.
func (f *fleet) push(name string, port int32, edit func(*v1alpha1.LoadBalancerPolicy)) {
	f.t.Helper()
	old := f.policies[name]
	f.gen[name]++
	next := spec(name, f.gen[name], port)
	if edit != nil {
		edit(next)
	}
	if old != nil {
		if _, err := f.c.Begin([]Change{{Key: objkey.Of(next), Group: "default", Old: record(old), New: record(next), Generation: next.Generation, Rollout: next.Spec.Rollout}}); err != nil {
			f.t.Fatal(err)
		}
	}
	f.policies[name] = next
	var all []*v1alpha1.LoadBalancerPolicy
	for _, p := range f.policies {
		all = append(all, p)
	}
	f.eng.Set(engine.SourceStore, all)
}

func (f *fleet) histories() []proxystats.History {
	var out []proxystats.History
	for _, p := range f.proxies {
		end := map[string]*proxystats.Cluster{}
		for cluster, n := range f.traffic[p.NodeID] {
			end[cluster] = &proxystats.Cluster{Counters: proxystats.Counters{Completed: n[0], Errors5xx: n[1]}}
		}
		out = append(out, proxystats.History{Node: p.NodeID, Group: p.Group, Samples: []*proxystats.Sample{
			{At: f.from, Clusters: map[string]*proxystats.Cluster{}}, {At: f.from.Add(time.Second), Clusters: end}}})
	}
	return out
}

// serve has node serve requests with errors on policy name's cluster (from the stage's start).
func (f *fleet) serve(node, name string, requests, errors uint64) {
	if f.traffic[node] == nil {
		f.traffic[node] = map[string][2]uint64{}
	}
	f.traffic[node]["default/"+name+"/app"] = [2]uint64{requests, errors}
}

// judge starts a new stats window at the stage's start and looks at the rollouts after the bake.
func (f *fleet) judge(name string) *v1alpha1.RolloutStatus {
	f.t.Helper()
	st := f.status(name)
	f.from = st.StageStarted.Time
	f.c.step(st.StageStarted.Add(11 * time.Second))
	return f.status(name)
}

func (f *fleet) status(name string) *v1alpha1.RolloutStatus {
	f.t.Helper()
	st := f.c.Status(objkey.Key{Namespace: "default", Name: name})
	if st == nil {
		f.t.Fatalf("no rollout of %s", name)
	}
	return st
}

// order makes the group's canary order the one given (the controller draws it at random).
func (f *fleet) order(nodes ...string) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	g := f.c.byGroup["default"]
	g.Order = nodes
	for _, p := range g.Policies {
		if p.underWay() {
			f.c.place(g, p, g.present(nodesOf(f.proxies, "default"), time.Now()))
		}
	}
	if err := f.c.apply(g); err != nil {
		f.t.Fatal(err)
	}
}

// Tenant A's bad change is rolled back on A's numbers alone; tenant B's good change, under way at the same
// time on shared canaries, goes on with B's own numbers; A's pushes meanwhile never reset B's stage.
func TestRolloutsArePerPolicy(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3", "n4", "n5")
	f.push("a", 80, nil)
	f.push("b", 80, nil)
	f.push("b", 81, nil) // B's good change
	b := f.status("b")
	if b.Phase != v1alpha1.RolloutProgressing || len(b.Canaries) != 2 {
		t.Fatalf("b's rollout: %+v", b)
	}
	started := b.StageStarted
	// A is pushed again and again while B bakes: B's stage is untouched.
	for i := range 3 {
		f.push("a", int32(90+i), nil)
	}
	if got := f.status("b"); !got.StageStarted.Equal(started) || got.Stage != 1 || !slices.Equal(got.Canaries, b.Canaries) {
		t.Fatalf("a's pushes moved b's rollout: %+v, before %+v", got, b)
	}
	a := f.status("a")
	if a.CandidateGeneration != 4 || a.Stage != 1 {
		t.Fatalf("a's rollout: %+v", a)
	}
	// The canaries are prefixes of one order: a's are b's (both at stage 1).
	if !slices.Equal(a.Canaries, b.Canaries) {
		t.Errorf("a's canaries %v and b's %v at the same stage differ", a.Canaries, b.Canaries)
	}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		aErr := uint64(0)
		if slices.Contains(a.Canaries, n) {
			aErr = 200 // A's bad change fails on its canaries
		}
		f.serve(n, "a", 200, aErr)
		f.serve(n, "b", 200, 1)
	}
	// The stats read from a's stage start on (after b's): both windows begin there.
	f.from = a.StageStarted.Time
	f.c.step(a.StageStarted.Add(11 * time.Second))
	if got := f.status("a"); got.Phase != v1alpha1.RolloutRolledBack || got.Canary == nil || got.Canary.ErrorRate != 1 {
		t.Errorf("a's bad change: %+v", got)
	}
	got := f.status("b")
	if got.Phase != v1alpha1.RolloutProgressing || got.Stage != 3 || got.Canary == nil || got.Canary.ErrorRate != 0.005 || got.Baseline.ErrorRate != 0.005 {
		t.Errorf("b's good change after a's rollback: %+v (canary %+v)", got, got.Canary)
	}
	if !strings.Contains(got.Message, "stage 1 passed") || !strings.Contains(got.Message, "skipped") {
		t.Errorf("b's message: %s", got.Message)
	}
	// An operator's abort of b leaves a as it was.
	if err := f.c.Action(objkey.Key{Namespace: "default", Name: "b"}, "abort"); err != nil {
		t.Fatal(err)
	}
	if got := f.status("a"); got.Phase != v1alpha1.RolloutRolledBack || got.CandidateGeneration != 4 {
		t.Errorf("a after b's abort: %+v", got)
	}
}

// Envoys that settle after a rollout started become its canaries then.
func TestCanariesJoinOnceSettled(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3")
	for i := range f.proxies {
		f.proxies[i].ConnectedAt = time.Now()
	}
	f.push("a", 80, nil)
	f.push("a", 81, nil)
	if st := f.status("a"); len(st.Canaries) != 0 || !strings.Contains(st.Message, "waiting for Envoys connected") {
		t.Fatalf("with no settled Envoy: %+v", st)
	}
	f.c.step(time.Now().Add(2 * time.Minute))
	if st := f.status("a"); len(st.Canaries) != 2 {
		t.Fatalf("once they settled: %+v", st)
	}
}

// A version pushed at once after a rollback takes the policy out of its rollout, and no Envoy is served the
// rolled-back candidate meanwhile: the Envoys keep the baseline until the new version is published.
func TestAnImmediatePushAfterARollbackNeverServesTheCandidate(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3")
	f.push("a", 80, nil)
	f.push("a", 81, nil)
	k := objkey.Key{Namespace: "default", Name: "a"}
	if err := f.c.Action(k, "abort"); err != nil {
		t.Fatal(err)
	}
	endpoints := func(node string) string {
		v, ok := f.cache.TargetFor("default", node).ResourceVersion(resource.EndpointType, "default/a/app")
		if !ok {
			t.Fatalf("%s has no endpoints of a", node)
		}
		return v
	}
	baseline := endpoints("n1")
	if err := f.c.Unstage([]objkey.Key{k}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if endpoints(n) != baseline {
			t.Errorf("%s is served the rolled-back candidate before the new version is published", n)
		}
	}
	f.gen["a"]++
	f.policies["a"] = spec("a", f.gen["a"], 82)
	f.eng.Set(engine.SourceStore, []*v1alpha1.LoadBalancerPolicy{f.policies["a"]})
	if got := f.eng.Splits(); len(got) != 0 {
		t.Errorf("still split: %v", got)
	}
	if endpoints("n2") == baseline {
		t.Error("the new version did not reach the Envoys")
	}
}

// A rollout that ended is not written again while nothing happens: the order is drawn when one starts.
func TestEndedRolloutsAreNotWrittenAgain(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3")
	f.push("a", 80, nil)
	f.push("a", 81, nil)
	if err := f.c.Action(objkey.Key{Namespace: "default", Name: "a"}, "abort"); err != nil {
		t.Fatal(err)
	}
	mem := f.c.Persist.(*memPersist)
	rev := mem.revs["default"]
	for i := range 10 {
		f.c.step(time.Now().Add(time.Duration(i) * time.Second))
	}
	if mem.revs["default"] != rev {
		t.Errorf("the group's record was written %d times with nothing under way", mem.revs["default"]-rev)
	}
}

// With three Envoys a stage before the last takes two, and the default 25 % stage, which would add none,
// is skipped: every stage adds Envoys.
func TestEveryStageAddsEnvoys(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3")
	f.push("a", 80, nil)
	f.push("a", 81, nil)
	st := f.status("a")
	if len(st.Canaries) != 2 || st.Stages != 3 {
		t.Fatalf("stage 1 with three Envoys: %+v", st)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		f.serve(n, "a", 200, 0)
	}
	st = f.judge("a")
	if st.Stage != 3 || len(st.Canaries) != 3 || !strings.Contains(st.Message, "1 stage(s) skipped") {
		t.Fatalf("after stage 1: %+v", st)
	}
	st = f.judge("a")
	if st.Phase != v1alpha1.RolloutSucceeded {
		t.Fatalf("after the last stage: %+v", st)
	}
}

// Canaries are drawn at random among the Envoys connected and acknowledging for MinCanaryAge with a stats
// port: one just connected, one without a stats port, and one rejecting config are never chosen.
func TestCanariesAreDrawnAtRandomAmongSettledEnvoys(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3", "n4")
	fresh, noStats, nacking := proxy("fresh", "default"), proxy("nostats", "default"), proxy("nacking", "default")
	fresh.ConnectedAt = time.Now().Add(-10 * time.Second)
	noStats.StatsPort = 0
	nacking.State = xdsserver.Nacked
	f.proxies = append(f.proxies, fresh, noStats, nacking)
	f.push("a", 80, nil)
	seen := map[string]int{}
	for i := range 200 {
		f.push("a", int32(81+i%2), nil)
		st := f.status("a")
		if len(st.Canaries) != 2 {
			t.Fatalf("push %d: canaries %v", i, st.Canaries)
		}
		for _, n := range st.Canaries {
			seen[n]++
		}
		// Ended, so that the next push draws the order again.
		if err := f.c.Action(objkey.Key{Namespace: "default", Name: "a"}, "abort"); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		// Each is drawn half the time: never (or always) in 200 draws is a one in 2^200 chance.
		if seen[n] == 0 || seen[n] == 200 {
			t.Errorf("%s was a canary %d times in 200 rollouts", n, seen[n])
		}
	}
	for _, n := range []string{"fresh", "nostats", "nacking"} {
		if seen[n] > 0 {
			t.Errorf("%s was a canary %d times", n, seen[n])
		}
	}
}

// The attack of a node that serves fake stats from the stats port it declares: as one of two canaries it
// makes them disagree, and the stage takes one more canary; the majority decides and it is flagged, a good
// change passing and a bad one rolled back.
func TestAFakingCanaryDecidesNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bad       bool
		fakeTotal uint64
		fakeErrs  uint64
	}{
		{"good change, fake errors", false, 18060, 18060},
		{"bad change, fake success", true, 199504, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, "attacker", "n1", "n2", "n3")
			f.push("a", 80, nil)
			f.push("a", 81, nil)
			f.order("attacker", "n1", "n2", "n3")
			if st := f.status("a"); !slices.Equal(st.Canaries, []string{"attacker", "n1"}) {
				t.Fatalf("canaries %v", st.Canaries)
			}
			serve := func() {
				for _, n := range []string{"n1", "n2", "n3"} {
					var errs uint64
					if tc.bad && slices.Contains(f.status("a").Canaries, n) {
						errs = 200
					}
					f.serve(n, "a", 200, errs)
				}
				f.serve("attacker", "a", tc.fakeTotal, tc.fakeErrs)
			}
			serve()
			st := f.judge("a")
			if st.Phase != v1alpha1.RolloutProgressing || st.Stage != 1 || len(st.Canaries) != 3 || !slices.Contains(st.Flagged, "attacker") ||
				!strings.Contains(st.Message, "disagree") {
				t.Fatalf("after the first bake: %+v", st)
			}
			serve()
			st = f.judge("a")
			want := v1alpha1.RolloutProgressing
			if tc.bad {
				want = v1alpha1.RolloutRolledBack
			}
			if st.Phase != want || !strings.Contains(st.Message, "attacker") || !strings.Contains(st.Message, "not believed") {
				t.Fatalf("after the second bake: %s, want %s: %s", st.Phase, want, st.Message)
			}
			if !tc.bad && st.Stage != 3 {
				t.Errorf("the good change did not go on: %+v", st)
			}
		})
	}
}

// The same node among the other Envoys, faking errors to hide a bad change's, or fewer errors than the
// canaries' to sink a good one: the reference is the lower of two that disagree, so the lie can only make
// the verdict stricter, and a good change is rolled back only if the service's own error rate is above
// maxErrorRateIncrease.
func TestAFakingBaselineEnvoyHidesNothing(t *testing.T) {
	for _, bad := range []bool{true, false} {
		f := newFleet(t, "attacker", "n1", "n2", "n3")
		f.push("a", 80, nil)
		f.push("a", 81, nil)
		f.order("n1", "n2", "attacker", "n3")
		for _, n := range []string{"n1", "n2", "n3"} {
			errs := uint64(1)
			if bad && n != "n3" {
				errs = 200
			}
			f.serve(n, "a", 200, errs)
		}
		if bad {
			f.serve("attacker", "a", 1000000, 1000000)
		} else {
			f.serve("attacker", "a", 1000000, 0)
		}
		st := f.judge("a")
		want := v1alpha1.RolloutProgressing
		if bad {
			want = v1alpha1.RolloutRolledBack
		}
		if st.Phase != want || (bad && (!slices.Contains(st.Flagged, "attacker") || !strings.Contains(st.Message, "compared with the lowest"))) {
			t.Errorf("bad change %v: %s, want %s: %s (flagged %v)", bad, st.Phase, want, st.Message, st.Flagged)
		}
	}
}

// A canary stage with no request at all holds, or rolls back, as analysis.noTraffic says, and says so.
func TestNoTraffic(t *testing.T) {
	for _, mode := range []string{v1alpha1.NoTrafficHold, v1alpha1.NoTrafficRollBack} {
		f := newFleet(t, "n1", "n2", "n3")
		f.push("a", 80, nil)
		f.push("a", 81, func(p *v1alpha1.LoadBalancerPolicy) { p.Spec.Rollout.Analysis.NoTraffic = mode })
		st := f.judge("a")
		want := v1alpha1.RolloutProgressing
		if mode == v1alpha1.NoTrafficRollBack {
			want = v1alpha1.RolloutRolledBack
		}
		if st.Phase != want || !strings.Contains(st.Message, "served no request") || !strings.Contains(st.Message, "noTraffic: "+mode) {
			t.Errorf("noTraffic %s: %s: %s", mode, st.Phase, st.Message)
		}
	}
}

// Most canaries rejecting the config roll back at once; one of two is judged with the others (an Envoy
// cannot reject a good change away).
func TestRejectionsAreCounted(t *testing.T) {
	nack := func(p *xdsserver.ProxyStatus) {
		p.Types = []xdsserver.TypeStatus{{TypeURL: "type.googleapis.com/envoy.config.listener.v3.Listener", Nacked: true, NackMessage: "bind failed",
			NackedAt: time.Now().Add(time.Second), NackedResources: []string{"l"}, NackedPolicies: []apiwire.PolicyRef{{Namespace: "default", Name: "a"}}}}
	}
	f := newFleet(t, "n1", "n2", "n3", "n4")
	f.push("a", 80, nil)
	f.push("a", 81, nil)
	f.order("n1", "n2", "n3", "n4")
	nack(&f.proxies[0])
	f.c.step(time.Now())
	if st := f.status("a"); st.Phase != v1alpha1.RolloutProgressing {
		t.Fatalf("one canary of two rejected the config: %+v", st)
	}
	nack(&f.proxies[1])
	f.c.step(time.Now())
	if st := f.status("a"); st.Phase != v1alpha1.RolloutRolledBack || !strings.Contains(st.Message, "canaries n1, n2 rejected the config") {
		t.Fatalf("both canaries rejected the config: %+v", st)
	}
}

// A record an earlier version stored (one rollout for the whole group) is read as a rollout per policy.
func TestLegacyRecordIsReadPerPolicy(t *testing.T) {
	started := time.Date(2026, 11, 27, 3, 10, 0, 0, time.UTC)
	legacy := fmt.Sprintf(`{"group":"default","policies":[{"namespace":"default","name":"a","candidateGeneration":7,"baseline":{"namespace":"default","name":"a","generation":6}},
		{"namespace":"default","name":"b","candidateGeneration":3}],"settings":{"stages":[{"envoys":1},{"percent":100}],"bakeTime":"30s"},
		"stage":1,"phase":"Progressing","stageStarted":%q,"canaries":["envoy-b"],"message":"m"}`, started.Format(time.RFC3339))
	g, err := decodeGroup([]byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	if g.Version != stateVersion || !slices.Equal(g.Order, []string{"envoy-b"}) || len(g.Policies) != 2 {
		t.Fatalf("decoded %+v", g)
	}
	for _, p := range g.Policies {
		if p.Phase != v1alpha1.RolloutProgressing || p.Stage != 1 || !p.StageStarted.Equal(started) || !slices.Equal(p.Canaries, []string{"envoy-b"}) ||
			len(p.Settings.Stages) != 2 || p.Settings.BakeTime.Duration != 30*time.Second || p.Settings.Analysis == nil {
			t.Errorf("policy %s: %+v", p.Name, p)
		}
	}
	if g.Policies[0].Baseline == nil || g.Policies[0].Baseline.Generation != 6 || g.Policies[0].CandidateGeneration != 7 {
		t.Errorf("policy a's generations: %+v", g.Policies[0].PolicyRef)
	}
}

// While Envoys reconnect (every one does after lbplane restarts) the fleet looks smaller than the stage was
// counted on: the canaries still at the head of the order stay canaries, none flips back to the baseline.
func TestCanariesStayWhileTheFleetReconnects(t *testing.T) {
	f := newFleet(t, "n1", "n2", "n3")
	f.push("a", 80, nil)
	f.push("a", 81, nil)
	f.order("n1", "n2", "n3")
	if st := f.status("a"); !slices.Equal(st.Canaries, []string{"n1", "n2"}) {
		t.Fatalf("stage 1 of three Envoys: canaries %v, want [n1 n2]", st.Canaries)
	}
	all := f.proxies
	f.proxies = []xdsserver.ProxyStatus{all[1]} // n2 is back first; n1 and n3 are still reconnecting
	f.c.step(time.Now())
	if st := f.status("a"); !slices.Equal(st.Canaries, []string{"n1", "n2"}) {
		t.Errorf("with n1 and n3 reconnecting: canaries %v, want [n1 n2] kept", st.Canaries)
	}
	f.proxies = all
	f.c.step(time.Now())
	if st := f.status("a"); !slices.Equal(st.Canaries, []string{"n1", "n2"}) {
		t.Errorf("every Envoy back: canaries %v, want [n1 n2]", st.Canaries)
	}
}
