package healthhistory

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
)

var key = objkey.Key{Namespace: "ns", Name: "p"}

func recorder(active bool, log *bytes.Buffer) *Recorder {
	r := &Recorder{Owner: func(group, cluster string) (Owner, bool) {
		return Owner{Policy: key, Backend: "app", ActiveChecks: active}, group == "g" && cluster == "ns/p/app"
	}}
	if log != nil {
		r.Log = slog.New(slog.NewTextHandler(log, nil))
	}
	return r
}

// view is one Envoy's report of ns/p/app: endpoints by address, each with its reasons (none: healthy) and
// requests per second.
type ep struct {
	addr    string
	reasons []string
	rps     float64
}

func view(eps ...ep) proxystats.Health {
	b := v1alpha1.BackendStatus{Name: "ns/p/app", Proxies: 1, WindowSeconds: 10}
	for _, e := range eps {
		s := v1alpha1.EndpointStatus{Address: e.addr, Reasons: e.reasons, RequestsPerSecond: e.rps, Requests: int64(e.rps * 10), Errors: 1, Health: v1alpha1.EndpointHealthy}
		b.Endpoints.Total++
		if len(e.reasons) > 0 {
			s.EjectedOn, s.Health = 1, v1alpha1.EndpointEjected
			b.Endpoints.Ejected++
		}
		b.PerEndpoint = append(b.PerEndpoint, s)
	}
	b.Endpoints.Healthy = b.Endpoints.Total - b.Endpoints.Ejected
	return proxystats.Health{"g": {"ns/p/app": b}}
}

func types(es []apiwire.HealthEvent) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Type+" "+e.Endpoint+" "+e.Node)
	}
	return out
}

func TestEjectionsAndRecoveriesAreEventsPerEnvoy(t *testing.T) {
	var log bytes.Buffer
	r := recorder(true, &log)
	t0 := time.Unix(1000, 0)
	hc := []string{"active health check failed"}
	r.Observe(t0, map[string]proxystats.Health{"e1": view(ep{addr: "a:1"}, ep{addr: "b:1"}), "e2": view(ep{addr: "a:1"}, ep{addr: "b:1"})}, nil)
	if got := r.EventsSince(0, nil); len(got) != 0 {
		t.Fatalf("healthy endpoints made events: %v", types(got))
	}
	r.Observe(t0.Add(2*time.Second), map[string]proxystats.Health{"e1": view(ep{addr: "a:1"}, ep{addr: "b:1", reasons: hc}), "e2": view(ep{addr: "a:1"}, ep{addr: "b:1"})}, nil)
	// The same again: no new event.
	r.Observe(t0.Add(4*time.Second), map[string]proxystats.Health{"e1": view(ep{addr: "a:1"}, ep{addr: "b:1", reasons: hc}), "e2": view(ep{addr: "a:1"}, ep{addr: "b:1"})}, nil)
	// Recovered on e1.
	r.Observe(t0.Add(6*time.Second), map[string]proxystats.Health{"e1": view(ep{addr: "a:1"}, ep{addr: "b:1"}), "e2": view(ep{addr: "a:1"}, ep{addr: "b:1"})}, nil)
	got := r.EventsSince(0, nil)
	if want := []string{"Ejected b:1 e1", "Recovered b:1 e1"}; !slices.Equal(types(got), want) {
		t.Fatalf("events %v, want %v", types(got), want)
	}
	e := got[0]
	if e.Namespace != "ns" || e.Policy != "p" || e.Backend != "app" || e.Group != "g" || !slices.Equal(e.Reasons, hc) || e.Seq != 1 || !e.Time.Equal(t0.Add(2*time.Second)) {
		t.Errorf("event %+v", e)
	}
	if later := r.EventsSince(1, nil); len(later) != 1 || later[0].Seq != 2 {
		t.Errorf("since 1: %+v", later)
	}
	other := objkey.Key{Namespace: "ns", Name: "other"}
	if len(r.EventsSince(0, &other)) != 0 || len(r.EventsSince(0, &key)) != 2 {
		t.Error("events are not filtered by policy")
	}
	for _, want := range []string{`msg="endpoint ejected" policy=ns/p backend=app endpoint=b:1 envoy=e1 group=g reason="active health check failed"`, `msg="endpoint recovered"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

func TestEventRingIsBounded(t *testing.T) {
	r := recorder(true, nil)
	r.MaxEvents = 3
	t0 := time.Unix(1000, 0)
	for i := range 4 {
		r.Observe(t0.Add(time.Duration(2*i)*time.Second), map[string]proxystats.Health{"e1": view(ep{addr: "a:1", reasons: []string{"draining"}})}, nil)
		r.Observe(t0.Add(time.Duration(2*i+1)*time.Second), map[string]proxystats.Health{"e1": view(ep{addr: "a:1"})}, nil)
	}
	got := r.EventsSince(0, nil)
	if len(got) != 3 || got[0].Seq != 6 || got[2].Seq != 8 {
		t.Errorf("kept %+v", got)
	}
}

// With passive checks only, the end of an ejection shows nothing: the endpoint is Unknown since then, not
// healthy, until it answers requests.
func TestLapsedPassiveEjectionIsUnknown(t *testing.T) {
	r := recorder(false, nil)
	t0 := time.Unix(1000, 0)
	od := []string{"outlier detection: consecutive 5xx"}
	r.Observe(t0, map[string]proxystats.Health{"e1": view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1", reasons: od})}, nil)
	lapse := t0.Add(30 * time.Second)
	r.Observe(lapse, map[string]proxystats.Health{"e1": view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1"})}, nil)
	if got := types(r.EventsSince(0, nil)); !slices.Equal(got, []string{"Ejected b:1 e1", "Unknown b:1 e1"}) {
		t.Fatalf("events %v", got)
	}
	in := view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1"})
	h := r.Annotate(in)
	b := h["g"]["ns/p/app"]
	if orig := in["g"]["ns/p/app"]; orig.Endpoints.Unknown != 0 || orig.PerEndpoint[1].Health == v1alpha1.EndpointUnknown {
		t.Errorf("the summary annotated was changed (the poller shares it): %+v", orig)
	}
	if b.Endpoints.Healthy != 1 || b.Endpoints.Unknown != 1 {
		t.Errorf("counts %+v", b.Endpoints)
	}
	if e := b.PerEndpoint[1]; e.Health != v1alpha1.EndpointUnknown || e.UnknownSince == nil || !e.UnknownSince.Time.Equal(lapse) {
		t.Errorf("b:1 %+v", e)
	}
	// Not listed at all (idle, among many): still shown, as unknown.
	h = r.Annotate(view(ep{addr: "a:1", rps: 5}))
	if b := h["g"]["ns/p/app"]; len(b.PerEndpoint) != 2 || b.PerEndpoint[1].Health != v1alpha1.EndpointUnknown {
		t.Errorf("unlisted: %+v", b.PerEndpoint)
	}
	// It answers requests: recovered, healthy again.
	r.Observe(lapse.Add(2*time.Second), map[string]proxystats.Health{"e1": view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1", rps: 3})}, nil)
	if got := types(r.EventsSince(2, nil)); !slices.Equal(got, []string{"Recovered b:1 e1"}) {
		t.Fatalf("events %v", got)
	}
	h = r.Annotate(view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1", rps: 3}))
	if b := h["g"]["ns/p/app"]; b.Endpoints.Unknown != 0 || b.PerEndpoint[1].Health != v1alpha1.EndpointHealthy {
		t.Errorf("after answering: %+v", b)
	}
	// With active checks the lapse is a recovery.
	r = recorder(true, nil)
	r.Observe(t0, map[string]proxystats.Health{"e1": view(ep{addr: "b:1", reasons: od})}, nil)
	r.Observe(lapse, map[string]proxystats.Health{"e1": view(ep{addr: "b:1"})}, nil)
	if got := types(r.EventsSince(0, nil)); !slices.Equal(got, []string{"Ejected b:1 e1", "Recovered b:1 e1"}) {
		t.Fatalf("with active checks: %v", got)
	}
}

func TestSeriesKeepAnHourAtTheirStep(t *testing.T) {
	r := recorder(true, nil)
	r.Step, r.Keep = 10*time.Second, time.Minute
	t0 := time.Unix(1000, 0)
	for i := range 20 { // every 5 s for 100 s: a point every 10 s, the last minute kept
		h := view(ep{addr: "a:1", rps: float64(i)})
		b := h["g"]["ns/p/app"]
		b.LatencyP99Ms = new(float64)
		*b.LatencyP99Ms = float64(i)
		h["g"]["ns/p/app"] = b
		r.Observe(t0.Add(time.Duration(5*i)*time.Second), nil, h)
	}
	s := r.Series("g", map[string]string{"ns/p/app": "app", "ns/p/none": "none"})
	if len(s) != 2 || s[0].Name != "app" || s[1].Name != "none" || len(s[1].Endpoints) != 0 {
		t.Fatalf("series %+v", s)
	}
	pts := s[0].Endpoints[0].Points
	if len(pts) != 7 || pts[0].RequestsPerSecond != 6 || pts[6].RequestsPerSecond != 18 || pts[6].ErrorsPerSecond != 0.1 {
		t.Errorf("points %+v", pts)
	}
	if l := s[0].LatencyP99; len(l) != 7 || l[6].LatencyP99Ms != 18 {
		t.Errorf("latency %+v", l)
	}
}

// A report lists the busiest endpoints and every one not taking traffic: an ejected endpoint that is no
// longer listed has recovered when the busiest fill the list, and was removed when they do not.
func TestUnlistedEndpointsRecoveredOrRemoved(t *testing.T) {
	r := recorder(true, nil)
	t0 := time.Unix(1000, 0)
	busy := []ep{}
	for i := range proxystats.MaxBusiestListed {
		busy = append(busy, ep{addr: fmt.Sprintf("10.0.0.%d:80", i), rps: 10})
	}
	down := ep{addr: "b:1", reasons: []string{"draining"}}
	r.Observe(t0, map[string]proxystats.Health{"e1": view(append(busy, down)...)}, nil)
	r.Observe(t0.Add(time.Second), map[string]proxystats.Health{"e1": view(busy...)}, nil)
	if got := types(r.EventsSince(0, nil)); !slices.Equal(got, []string{"Ejected b:1 e1", "Recovered b:1 e1"}) {
		t.Errorf("among many: %v", got)
	}
	r = recorder(true, nil)
	r.Observe(t0, map[string]proxystats.Health{"e1": view(ep{addr: "a:1"}, down)}, nil)
	r.Observe(t0.Add(time.Second), map[string]proxystats.Health{"e1": view(ep{addr: "a:1"})}, nil)
	if got := types(r.EventsSince(0, nil)); !slices.Equal(got, []string{"Ejected b:1 e1"}) || len(r.state) != 1 {
		t.Errorf("removed: %v, state %v", got, r.state)
	}
}

// An observation of many clusters calls Yield as it goes, every few hundred clusters of each view.
func TestObserveYieldsAsItGoes(t *testing.T) {
	r := recorder(true, nil)
	yields := 0
	r.Yield = func() { yields++ }
	many := proxystats.Health{"g": {}}
	for i := range 2048 {
		name := fmt.Sprintf("ns/p%d/app", i)
		many["g"][name] = v1alpha1.BackendStatus{Name: name, PerEndpoint: []v1alpha1.EndpointStatus{{Address: "a:1", Health: v1alpha1.EndpointHealthy}}}
	}
	r.Observe(time.Now(), map[string]proxystats.Health{"e1": many}, many)
	// 2,048 clusters in the Envoy's view and 2,048 in the total, gone through twice (the endpoints' checks,
	// the series): 12 calls.
	if yields != 12 {
		t.Errorf("Yield called %d times, want 12", yields)
	}
}

// An endpoint's spans of downtime follow its counted health, each reading sets its last check, and an
// endpoint a report leaves out takes traffic (its span ends); the backend's traffic series holds the
// responses by class, connections and bytes as rates over the window.
func TestDowntimeLastCheckAndTraffic(t *testing.T) {
	r := recorder(true, nil)
	t0 := time.Unix(5000, 0).UTC()
	down := []string{"active health check failing"}
	withTraffic := func(h proxystats.Health) proxystats.Health {
		b := h["g"]["ns/p/app"]
		b.Responses = &v1alpha1.ResponseCounts{Success: 90, ClientError: 5, ServerError: 5}
		b.ClientErrorRate = ptrTo(0.05)
		b.Connections = &v1alpha1.ConnectionCounts{Active: 7, Opened: 20}
		b.Bytes = &v1alpha1.ByteCounts{Received: 10000, Sent: 500}
		h["g"]["ns/p/app"] = b
		return h
	}
	r.Observe(t0, nil, withTraffic(view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1", rps: 5})))
	r.Observe(t0.Add(5*time.Second), nil, view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1", reasons: down}))
	r.Observe(t0.Add(35*time.Second), nil, view(ep{addr: "a:1", rps: 5}, ep{addr: "b:1", reasons: down}))
	// b is left out of a report of three endpoints (the busiest listed): it takes traffic again.
	r.Observe(t0.Add(40*time.Second), nil, view(ep{addr: "a:1", rps: 5}))
	got := r.Series("g", map[string]string{"ns/p/app": "app"})
	if len(got) != 1 || len(got[0].Endpoints) != 2 {
		t.Fatalf("series %+v", got)
	}
	a, b := got[0].Endpoints[0], got[0].Endpoints[1]
	if len(a.Downtime) != 0 || a.LastCheck == nil || !a.LastCheck.Equal(t0.Add(40*time.Second)) {
		t.Errorf("a: downtime %+v, last check %v", a.Downtime, a.LastCheck)
	}
	if len(b.Downtime) != 1 || !b.Downtime[0].From.Equal(t0.Add(5*time.Second)) || b.Downtime[0].To == nil ||
		!b.Downtime[0].To.Equal(t0.Add(40*time.Second)) || b.Downtime[0].Health != string(v1alpha1.EndpointEjected) {
		t.Errorf("b: downtime %+v", b.Downtime)
	}
	tr := got[0].Traffic
	if len(tr) != 1 || tr[0].Success != 9 || tr[0].ServerError != 0.5 || tr[0].ClientError != 0.5 || tr[0].ConnectionsActive != 7 ||
		tr[0].BytesReceived != 1000 || tr[0].BytesSent != 50 || tr[0].ClientErrorRate == nil || *tr[0].ClientErrorRate != 0.05 {
		t.Errorf("traffic %+v", tr)
	}
	// An hour later without a reading of b, it is forgotten.
	r.Observe(t0.Add(2*time.Hour), nil, proxystats.Health{"g": {}})
	if got := r.Series("g", map[string]string{"ns/p/app": "app"}); len(got[0].Endpoints) != 0 {
		t.Errorf("after two hours: %+v", got[0].Endpoints)
	}
}

func ptrTo[T any](v T) *T { return &v }
