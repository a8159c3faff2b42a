package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

func TestKubeMode(t *testing.T) {
	pol := func(gen int64, withRollout bool, mode string) *v1alpha1.LoadBalancerPolicy {
		p := &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		if withRollout {
			p.Spec.Rollout = &v1alpha1.Rollout{}
		}
		if mode != "" {
			p.Annotations = map[string]string{apiwire.RolloutModeAnnotation: mode}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.LoadBalancerPolicy
		def  string
		want string
	}{
		{"no spec.rollout, immediate default", pol(2, false, ""), rollout.ModeImmediate, rollout.ModeImmediate},
		{"no spec.rollout, no default", pol(2, false, ""), "", rollout.ModeImmediate},
		{"no spec.rollout, --rollout-default staged", pol(2, false, ""), rollout.ModeStaged, rollout.ModeStaged},
		{"spec.rollout", pol(2, true, ""), rollout.ModeImmediate, rollout.ModeStaged},
		{"undo: immediate for this generation", pol(5, true, "5"), rollout.ModeStaged, rollout.ModeImmediate},
		{"an undo's annotation kept by a later apply", pol(6, true, "5"), "", rollout.ModeStaged},
	} {
		if got := kubeMode(tc.p, tc.def); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A replica publishes of its Envoys what the others need, within a bound, and says how many it left out.
func TestProxiesReport(t *testing.T) {
	var ps []xdsserver.ProxyStatus
	for i := range 100 {
		ps = append(ps, xdsserver.ProxyStatus{NodeID: fmt.Sprintf("envoy-%03d", i), Group: "default", StatsPort: 9000 + i, Authenticated: true,
			Types: []apiwire.TypeStatus{{TypeURL: "cds", SentVersion: "v1", AckedVersion: "v1"}, {TypeURL: "lds", Nacked: true, NackMessage: "bad port"}}})
	}
	b, left := proxiesReport(ps, 1<<20)
	var got []xdsserver.ProxyStatus
	if err := json.Unmarshal(b, &got); err != nil || left != 0 || len(got) != 100 {
		t.Fatalf("%d proxies, %d left out, %v", len(got), left, err)
	}
	if p := got[7]; p.NodeID != "envoy-007" || p.StatsPort != 9007 || !p.Authenticated || len(p.Types) != 1 || p.Types[0].NackMessage != "bad port" {
		t.Errorf("published %+v", p)
	}
	b, left = proxiesReport(ps, 4096)
	if err := json.Unmarshal(b, &got); err != nil || len(b) > 4096 || left == 0 || len(got)+left != 100 {
		t.Errorf("bounded to 4096 bytes: %d bytes, %d proxies, %d left out, %v", len(b), len(got), left, err)
	}
}

// A replica builds the report it publishes again only when its Envoys' state or the targets moved: with
// nothing happening, every interval hands back the report already built.
func TestProxiesReportBuiltOnlyOnChange(t *testing.T) {
	cache := xdscache.New()
	f := &fleetProxies{tracker: xdsserver.NewTracker(cache, slog.New(slog.NewTextHandler(io.Discard, nil))), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	report := f.reporter()
	first := report()
	if string(first) != "[]" {
		t.Fatalf("no Envoy: %s", first)
	}
	if again := report(); unsafe.SliceData(again) != unsafe.SliceData(first) {
		t.Error("the report was built again with nothing changed")
	}
	s, err := xdscache.NewState(map[string][]proto.Message{resource.ClusterType: {&clusterv3.Cluster{Name: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	cache.Publish("g", s)
	if next := report(); unsafe.SliceData(next) == unsafe.SliceData(first) {
		t.Error("the report was not built again after a group got a new target")
	}
}

// While config is on its way to the Envoys a change has moved the generation, but the report is not built
// in the middle of the change: it is built once the change is answered, or after maxReportPutOff of a
// stream of changes that never pauses.
func TestProxiesReportPutOffWhileConfigIsSent(t *testing.T) {
	cache := xdscache.New()
	sending := true
	clock := time.Unix(1000, 0)
	f := &fleetProxies{tracker: xdsserver.NewTracker(cache, slog.New(slog.NewTextHandler(io.Discard, nil))), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		sending: func() bool { return sending }, now: func() time.Time { return clock }}
	report := f.reporter()
	first := report() // the first report is built whatever is being sent: there is none to keep
	change := func(i int) {
		s, err := xdscache.NewState(map[string][]proto.Message{resource.ClusterType: {&clusterv3.Cluster{Name: fmt.Sprintf("c%d", i)}}})
		if err != nil {
			t.Fatal(err)
		}
		cache.Publish("g", s)
	}
	change(1)
	if next := report(); unsafe.SliceData(next) != unsafe.SliceData(first) {
		t.Fatal("the report was built while the change was being sent")
	}
	sending = false
	second := report()
	if unsafe.SliceData(second) == unsafe.SliceData(first) {
		t.Fatal("the report was not built once the change was answered")
	}
	// Changes that never pause: put off for at most maxReportPutOff.
	sending = true
	change(2)
	for step := time.Duration(0); step < maxReportPutOff; step += proxiesInterval / 2 {
		if next := report(); unsafe.SliceData(next) != unsafe.SliceData(second) {
			t.Fatalf("built %s after it was first put off, before maxReportPutOff (%s)", step, maxReportPutOff)
		}
		clock = clock.Add(proxiesInterval / 2)
		change(3 + int(step))
	}
	if next := report(); unsafe.SliceData(next) == unsafe.SliceData(second) {
		t.Errorf("still not built %s after it was first put off", maxReportPutOff)
	}
}

// failingRollouts is a rollout store whose writes fail while fail is set (the API server timing out under
// load); otherwise it keeps what is written.
type failingRollouts struct {
	mu     sync.Mutex
	fail   error
	vals   map[string][]byte
	writes int // attempted
}

func (f *failingRollouts) Rollouts() (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.vals), nil
}

func (f *failingRollouts) PutRollout(group string, v []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.fail != nil {
		return f.fail
	}
	if v == nil {
		delete(f.vals, group)
	} else {
		f.vals[group] = v
	}
	return nil
}

// A change applied with spec.rollout whose rollout cannot be stored (the ConfigMap write fails) is held: no
// Envoy gets it, status says why, and it starts once the write goes through; it never reaches every Envoy
// at once.
func TestKubeStagedChangeHeldWhenItsRolloutCannotBeStored(t *testing.T) {
	cache := xdscache.New()
	eng := engine.New(cache, slog.New(slog.DiscardHandler))
	persist := &failingRollouts{vals: map[string][]byte{}}
	nodes := []string{"envoy-a", "envoy-b", "envoy-c"}
	ro := &rollout.Controller{Engine: eng, Persist: persist, Log: slog.New(slog.DiscardHandler),
		Leader: func() bool { return true }, LeaderWrites: true, MinCanaryAge: -1,
		Proxies: func() []xdsserver.ProxyStatus {
			var out []xdsserver.ProxyStatus
			for _, n := range nodes {
				out = append(out, xdsserver.ProxyStatus{NodeID: n, Group: v1alpha1.DefaultProxyGroup, ConnectedAt: time.Now().Add(-time.Hour),
					StatsPort: 9901, Version: "v1", State: xdsserver.Synced})
			}
			return out
		}}
	hook := &kubeRollouts{ro: ro, eng: eng, log: slog.New(slog.DiscardHandler), leader: func() bool { return true }}
	pol := func(gen int64, port int32) *v1alpha1.LoadBalancerPolicy {
		return &v1alpha1.LoadBalancerPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: "ro", Namespace: "default", Generation: gen, UID: "u1"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP},
				Backends: []v1alpha1.Backend{{Name: "app", Endpoints: []v1alpha1.Endpoint{{Address: "198.51.100.10", Port: port}}}},
				Rollout:  &v1alpha1.Rollout{},
			},
		}
	}
	// What each Envoy is served of the policy's backend: its endpoints' version.
	served := func() map[string]string {
		out := map[string]string{}
		for _, n := range nodes {
			v, ok := cache.TargetFor(v1alpha1.DefaultProxyGroup, n).ResourceVersion(resource.EndpointType, "default/ro/app")
			if !ok {
				t.Fatalf("%s has no endpoints of default/ro", n)
			}
			out[n] = v
		}
		return out
	}
	one, two := pol(1, 80), pol(2, 81)
	eng.Set(engine.SourceKubernetes, []*v1alpha1.LoadBalancerPolicy{one})
	baseline := served()

	// The kube source tells the hook, then publishes the new generation, whatever the hook did.
	persist.fail = errors.New(`writing ConfigMap default/lbplane-rollout-x: Put "https://127.0.0.1/": context deadline exceeded`)
	hook.PolicyChanges([]kubesource.PolicyChange{{Old: one, New: two}})
	eng.Set(engine.SourceKubernetes, []*v1alpha1.LoadBalancerPolicy{two})
	if got := served(); !maps.Equal(got, baseline) {
		t.Fatalf("a change whose rollout could not be stored was served: %v, baseline %v", got, baseline)
	}
	key := objkey.Of(two)
	st := ro.Status(key)
	if st == nil || st.Phase != v1alpha1.RolloutProgressing || st.CandidateGeneration != 2 || st.BaselineGeneration != 1 || len(st.Canaries) != 0 ||
		!strings.Contains(st.Message, "held") || !strings.Contains(st.Message, "context deadline exceeded") {
		t.Fatalf("status of the held change: %+v", st)
	}
	if !slices.Contains(ro.Keys(), key) {
		t.Errorf("the held policy is not among the keys whose status is written: %v", ro.Keys())
	}

	// The rollouts' loop tries again while the writes still fail: still held.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ro.Tick = 20 * time.Millisecond
	go ro.Run(ctx)
	writes := func() int {
		persist.mu.Lock()
		defer persist.mu.Unlock()
		return persist.writes
	}
	before := writes()
	for deadline := time.Now().Add(20 * time.Second); writes() == before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the held change was not tried again")
		}
	}
	if got := served(); !maps.Equal(got, baseline) {
		t.Fatalf("served after a retry that failed: %v, baseline %v", got, baseline)
	}

	// The write goes through: the rollout starts, the candidate reaches its canaries alone.
	persist.mu.Lock()
	persist.fail = nil
	persist.mu.Unlock()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st = ro.Status(key); st != nil && len(st.Canaries) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held change did not start once the write went through: %+v", st)
		}
	}
	cancel()
	if st.CandidateGeneration != 2 || strings.Contains(st.Message, "held") {
		t.Fatalf("after the write went through: %+v", st)
	}
	if stored, _ := persist.Rollouts(); len(stored) != 1 {
		t.Errorf("the rollout was not stored: %v", stored)
	}
	got := served()
	for _, n := range nodes {
		if canary := slices.Contains(st.Canaries, n); canary == (got[n] == baseline[n]) {
			t.Errorf("%s (canary %v) is served %s, baseline %s", n, canary, got[n], baseline[n])
		}
	}
}
