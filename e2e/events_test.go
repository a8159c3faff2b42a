package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// eventsOf runs lbctl events [args] -o json and returns the items.
func eventsOf(t *testing.T, l *Lbplane, args ...string) []apiwire.HealthEvent {
	t.Helper()
	var evs []apiwire.HealthEvent
	if err := listItems(lbctlOK(t, l, append(append([]string{"events"}, args...), "-o", "json")...), &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestHealthHistoryOnTheServer kills a backend behind a real Envoy and brings it back: lbplane logs the
// ejection and the recovery with the endpoint, the Envoy and the reason, and lbctl events (and the policy's
// history, which the dashboard draws) has them, and the endpoint's series.
func TestHealthHistoryOnTheServer(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	e := setupWith(t, statusPolicy, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "a", "b", "c")
	load := startLoad(e.URL, 50, 2, 2*time.Minute)
	defer load.Stop()
	dead := fmt.Sprintf("127.0.0.1:%d", bs[1].Port)
	eventually(t, 20*time.Second, "the Envoy's first report", func() error {
		_, err := backendStatus(t, e.L, "st", "app")
		return err
	})
	if evs := eventsOf(t, e.L); len(evs) != 0 {
		t.Fatalf("events before any failure: %+v", evs)
	}

	bs[1].Stop()
	var ejected apiwire.HealthEvent
	eventually(t, 15*time.Second, "the ejection in lbctl events", func() error {
		for _, ev := range eventsOf(t, e.L, "st") {
			if ev.Type == apiwire.EventEjected && ev.Endpoint == dead {
				ejected = ev
				return nil
			}
		}
		return fmt.Errorf("no Ejected event for %s", dead)
	})
	// Under load, outlier detection or the active check may see it first; either names its reason.
	if ejected.Node != e.E.NodeID || ejected.Backend != "app" || ejected.Policy != "st" || ejected.Namespace != "default" || len(ejected.Reasons) == 0 {
		t.Errorf("event %+v", ejected)
	}
	table := lbctlOK(t, e.L, "events")
	for _, want := range []string{"TYPE", "Ejected", "default/st", dead, e.E.NodeID, ejected.Reasons[0]} {
		if !strings.Contains(table, want) {
			t.Errorf("lbctl events lacks %q:\n%s", want, table)
		}
	}

	bs[1].Restart(t)
	eventually(t, 15*time.Second, "the recovery in lbctl events", func() error {
		for _, ev := range eventsOf(t, e.L, "st") {
			if ev.Type == apiwire.EventRecovered && ev.Endpoint == dead && ev.Seq > ejected.Seq {
				return nil
			}
		}
		return fmt.Errorf("no Recovered event for %s", dead)
	})
	log, err := os.ReadFile(e.L.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf(`msg="endpoint ejected" policy=default/st backend=app endpoint=%s envoy=%s group=default reason="%s`, dead, e.E.NodeID, ejected.Reasons[0]),
		fmt.Sprintf(`msg="endpoint recovered" policy=default/st backend=app endpoint=%s envoy=%s`, dead, e.E.NodeID),
	} {
		if !strings.Contains(string(log), want) {
			t.Errorf("lbplane's log lacks %q", want)
		}
	}
	// The series the dashboard draws: every endpoint has readings, and the live ones took requests.
	var h apiwire.HistoryResult
	if err := json.Unmarshal([]byte(apiGet(t, e.L, "/v1/policies/default/st/history")), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Events) < 2 || len(h.Backends) != 1 || len(h.Backends[0].Endpoints) != 3 || len(h.Backends[0].LatencyP99) == 0 {
		t.Fatalf("history %+v", h)
	}
	for _, s := range h.Backends[0].Endpoints {
		if s.Address == dead {
			continue
		}
		if !slices.ContainsFunc(s.Points, func(p apiwire.SeriesPoint) bool { return p.RequestsPerSecond > 0 }) {
			t.Errorf("%s has no reading with requests: %+v", s.Address, s.Points)
		}
	}
}

// apiGet reads a push API path with the admin token and fails the test unless it answers 200.
func apiGet(t *testing.T, l *Lbplane, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, l.APIURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", path, resp.Status, err, b)
	}
	return string(b)
}

const passiveOnlyPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: passive}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      healthCheck:
        passive: {consecutive5xx: 3, interval: 1s, baseEjectionTime: 2s, maxEjectionPercent: 50}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// TestLapsedPassiveEjectionIsUnknown: with passive checks only, a dead endpoint that nobody sends to is
// not shown healthy once its ejection lapses: it is unknown since then, until it answers again.
func TestLapsedPassiveEjectionIsUnknown(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	e := setupWith(t, passiveOnlyPolicy, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "a", "b", "c")
	dead := fmt.Sprintf("127.0.0.1:%d", bs[2].Port)
	load := startLoad(e.URL, 50, 2, time.Minute)
	bs[2].Stop()
	eventually(t, 15*time.Second, "the dead endpoint ejected by outlier detection", func() error {
		for _, ev := range eventsOf(t, e.L, "passive") {
			if ev.Type == apiwire.EventEjected && ev.Endpoint == dead {
				return nil
			}
		}
		return fmt.Errorf("no ejection of %s yet", dead)
	})
	load.Stop() // nobody sends to it any more: nothing can show whether it answers
	var since time.Time
	eventually(t, 20*time.Second, "status shows it unknown, not healthy, once the ejection lapsed", func() error {
		b, err := backendStatus(t, e.L, "passive", "app")
		if err != nil {
			return err
		}
		for _, ep := range b.PerEndpoint {
			if ep.Address == dead && ep.Health == v1alpha1.EndpointUnknown && ep.UnknownSince != nil && ep.EjectedOn == 0 {
				if b.Endpoints.Healthy != 2 || b.Endpoints.Unknown != 1 {
					return fmt.Errorf("counts %+v", b.Endpoints)
				}
				since = ep.UnknownSince.Time
				return nil
			}
		}
		return fmt.Errorf("%+v", b.PerEndpoint)
	})
	text := lbctlOK(t, e.L, "status", "passive")
	if want := "unknown since " + since.Local().Format(time.TimeOnly); !strings.Contains(text, want) {
		t.Errorf("lbctl status passive lacks %q:\n%s", want, text)
	}
	if evs := eventsOf(t, e.L, "passive"); !slices.ContainsFunc(evs, func(ev apiwire.HealthEvent) bool {
		return ev.Type == apiwire.EventUnknown && ev.Endpoint == dead
	}) || slices.ContainsFunc(evs, func(ev apiwire.HealthEvent) bool { return ev.Type == apiwire.EventRecovered }) {
		t.Errorf("events: %+v", evs)
	}
	// It comes back and answers: recovered, healthy.
	bs[2].Restart(t)
	eventually(t, 30*time.Second, "it answers again and is healthy", func() error {
		newClient(false).Spread(t, e.URL, 30, nil)
		b, err := backendStatus(t, e.L, "passive", "app")
		if err != nil {
			return err
		}
		if b.Endpoints.Unknown != 0 || b.Endpoints.Healthy != 3 {
			return fmt.Errorf("%+v", b.Endpoints)
		}
		return nil
	})
}
