package kubesource

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
)

func backendStatus(requests int64, window int32, healthy int32) v1alpha1.LoadBalancerPolicyStatus {
	return v1alpha1.LoadBalancerPolicyStatus{Backends: []v1alpha1.BackendStatus{{Name: "app", Requests: requests, WindowSeconds: window,
		Endpoints: v1alpha1.BackendEndpointCounts{Total: 3, Healthy: healthy, Ejected: 3 - healthy},
		Responses: &v1alpha1.ResponseCounts{Success: requests}, Bytes: &v1alpha1.ByteCounts{Received: 10 * requests},
		Connections: &v1alpha1.ConnectionCounts{Active: requests / 10}}}}
}

func TestLoadFiguresAreRateLimitedButHealthIsNot(t *testing.T) {
	t0 := time.Unix(1000, 0)
	old := backendStatus(100, 60, 3)

	// Within the interval: the load figures stay as written, so an unchanged health means no write.
	next := backendStatus(250, 60, 3)
	if !limitLoad(next.Backends, old.Backends, t0, t0.Add(30*time.Second), time.Minute) || next.Backends[0].Requests != 100 ||
		next.Backends[0].Responses.Success != 100 || next.Backends[0].Bytes.Received != 1000 || next.Backends[0].Connections.Active != 10 {
		t.Fatalf("load not kept: %+v", next.Backends[0])
	}
	// A health change still shows at once, with the old load figures.
	next = backendStatus(250, 60, 2)
	limitLoad(next.Backends, old.Backends, t0, t0.Add(30*time.Second), time.Minute)
	if next.Backends[0].Endpoints.Healthy != 2 || next.Backends[0].Requests != 100 {
		t.Fatalf("health change: %+v", next.Backends[0])
	}
	// Past the interval the new figures are written.
	next = backendStatus(250, 60, 3)
	if limitLoad(next.Backends, old.Backends, t0, t0.Add(61*time.Second), time.Minute) || next.Backends[0].Requests != 250 {
		t.Fatalf("load not refreshed: %+v", next.Backends[0])
	}
	// A status written before there was a window has no figures to keep.
	empty := backendStatus(0, 0, 3)
	next = backendStatus(250, 4, 3)
	if limitLoad(next.Backends, empty.Backends, t0, t0.Add(time.Second), time.Minute) || next.Backends[0].Requests != 250 {
		t.Fatalf("a first write without load kept: %+v", next.Backends[0])
	}
}

// A programmed policy whose proxies are only catching up with a new version is not written at once.
func TestPendingAfterProgrammedIsTransient(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string, gen int64) v1alpha1.LoadBalancerPolicyStatus {
		return v1alpha1.LoadBalancerPolicyStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionProgrammed, Status: status, Reason: reason, ObservedGeneration: gen}}}
	}
	programmed := cond(metav1.ConditionTrue, policystatus.ReasonProgrammed, 1)
	for name, c := range map[string]struct {
		next, old v1alpha1.LoadBalancerPolicyStatus
		want      bool
	}{
		"catching up":          {cond(metav1.ConditionFalse, policystatus.ReasonPending, 1), programmed, true},
		"a new generation":     {cond(metav1.ConditionFalse, policystatus.ReasonPending, 2), programmed, false},
		"rejected":             {cond(metav1.ConditionFalse, policystatus.ReasonRejected, 1), programmed, false},
		"never programmed yet": {cond(metav1.ConditionFalse, policystatus.ReasonPending, 1), cond(metav1.ConditionFalse, policystatus.ReasonNoProxies, 1), false},
	} {
		if got := transientPending(&c.next, &c.old); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

// The per-endpoint figures move every second: within the interval they are kept unless an endpoint's health
// changed.
func TestPerEndpointLoadIsKeptUntilHealthChanges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	withEndpoints := func(rps float64, down bool) v1alpha1.LoadBalancerPolicyStatus {
		st := backendStatus(100, 60, 3)
		e := v1alpha1.EndpointStatus{Address: "10.0.0.1:80", RequestsPerSecond: rps}
		if down {
			e.EjectedOn, e.Reasons = 1, []string{"outlier detection"}
		}
		st.Backends[0].PerEndpoint = []v1alpha1.EndpointStatus{e}
		return st
	}
	old := withEndpoints(10, false)
	next := withEndpoints(12, false)
	limitLoad(next.Backends, old.Backends, t0, t0.Add(30*time.Second), time.Minute)
	if got := next.Backends[0].PerEndpoint[0].RequestsPerSecond; got != 10 {
		t.Errorf("per-second figure rewritten within the interval: %v", got)
	}
	next = withEndpoints(12, true)
	limitLoad(next.Backends, old.Backends, t0, t0.Add(30*time.Second), time.Minute)
	if e := next.Backends[0].PerEndpoint[0]; e.EjectedOn != 1 {
		t.Errorf("an ejection must show at once: %+v", e)
	}
}

// A new health report makes the writer look at the policies whose clusters' health changed, not at those
// whose requests and latency moved, until their load figures are due.
func TestHealthReportMarksOnlyChangedClusters(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a, b := objkey.Key{Namespace: "default", Name: "a"}, objkey.Key{Namespace: "default", Name: "b"}
	w := &statusWriter{s: &Source{LoadStatusInterval: time.Minute}, clusterOwner: map[groupCluster]objkey.Key{
		{"default", "default/a/app"}: a, {"default", "default/b/app"}: b}}
	report := func(aRequests int64, bHealthy int32) proxystats.Health {
		return proxystats.Health{"default": {
			"default/a/app": backendStatus(aRequests, 60, 3).Backends[0],
			"default/b/app": backendStatus(100, 60, bHealthy).Backends[0]}}
	}
	todo := map[objkey.Key]bool{}
	w.healthChanged(report(100, 3), t0, todo)
	if !todo[a] || !todo[b] {
		t.Fatalf("first report: %v, want both", todo)
	}
	todo = map[objkey.Key]bool{}
	w.healthChanged(report(250, 2), t0.Add(10*time.Second), todo)
	if todo[a] || !todo[b] {
		t.Errorf("a's requests moved, b lost a healthy endpoint: %v, want b only", todo)
	}
	todo = map[objkey.Key]bool{}
	w.healthChanged(report(400, 2), t0.Add(61*time.Second), todo)
	if !todo[a] || !todo[b] {
		t.Errorf("load figures due: %v, want both", todo)
	}
	todo = map[objkey.Key]bool{}
	first := report(400, 2)
	first["default"]["default/a/app"] = backendStatus(0, 0, 3).Backends[0]
	w.healthChanged(first, t0.Add(62*time.Second), todo)
	if !todo[a] || todo[b] {
		t.Errorf("a's report lost its window: %v, want a only", todo)
	}
	todo = map[objkey.Key]bool{}
	w.healthChanged(proxystats.Health{}, t0.Add(70*time.Second), todo)
	if !todo[a] || !todo[b] {
		t.Errorf("reports gone: %v, want both", todo)
	}
}
