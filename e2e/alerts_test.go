package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/promseries"
	"github.com/lbplane/lbplane/internal/tools"
)

// scrapeSamples reads a Prometheus endpoint's counters and gauges.
func scrapeSamples(t *testing.T, url string) []promseries.Sample {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out, err := promseries.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// target is one scrape target's two readings, a minute apart in the series built from them.
type target struct {
	labels        map[string]string // what Prometheus adds: job, namespace, instance
	before, after []promseries.Sample
}

// inputSeries turns the targets' readings into promtool input series of steps one-minute samples: a gauge
// keeps its last reading, a counter grows by what it grew between the two readings every minute (as if the
// traffic between them went on), starting from its first reading (0 when it was not there yet). Only the
// families in names are kept. The target's labels are added where the series has none of its own, as the
// chart's ServiceMonitor for lbplane does (honorLabels).
func inputSeries(targets []target, names map[string]bool, steps int) []map[string]string {
	var out []map[string]string
	for _, tg := range targets {
		before := map[string]float64{}
		for _, s := range tg.before {
			before[s.Key()] = s.Value
		}
		for _, s := range tg.after {
			if !names[s.Name] {
				continue
			}
			values := fmt.Sprintf("%gx%d", s.Value, steps)
			if s.Counter {
				b := before[s.Key()]
				values = fmt.Sprintf("%g+%gx%d", b, s.Value-b, steps)
			}
			labels := map[string]string{}
			for k, v := range tg.labels {
				labels[k] = v
			}
			for k, v := range s.Labels {
				labels[k] = v
			}
			out = append(out, map[string]string{"series": promseries.Sample{Name: s.Name, Labels: labels}.Key(), "values": values})
		}
	}
	return out
}

// TestAlertsOnScrapedSeries holds the chart's alerts to series scraped from a real lbplane and two real
// Envoys: a staged rollout that a canary rejects is rolled back, and a policy's backend answers 500. The
// series read before and after become promtool's input, and the chart's rules, as rendered, must fire
// LbplaneRolloutRolledBack and LbplanePolicyNotProgrammed (reason RolledBack) for the rolled-back policy,
// LbplaneEnvoyRejectedConfig for the NACK's group and type, and LbplanePolicyErrorRate for the failing policy,
// and nothing for the healthy ones; with lbplane's targets gone, LbplaneDown. Every metric the alerts read
// must be among the scraped series.
func TestAlertsOnScrapedSeries(t *testing.T) {
	t.Parallel()
	promtool := tools.Require(t, "promtool")
	stable := startBackend(t, "stable", 0)
	broken := startBackend(t, "broken", 0)
	broken.FailWith(http.StatusInternalServerError)
	l := startLbplane(t)
	envoys := []*Envoy{startEnvoy(t, l, "envoy-alerts-a", true), startEnvoy(t, l, "envoy-alerts-b", true)}
	port, badPort := reservePort(t), reservePort(t)
	d := map[string]any{"Port": port, "Stable": stable.Port, "Bake": "10m", "Min": 20}
	// The first generation reaches every Envoy at once: there is nothing to compare it with.
	if _, err := l.Client.ApplyRollout(context.Background(), policy(t, rolloutPolicy, d), false, "immediate"); err != nil {
		t.Fatal(err)
	}
	push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: bad}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, healthCheck: {passive: {disabled: true}}, endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]}]
`, map[string]any{"Port": badPort, "Backend": broken.Port}))
	waitSynced(t, l, 2)
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d/", port), "stable")
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", l.metricsPort)
	statsURL := func(e *Envoy) string { return fmt.Sprintf("http://127.0.0.1:%d/stats/prometheus", e.StatsPort) }
	lbBefore := scrapeSamples(t, metricsURL)
	var envoyBefore [][]promseries.Sample
	for _, e := range envoys {
		envoyBefore = append(envoyBefore, scrapeSamples(t, statsURL(e)))
	}

	// 120 requests to the failing policy, each answered 500 by its backend: 2 a second once spread over a
	// minute of the series, above errorMinRate.
	c := newClient(false)
	for range 120 {
		if _, code, err := doWith(c, fmt.Sprintf("http://127.0.0.1:%d/", badPort), nil); err != nil || code != http.StatusInternalServerError {
			t.Fatalf("a request to the failing policy: %d %v", code, err)
		}
	}
	// A staged change whose listener the canary cannot bind (another socket holds the port): rolled back.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	d["Port"] = taken.Addr().(*net.TCPAddr).Port
	push(t, l, policy(t, rolloutPolicy, d))
	waitPhase(t, l, v1alpha1.RolloutRolledBack, 60*time.Second)
	waitSynced(t, l, 2)
	var lbAfter []promseries.Sample
	eventually(t, 20*time.Second, "the rollback in lbplane's series", func() error {
		lbAfter = scrapeSamples(t, metricsURL)
		got := map[string]bool{}
		for _, s := range lbAfter {
			if s.Name == "lbplane_policy_condition" && s.Labels["name"] == "ro" {
				got[s.Labels["condition"]+"="+s.Labels["status"]+"/"+s.Labels["reason"]] = true
			}
		}
		if !got["RolledBack=True/RolledBack"] || !got["Programmed=False/RolledBack"] {
			return fmt.Errorf("conditions of default/ro: %v", got)
		}
		return nil
	})
	targets := []target{{labels: map[string]string{"job": "x-lbplane-metrics", "namespace": "default", "instance": "lbplane-0"},
		before: lbBefore, after: lbAfter}}
	for i, e := range envoys {
		targets = append(targets, target{labels: map[string]string{"job": "x-lbplane-envoy-metrics", "namespace": "default", "instance": e.NodeID},
			before: envoyBefore[i], after: scrapeSamples(t, statsURL(e))})
	}

	// The chart's rules, as rendered, without their annotations (the chart's own promtool test checks those).
	var rf struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(chartRules(t), &rf); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			delete(r, "annotations")
			expr, _ := r["expr"].(string)
			for _, n := range promseries.Families(expr) {
				names[n] = true
			}
		}
	}
	scraped := map[string]bool{}
	for _, tg := range targets {
		for _, s := range tg.after {
			scraped[s.Name] = true
		}
	}
	for n := range names {
		if !scraped[n] {
			t.Errorf("the alerts read %s, which neither lbplane nor Envoy exports", n)
		}
	}

	// What the NACK counted, by group and type.
	var rejected []map[string]string
	before := map[string]float64{}
	for _, s := range lbBefore {
		before[s.Key()] = s.Value
	}
	for _, s := range lbAfter {
		if s.Name == "lbplane_xds_nacks_total" && s.Value > before[s.Key()] {
			rejected = append(rejected, map[string]string{"severity": "warning", "group": s.Labels["group"], "type": s.Labels["type"]})
		}
	}
	if !slices.ContainsFunc(rejected, func(m map[string]string) bool { return m["group"] == "default" && m["type"] == "Listener" }) {
		t.Errorf("the canary's NACK of the listener is not in lbplane_xds_nacks_total: %v", rejected)
	}

	const steps = 12
	series := inputSeries(targets, names, steps)
	up := func(values string) map[string]string {
		return map[string]string{"series": `up{instance="lbplane-0",job="x-lbplane-metrics",namespace="default"}`, "values": values}
	}
	alert := func(name string, at string, exp []map[string]string) map[string]any {
		out := []map[string]any{}
		for _, labels := range exp {
			out = append(out, map[string]any{"exp_labels": labels})
		}
		return map[string]any{"alertname": name, "eval_time": at, "exp_alerts": out}
	}
	rolledBack := map[string]string{"severity": "warning", "namespace": "default", "name": "ro", "reason": "RolledBack"}
	tests := map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":     "1m",
			"input_series": append(slices.Clone(series), up(fmt.Sprintf("1x%d", steps))),
			"alert_rule_test": []map[string]any{
				alert("LbplaneRolloutRolledBack", "1m", []map[string]string{rolledBack}),
				alert("LbplanePolicyNotProgrammed", "7m", []map[string]string{rolledBack}),
				alert("LbplaneEnvoyRejectedConfig", "2m", rejected),
				// 5 minutes after the recorded rates (a group of their own, a step behind) first exceed the share.
				alert("LbplanePolicyErrorRate", "9m", []map[string]string{{"severity": "critical", "namespace": "default", "name": "bad"}}),
				alert("LbplaneEnvoyNotSynced", "7m", nil),
				alert("LbplaneNoEnvoyConnected", "7m", nil),
				alert("LbplaneDown", "7m", nil),
			},
		}, {
			// lbplane's targets gone at minute 2 (the Deployment deleted): its series are marked stale.
			"interval":     "1m",
			"input_series": append(slices.Clone(series), up("1 1 1 stale")),
			"alert_rule_test": []map[string]any{
				alert("LbplaneDown", "6m", nil),
				alert("LbplaneDown", "9m", []map[string]string{{"severity": "critical"}}),
			},
		}},
	}
	rules, err := yaml.Marshal(map[string]any{"groups": rf.Groups})
	if err != nil {
		t.Fatal(err)
	}
	testFile, err := yaml.Marshal(tests)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"rules.yaml": rules, "alerts-test.yaml": testFile} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(promtool, "test", "rules", filepath.Join(dir, "alerts-test.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules on the scraped series (%d of them): %v\n%s", len(series), err, out)
	}
}
