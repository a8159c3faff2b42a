package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"
)

// envoyStat reads one counter or gauge from Envoy's admin; missing counts as 0.
func envoyStat(t *testing.T, e *Envoy, name string) int64 {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, "/stats?format=json&filter="+url.QueryEscape("^"+regexp.QuoteMeta(name)+"$"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Stats []struct {
			Name  string `json:"name"`
			Value int64  `json:"value"`
		} `json:"stats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Stats {
		if s.Name == name {
			return s.Value
		}
	}
	return 0
}

const mirrorPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: mirror}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - name: all
      backends: [{name: primary}]
      mirrors: [{backend: shadow, percent: {{.Percent}}}]
  backends:
    - name: primary
      endpoints: [{address: 127.0.0.1, port: {{.Primary}}}]
    - name: shadow
      endpoints: [{address: 127.0.0.1, port: {{.Shadow}}}]
`

// TestMirrorCopiesAShareOfRequests: the mirror backend receives about the configured share of the requests,
// while every client gets the primary's answer, even though the mirror fails each copy it gets.
func TestMirrorCopiesAShareOfRequests(t *testing.T) {
	t.Parallel()
	const percent, sent = 25, 1000
	primary, shadow := startBackend(t, "primary", 0), startBackend(t, "shadow", 0)
	// A failing mirror must not show: its answers are dropped.
	shadow.FailWith(http.StatusServiceUnavailable)
	e := setupWith(t, mirrorPolicy, map[string]any{"Percent": percent, "Primary": primary.Port, "Shadow": shadow.Port}, primary, shadow)
	waitServing(t, e.URL, "primary")
	waitSynced(t, e.L, 1)
	// The requests waitServing sent were copied too: the counts are taken once none of those copies is in
	// flight, or one that Envoy counted already and the mirror had not yet answered would count for the mirror
	// alone (Envoy 238 copies, the mirror 239).
	eventually(t, 30*time.Second, "no copy in flight before counting", func() error {
		if n := envoyStat(t, e.E, "cluster.default/mirror/shadow.upstream_rq_active"); n != 0 {
			return fmt.Errorf("%d copies in flight", n)
		}
		return nil
	})
	primaryBefore, shadowBefore := primary.Served.Load(), shadow.Served.Load()
	mirrorStat := "cluster.default/mirror/shadow.upstream_rq_total"
	statBefore := envoyStat(t, e.E, mirrorStat)

	counts := newClient(true).Spread(t, e.URL, sent, nil)
	if counts["primary"] != sent {
		t.Fatalf("answers: %v; want all %d from the primary", counts, sent)
	}
	// Copies are sent after the client's request, fire and forget: wait until Envoy has finished every copy
	// it sent before counting what the mirror got.
	eventually(t, 30*time.Second, "the mirror's copies are done", func() error {
		sentCopies := envoyStat(t, e.E, mirrorStat) - statBefore
		got := shadow.Served.Load() - shadowBefore
		if got != sentCopies {
			return fmt.Errorf("Envoy sent %d copies, the mirror has %d", sentCopies, got)
		}
		return nil
	})
	copies := int(shadow.Served.Load() - shadowBefore)
	t.Logf("%d requests: primary served %d, mirror got %d copies (%d %% asked)", sent, primary.Served.Load()-primaryBefore, copies, percent)
	if got := primary.Served.Load() - primaryBefore; got != sent {
		t.Errorf("primary served %d, want %d", got, sent)
	}
	// Each request is copied with probability 25 %: the count is binomial with a standard deviation of
	// about 14 around 250; 20 % is more than 3.5 deviations.
	within(t, "copies", copies, sent*percent/100, 0.20)
}
