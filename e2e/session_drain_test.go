package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// sessionDrainPolicy: cookie sessions over the backends B; the endpoint at index Drained is pushed
// state: Draining, the one at Removed is left out (-1: none), and the backend's drainingSessions is Mode.
const sessionDrainPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: drain}
spec:
  debugHeaders: true
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - backends: [{name: app}]
      sessionPersistence: {type: Cookie, name: sticky}
  backends:
    - name: app
      drainingSessions: {{.Mode}}
      endpoints:
{{- range $i, $b := .B}}{{if ne $i $.Removed}}
        - {address: 127.0.0.1, port: {{$b.Port}}{{if eq $i $.Drained}}, state: Draining{{end}}}
{{- end}}{{end}}
`

// sessionClient is a client with a cookie jar and what its requests met, phase by phase.
type sessionClient struct {
	c      *Client
	pinned string
	// got counts the answers by phase and backend; failed lists the failures.
	got    [4]map[string]int
	failed []string
}

// newSessions starts n clients, each with a cookie jar and the session of its first request, and counts
// them by the backend that answered it.
func newSessions(t *testing.T, url string, n int) ([]*sessionClient, map[string]int) {
	t.Helper()
	out := make([]*sessionClient, n)
	spread := map[string]int{}
	for i := range out {
		sc := &sessionClient{c: jarClient()}
		for p := range sc.got {
			sc.got[p] = map[string]int{}
		}
		b, err := requestVia(sc.c, url, nil)
		if err != nil {
			t.Fatalf("new client %d: %v", i, err)
		}
		sc.pinned = b
		spread[b]++
		out[i] = sc
	}
	return out, spread
}

// TestSessionsStayOnADrainingEndpoint: 60 cookie clients over 3 endpoints send requests without pause while
// one endpoint is pushed state: Draining through the push API, then removed. Until it is removed, every
// request of its clients still reaches it, no new client reaches it, and no request of anyone fails; lbctl
// trace says the session is kept, and Envoy agrees; once Envoy has dropped it, its clients are elsewhere.
// With drainingSessions: Move, the sessions of a draining endpoint move at once.
func TestSessionsStayOnADrainingEndpoint(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "s1", "s2", "s3")
	data := func(mode string, drained, removed int) map[string]any {
		return map[string]any{"B": bs, "Mode": mode, "Drained": drained, "Removed": removed}
	}
	e := setupWith(t, sessionDrainPolicy, data("Keep", -1, -1), bs...)
	doc := func(mode string, drained, removed int) []byte {
		d := data(mode, drained, removed)
		d["Port"] = e.Port
		return policy(t, sessionDrainPolicy, d)
	}
	waitServing(t, e.URL, "s1", "s2", "s3")
	waitSynced(t, e.L, 1)

	const n = 60
	clients, first := newSessions(t, e.URL, n)
	if first["s1"] == 0 || first["s2"] == 0 || first["s3"] == 0 {
		t.Fatalf("%d new clients were balanced onto %v only", n, first)
	}

	// Every client sends a request every 100 ms (at most 2,000 each). A phase changes only while no request
	// is under way (the write lock), so each request is counted in the phase it was sent and answered in.
	var phaseMu sync.RWMutex
	phase := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, sc := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for range 2000 {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				phaseMu.RLock()
				b, err := requestVia(sc.c, e.URL, nil)
				if err != nil {
					sc.failed = append(sc.failed, fmt.Sprintf("phase %d: %v", phase, err))
				} else {
					sc.got[phase][b]++
				}
				phaseMu.RUnlock()
			}
		}()
	}
	stopped := false
	stopAll := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopAll()
	setPhase := func(p int) {
		phaseMu.Lock()
		phase = p
		phaseMu.Unlock()
	}
	// waitRequests waits until every client has had at least k answers in phase p.
	waitRequests := func(p, k int) {
		t.Helper()
		eventually(t, 60*time.Second, fmt.Sprintf("every client has %d answers in phase %d", k, p), func() error {
			phaseMu.Lock()
			defer phaseMu.Unlock()
			for i, sc := range clients {
				sum := len(sc.failed)
				for _, c := range sc.got[p] {
					sum += c
				}
				if sum < k {
					return fmt.Errorf("client %d has %d", i, sum)
				}
			}
			return nil
		})
	}
	waitRequests(0, 3)

	// Phase 1: s2 drains. The push answers once the Envoy has acknowledged it; its workers take it a moment
	// later, once /clusters shows it.
	setPhase(1)
	push(t, e.L, doc("Keep", 1, -1))
	s2 := fmt.Sprintf("127.0.0.1:%d", bs[1].Port)
	envoyHolds := func(what string, ok func(clusters string) bool) {
		t.Helper()
		eventually(t, 20*time.Second, "Envoy holds "+what, func() error {
			if cl := e.E.Clusters(t); !ok(cl) {
				return fmt.Errorf("/clusters:\n%s", cl)
			}
			return nil
		})
	}
	drainingInEnvoy := func(cl string) bool { return strings.Contains(cl, s2+"::health_flags::/eds_status_draining") }
	envoyHolds(s2+" draining", drainingInEnvoy)
	_, newOnes := newSessions(t, e.URL, n)
	if newOnes["s2"] != 0 || newOnes["s1"] == 0 || newOnes["s3"] == 0 {
		t.Errorf("%d new clients after the drain went to %v: none should reach s2", n, newOnes)
	}
	// trace predicts the kept session, and Envoy sends the request where it said.
	out, errOut, err := lbctl(t, e.L, "", "trace", "drain", "--cookie", "sticky="+trafficmodel.EncodeSession(s2), "--live", "-o", "json")
	var tr traceResult
	if jerr := json.Unmarshal([]byte(out), &tr); jerr != nil || tr.Live == nil || tr.Session == nil {
		t.Fatalf("lbctl trace: %v %v\n%s%s", err, jerr, out, errOut)
	}
	if !tr.Session.Applies || !tr.Session.Draining || !strings.HasPrefix(tr.Session.Why, "session -> draining endpoint "+s2+", kept") ||
		!tr.Live.Agrees || tr.Live.Upstream != s2 {
		t.Errorf("lbctl trace of a session on the draining endpoint: session %+v, live %+v", tr.Session, tr.Live)
	}
	waitRequests(1, 5)

	// Phase 2: s2 leaves the backend; its clients are balanced again, and nobody's request fails. Phase 3
	// starts once Envoy has dropped it.
	setPhase(2)
	push(t, e.L, doc("Keep", -1, 1))
	envoyHolds(s2+" no more", func(cl string) bool { return !strings.Contains(cl, s2+"::") })
	setPhase(3)
	waitRequests(3, 3)
	stopAll()

	var failures []string
	kept, onS2 := 0, 0
	for i, sc := range clients {
		for _, f := range sc.failed {
			failures = append(failures, fmt.Sprintf("client %d: %s", i, f))
		}
		for p := 0; p <= 1; p++ {
			for b, c := range sc.got[p] {
				if b != sc.pinned {
					t.Errorf("client %d pinned to %s: %d requests in phase %d went to %s", i, sc.pinned, c, p, b)
				}
			}
		}
		if sc.pinned == "s2" {
			kept += sc.got[1]["s2"]
		}
		onS2 += sc.got[3]["s2"]
	}
	if len(failures) > 0 {
		t.Errorf("%d requests failed: %v", len(failures), failures[:min(len(failures), 10)])
	}
	if kept == 0 {
		t.Errorf("no request of s2's %d clients reached it while it drained", first["s2"])
	}
	if onS2 > 0 {
		t.Errorf("%d requests reached s2 after Envoy dropped it", onS2)
	}
	t.Logf("%d clients pinned %v; while s2 drained its %d clients sent it %d requests, all of theirs", n, first, first["s2"], kept)

	// drainingSessions: Move: s2 is back, new clients are pinned to it, and its sessions move when it drains.
	push(t, e.L, doc("Move", -1, -1))
	var onIt []*Client
	for i := 0; i < 300 && len(onIt) < 5; i++ {
		c := jarClient()
		if b, err := requestVia(c, e.URL, nil); err == nil && b == "s2" {
			onIt = append(onIt, c)
		}
	}
	if len(onIt) < 5 {
		t.Fatalf("only %d of up to 300 new clients were pinned to s2", len(onIt))
	}
	push(t, e.L, doc("Move", 1, -1))
	envoyHolds(s2+" draining", drainingInEnvoy)
	for i, c := range onIt {
		for range 3 {
			b, err := requestVia(c, e.URL, nil)
			if err != nil || b == "s2" {
				t.Errorf("with drainingSessions: Move, client %d of s2 got %q, %v: its session should have moved", i, b, err)
			}
		}
	}
}

// versionSwitchPolicy: sessions across the backends v1 (the first two of B) and v2 (the last two), at
// weights V1 and V2; with V1 "-", v1 is gone from the policy.
const versionSwitchPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: switch}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
{{- if eq .V1 "-"}}
    - backends: [{name: v2}]
      sessionPersistence: {name: app-session}
{{- else}}
    - backends: [{name: v1, weight: {{.V1}}}, {name: v2, weight: {{.V2}}}]
      sessionPersistence: {name: app-session, acrossBackends: true}
{{- end}}
  backends:
{{- if ne .V1 "-"}}
    - name: v1
      endpoints: [{address: 127.0.0.1, port: {{(index .B 0).Port}}}, {address: 127.0.0.1, port: {{(index .B 1).Port}}}]
{{- end}}
    - name: v2
      endpoints: [{address: 127.0.0.1, port: {{(index .B 2).Port}}}, {address: 127.0.0.1, port: {{(index .B 3).Port}}}]
`

// TestVersionSwitchKeepsSessions: 100 clients start on v1 (v2 at weight 0 takes none); v1 goes to weight 0
// and v2 to 1: v1 keeps at least 99 % of its sessions' requests (measured: all), every new client goes to
// v2, and no request fails. Once v1 is removed its clients move to v2, still without a failure.
func TestVersionSwitchKeepsSessions(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "v1-a", "v1-b", "v2-a", "v2-b")
	e := setupWith(t, versionSwitchPolicy, map[string]any{"B": bs, "V1": "1", "V2": "0"}, bs...)
	doc := func(v1, v2 string) []byte {
		return policy(t, versionSwitchPolicy, map[string]any{"B": bs, "Port": e.Port, "V1": v1, "V2": v2})
	}
	waitServing(t, e.URL, "v1-a", "v1-b")
	waitSynced(t, e.L, 1)
	isV1 := func(b string) bool { return strings.HasPrefix(b, "v1-") }

	const n = 100
	clients, spread := newSessions(t, e.URL, n)
	pinned := make([]string, n)
	for i, c := range clients {
		pinned[i] = c.pinned
	}
	if spread["v1-a"] == 0 || spread["v1-b"] == 0 || spread["v1-a"]+spread["v1-b"] != n {
		t.Fatalf("with v2 at weight 0, %d new clients went to %v: all should be on v1, over both endpoints", n, spread)
	}

	push(t, e.L, doc("0", "1"))
	const per = 5
	kept, failed := 0, 0
	for i, c := range clients {
		for range per {
			b, err := requestVia(c.c, e.URL, nil)
			switch {
			case err != nil:
				failed++
				t.Errorf("client %d: %v", i, err)
			case b == pinned[i]:
				kept++
			}
		}
	}
	if share := float64(kept) / (n * per); share < 0.99 || failed > 0 {
		t.Errorf("after the switch v1 kept %.1f %% of its sessions' requests (%d of %d), %d failed; want at least 99 %% and no failure",
			share*100, kept, n*per, failed)
	}
	_, newSpread := newSessions(t, e.URL, n)
	if newSpread["v2-a"]+newSpread["v2-b"] != n || newSpread["v2-a"] == 0 || newSpread["v2-b"] == 0 {
		t.Errorf("after the switch %d new clients went to %v: all should be on v2, over both endpoints", n, newSpread)
	}
	t.Logf("v1 kept %d of %d requests of its %d sessions; new clients: %v", kept, n*per, n, newSpread)

	// v1 leaves: its clients are balanced onto v2.
	push(t, e.L, doc("-", "-"))
	for i, c := range clients {
		b, err := requestVia(c.c, e.URL, nil)
		if err != nil || isV1(b) {
			t.Errorf("client %d after v1 left: %q, %v", i, b, err)
		}
	}
}
