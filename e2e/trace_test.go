package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

const tracePolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: trace}
spec:
  debugHeaders: true
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes:
    - name: by-ip
      match: {path: {value: /ip}}
      backends: [{name: ipapp}]
    - name: session
      match: {path: {value: /s}}
      backends: [{name: web}]
      sessionPersistence: {type: Cookie, name: sticky}
    - name: users
      match: {headers: [{name: x-user, type: Present}]}
      backends: [{name: hashapp}]
    - name: weighted
      backends: [{name: web, weight: 3}, {name: web2, weight: 1}]
  backends:
    - name: ipapp
      loadBalancing: {algorithm: Maglev, hashKeys: [{sourceIP: {}}]}
      endpoints:
{{- range slice .B 0 3}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
    - name: hashapp
      loadBalancing: {algorithm: RingHash, hashKeys: [{header: {name: x-user}}]}
      endpoints:
{{- range slice .B 0 3}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
    - name: web
      endpoints:
{{- range slice .B 3 5}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
    - name: web2
      endpoints: [{address: 127.0.0.1, port: {{(index .B 5).Port}}}]
`

type traceResult struct {
	trafficmodel.Trace
	Live *struct {
		Status   int    `json:"status"`
		Upstream string `json:"upstream"`
		Agrees   bool   `json:"agrees"`
		Why      string `json:"why"`
	} `json:"live"`
}

func traceLive(t *testing.T, e *env, args ...string) traceResult {
	t.Helper()
	out, errOut, err := lbctl(t, e.L, "", append([]string{"trace", "trace", "--live", "-o", "json"}, args...)...)
	var r traceResult
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil || r.Live == nil {
		t.Fatalf("lbctl trace %v: %v %v\n%s%s", args, err, jerr, out, errOut)
	}
	if err != nil || !r.Live.Agrees {
		t.Errorf("lbctl trace %v: offline and live differ (exit %v): %s", args, err, r.Live.Why)
	}
	return r
}

// TestTraceOfflineAgreesWithLive: lbctl trace names the route, and the endpoint Envoy then picks (read
// from x-lbplane-upstream) is the one it predicted: the ring hash owner of a header key, the Maglev owner
// of a source address, the endpoint a session cookie names; for a weighted split without a hash, one of
// the candidates, with the chances the weights give.
func TestTraceOfflineAgreesWithLive(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "t1", "t2", "t3", "w1", "w2", "v1")
	e := setupWith(t, tracePolicy, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "w1", "w2", "v1")
	waitSynced(t, e.L, 1)
	addr := func(b *Backend) string { return fmt.Sprintf("127.0.0.1:%d", b.Port) }

	owners := map[string]bool{}
	for i := 0; i < 12; i++ {
		r := traceLive(t, e, "--header", fmt.Sprintf("x-user=user-%d", i))
		if r.Route != "default/trace/users" || len(r.Backends) != 1 || r.Backends[0].Owner == "" || r.Hash == nil || !r.Hash.Present {
			t.Fatalf("header key: %+v", r.Trace)
		}
		owners[r.Backends[0].Owner] = true
	}
	if len(owners) < 2 {
		t.Errorf("12 keys all owned by %v: the check would not tell endpoints apart", owners)
	}
	for i := 1; i <= 6; i++ {
		ip := fmt.Sprintf("127.0.1.%d", i)
		r := traceLive(t, e, "--path", "/ip/x", "--client-ip", ip)
		if r.Route != "default/trace/by-ip" || r.Backends[0].Owner == "" || r.Hash.Parts[0].Value != ip {
			t.Fatalf("source IP %s: %+v", ip, r.Trace)
		}
	}
	for _, b := range bs[3:5] {
		r := traceLive(t, e, "--path", "/s", "--cookie", "sticky="+trafficmodel.EncodeSession(addr(b)))
		if r.Session == nil || !r.Session.Applies || r.Live.Upstream != addr(b) {
			t.Fatalf("session cookie for %s: %+v, live %+v", addr(b), r.Session, r.Live)
		}
	}
	for i := 0; i < 6; i++ {
		r := traceLive(t, e, "--path", "/w")
		if r.Route != "default/trace/weighted" || len(r.Backends) != 2 {
			t.Fatalf("weighted: %+v", r.Trace)
		}
		if p := r.Backends[0].Probability; p != 0.75 {
			t.Errorf("web's chance is %.2f, want 0.75 (weights 3:1)", p)
		}
	}
	out := lbctlOK(t, e.L, "trace", "trace", "--header", "x-user=alice", "--live")
	t.Logf("lbctl trace trace --header x-user=alice --live:\n%s", out)
}

const whatIfPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: zones}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {zoneFailover: [zone-a, zone-b]}
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 500ms, unhealthyThreshold: 2, healthyThreshold: 2, http: {path: /healthz}}
      endpoints:
{{- range $i, $b := .B}}
        - {address: 127.0.0.1, port: {{$b.Port}}, zone: {{if lt $i 5}}zone-a{{else}}zone-b{{end}}}
{{- end}}
`

// TestWhatIfFailoverMatchesTraffic: lbctl whatif predicts where traffic goes when zone-a loses 2 of its 5
// endpoints (Envoy's priority load: 140 × 3/5 = 84 % stays, 16 % fails over to zone-b); the endpoints are
// then killed and the traffic through Envoy is measured, at lbplane's defaults (implicit connect retry,
// ejection at the first refused connect); lbctl trace then reads the same health from lbplane's status.
func TestWhatIfFailoverMatchesTraffic(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a1", "a2", "a3", "a4", "a5", "b1", "b2")
	e := setupWith(t, whatIfPolicy, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "a1", "a2", "a3", "a4", "a5")
	waitSynced(t, e.L, 1)
	addr := func(b *Backend) string { return fmt.Sprintf("127.0.0.1:%d", b.Port) }

	out := lbctlOK(t, e.L, "whatif", "zones", "--down", "endpoint="+addr(bs[0]), "--down", "endpoint="+addr(bs[1]), "-o", "json")
	var pvs []trafficmodel.Preview
	if err := listItems(out, &pvs); err != nil || len(pvs) != 1 {
		t.Fatalf("lbctl whatif -o json: %v\n%s", err, out)
	}
	predicted := 0.0
	for _, c := range pvs[0].Changes {
		if c.Zone == "zone-b" {
			predicted += c.After
		}
	}
	t.Logf("lbctl whatif zones --down a1 --down a2:\n%s", lbctlOK(t, e.L, "whatif", "zones", "--down", "endpoint="+addr(bs[0]), "--down", "endpoint="+addr(bs[1])))

	bs[0].Stop()
	bs[1].Stop()
	// Readiness: lbplane's clusters have no update merge window, so Envoy hands a health change to its
	// workers in the same step that sets the flag /clusters shows.
	eventually(t, 20*time.Second, "Envoy marks a1 and a2 failed", func() error {
		c := e.E.Clusters(t)
		for _, b := range bs[:2] {
			if !strings.Contains(c, fmt.Sprintf("%s::health_flags::/failed_active_hc", addr(b))) {
				return fmt.Errorf("%s not failed yet:\n%s", addr(b), c)
			}
		}
		return nil
	})
	const n = 3000
	counts := newClient(true).Spread(t, e.URL, n, nil)
	measured := float64(counts["b1"]+counts["b2"]) / n
	if d := measured - predicted; d > 0.03 || d < -0.03 {
		t.Errorf("whatif predicted %.1f%% to zone-b; %.1f%% of %d requests went there through Envoy (%v)", 100*predicted, 100*measured, n, counts)
	}
	// The model is of Envoy's first picks: once /clusters shows the health, no pick may reach a killed
	// endpoint. Some did while Envoy merged health changes for a second before its workers saw them (see
	// update_merge_window in xdsbuild): the second endpoint kept a quarter of zone-a's traffic.
	for _, b := range bs[:2] {
		if n := hostCounter(t, e.E, "default/zones/app", addr(b), "cx_connect_fail"); n > 0 {
			t.Errorf("%d requests were still sent to %s after Envoy marked it failed:\n%s", n, addr(b), e.E.Clusters(t))
		}
	}
	t.Logf("predicted %.1f%% to zone-b, measured %.1f%% of %d: %v", 100*predicted, 100*measured, n, counts)

	// lbctl trace reads the health lbplane polled from Envoy into the policy's status.
	eventually(t, 30*time.Second, "lbctl trace sees a1 and a2 down", func() error {
		out, _, err := lbctl(t, e.L, "", "trace", "zones", "-o", "json")
		if err != nil {
			return err
		}
		var r trafficmodel.Trace
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return err
		}
		b := r.Backends[0]
		if len(b.Skipped) != 2 || b.Levels[0].Load != 84 || b.Levels[1].Load != 16 {
			return fmt.Errorf("skipped %v, levels %+v %+v", b.Skipped, *b.Levels[0], *b.Levels[1])
		}
		return nil
	})
	t.Logf("lbctl trace zones:\n%s", lbctlOK(t, e.L, "trace", "zones"))
}
