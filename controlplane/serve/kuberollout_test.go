package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
	"unsafe"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
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
