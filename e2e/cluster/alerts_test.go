//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/promseries"
	"github.com/lbplane/lbplane/internal/tools"
)

// metricsTargets are the scrape targets of the chart's lbplane metrics Service (headless: each lbplane pod),
// as Prometheus's Kubernetes service discovery finds them: host:port of each ready endpoint.
func (c *cluster) metricsTargets(t *testing.T) []string {
	t.Helper()
	svc := release + "-metrics"
	port := strings.TrimSpace(c.must(t, "", "-n", namespace, "get", "service", svc, "-o", `jsonpath={.spec.ports[?(@.name=="metrics")].port}`))
	out := c.must(t, "", "-n", namespace, "get", "endpointslices", "-l", "kubernetes.io/service-name="+svc, "-o",
		`jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}`)
	var targets []string
	for _, ip := range strings.Fields(out) {
		targets = append(targets, net.JoinHostPort(ip, port))
	}
	if len(targets) == 0 || port == "" {
		t.Fatalf("the Service %s has no ready endpoint on its metrics port (%q): %q", svc, port, out)
	}
	return targets
}

// scrape reads one target's /metrics, as Prometheus does (the chart puts no authentication on it: the
// metrics carry no secrets, and its NetworkPolicy option limits who reaches them).
func scrape(target string) ([]promseries.Sample, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + target + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET http://%s/metrics: %s", target, resp.Status)
	}
	return promseries.Parse(resp.Body)
}

// scrapeAll scrapes every target; each target's samples carry what Prometheus adds (job, namespace,
// instance) where they have none of their own (honorLabels, as the chart's ServiceMonitor says).
func scrapeAll(targets []string) (map[string][]promseries.Sample, error) {
	out := map[string][]promseries.Sample{}
	for _, tg := range targets {
		s, err := scrape(tg)
		if err != nil {
			return nil, err
		}
		out[tg] = s
	}
	return out, nil
}

// conditionSeries are the lbplane_policy_condition series of policy ns/name with value 1 in samples, as
// "condition=status/reason".
func conditionSeries(samples []promseries.Sample, ns, name string) map[string]bool {
	got := map[string]bool{}
	for _, s := range samples {
		if s.Name == "lbplane_policy_condition" && s.Labels["namespace"] == ns && s.Labels["name"] == name && s.Value == 1 {
			got[s.Labels["condition"]+"="+s.Labels["status"]+"/"+s.Labels["reason"]] = true
		}
	}
	return got
}

// anyTarget are the samples of every target of one scrape together.
func anyTarget(scrape map[string][]promseries.Sample) []promseries.Sample {
	var out []promseries.Sample
	for _, samples := range scrape {
		out = append(out, samples...)
	}
	return out
}

// chartRules are the chart's alert rules as rendered (metrics.prometheusRule.enabled), without their
// annotations (the chart's own promtool test, charts/lbplane/testdata/alerts-test.yaml, checks those).
func (c *cluster) chartRules(t *testing.T) []map[string]any {
	t.Helper()
	out := c.helmRun(t, "template", release, "charts/lbplane", "-n", namespace, "--set", "metrics.prometheusRule.enabled=true",
		"--show-only", "templates/prometheusrule.yaml")
	var rule struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &rule); err != nil || len(rule.Spec.Groups) == 0 {
		t.Fatalf("no PrometheusRule rendered (%v):\n%s", err, out)
	}
	for _, g := range rule.Spec.Groups {
		rules, _ := g["rules"].([]any)
		for _, r := range rules {
			delete(r.(map[string]any), "annotations")
		}
	}
	return rule.Spec.Groups
}

// withoutAlert is groups without the rule of alert name.
func withoutAlert(groups []map[string]any, name string) []map[string]any {
	var out []map[string]any
	for _, g := range groups {
		h := map[string]any{}
		for k, v := range g {
			h[k] = v
		}
		var rules []any
		for _, r := range g["rules"].([]any) {
			if r.(map[string]any)["alert"] != name {
				rules = append(rules, r)
			}
		}
		h["rules"] = rules
		out = append(out, h)
	}
	return out
}

const (
	scrapeEvery = 3 * time.Second
	// brokenService is demo's backend pods behind a port nothing listens on: the bad change.
	brokenService = `
apiVersion: v1
kind: Service
metadata: {name: demo-wrong-port, namespace: default}
spec:
  selector: {app: demo-backend}
  ports: [{name: http, port: 80, targetPort: 9999}]
`
	rolloutPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata:
  name: ro
  namespace: default
  annotations: {ANNOTATIONS}
spec:
  listener: {port: 10094, protocol: HTTP}
  rollout:
    stages: [{envoys: 1}, {percent: 100}]
    bakeTime: 30s
    analysis: {minRequests: 20}
  backends:
    - name: app
      service: {name: SERVICE, port: 80}
`
)

// rollbackAlert is issue 46's check on the real cluster: a staged change to a wrong backend port, under
// traffic through both Envoys, is rolled back by the chart's lbplane. lbplane's /metrics, scraped through the
// chart's metrics Service every 3 s over the rollout as Prometheus would, show the Programmed series turn
// False (RolledBack) and RolledBack True; those scrapes are the input series of a promtool test of the
// chart's alert rules, in which LbplaneRolloutRolledBack fires at the first scrape that shows the rollback
// and not before, LbplanePolicyNotProgrammed fires 5 minutes later, and the scrapes before the change alone
// fire neither. The same test with the rollback rule removed fails.
func (c *cluster) rollbackAlert(t *testing.T) {
	promtool := tools.Require(t, "promtool")
	c.must(t, brokenService, "apply", "-f", "-")
	apply := func(service, annotations string) {
		t.Helper()
		c.must(t, strings.NewReplacer("SERVICE", service, "ANNOTATIONS", annotations).Replace(rolloutPolicy), "apply", "-f", "-")
	}
	c.cleanup(t, func() {
		c.run("", "-n", "default", "delete", "lbp", "ro", "--ignore-not-found")
		c.run("", "-n", "default", "delete", "service", "demo-wrong-port", "--ignore-not-found")
	})
	apply("demo-backend", `lbplane.io/rollout-mode: "1"`)
	c.waitCondition(t, "default", "ro", "Ready", "True Ready")

	// Traffic through both Envoys for the whole rollout, about 20 requests a second.
	envoys := c.envoyPods(t)
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for _, ip := range envoys {
		wg.Add(1)
		go func(url string) {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				_, code, _ := answer(url, "ro")
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}(fmt.Sprintf("http://%s/", net.JoinHostPort(ip, "10094")))
	}
	defer wg.Wait()
	defer stop()

	targets := c.metricsTargets(t)
	var scrapes []map[string][]promseries.Sample
	scrapeOnce := func() map[string][]promseries.Sample {
		t.Helper()
		s, err := scrapeAll(targets)
		if err != nil {
			t.Fatalf("scraping lbplane: %v", err)
		}
		scrapes = append(scrapes, s)
		return s
	}
	// Every replica says what status says, whichever Envoys are connected to it, once the other replicas'
	// reports (every 2 s) have the Envoys' acknowledgements.
	eventually(t, 30*time.Second, "every lbplane replica's metrics say default/ro is Programmed", func() error {
		s, err := scrapeAll(targets)
		if err != nil {
			return err
		}
		for tg, samples := range s {
			if got := conditionSeries(samples, "default", "ro"); !got["Programmed=True/Programmed"] {
				return fmt.Errorf("%s: %v", tg, got)
			}
		}
		return nil
	})
	tick := time.NewTicker(scrapeEvery)
	defer tick.Stop()
	for i := 0; i < 3; i++ {
		scrapeOnce()
		<-tick.C
	}
	changed := len(scrapes)
	apply("demo-wrong-port", "")
	rolledBack, notProgrammed := -1, -1
	for i := 0; i < 60 && (rolledBack < 0 || notProgrammed < 0 || len(scrapes) < rolledBack+4); i++ { // at most 3 minutes
		<-tick.C
		got := conditionSeries(anyTarget(scrapeOnce()), "default", "ro")
		if rolledBack < 0 && got["RolledBack=True/RolledBack"] {
			rolledBack = len(scrapes) - 1
		}
		if notProgrammed < 0 && got["Programmed=False/RolledBack"] {
			notProgrammed = len(scrapes) - 1
		}
	}
	stop()
	wg.Wait()
	st := c.policyStatus(t, "default", "ro")
	t.Logf("requests during the rollout by status: %v; status.rollout %+v", codes, st.Rollout)
	if rolledBack < 0 || notProgrammed < 0 {
		t.Fatalf("lbplane's metrics never showed the rollback of default/ro in %d scrapes (last: %v)", len(scrapes), conditionSeries(anyTarget(scrapes[len(scrapes)-1]), "default", "ro"))
	}
	if st.Rollout == nil || st.Rollout.Phase != v1alpha1.RolloutRolledBack || st.Rollout.CandidateGeneration != 2 {
		t.Fatalf("the metrics show a rollback, status.rollout says %+v", st.Rollout)
	}
	for i := 0; i < changed; i++ {
		for tg, samples := range scrapes[i] {
			if got := conditionSeries(samples, "default", "ro"); len(got) == 0 || !got["Programmed=True/Programmed"] || got["RolledBack=True/RolledBack"] {
				t.Fatalf("before the change, scrape %d of %s: %v; want Programmed True and no rollback", i, tg, got)
			}
		}
	}
	for tg, samples := range scrapes[len(scrapes)-1] {
		if got := conditionSeries(samples, "default", "ro"); !got["Programmed=False/RolledBack"] || !got["RolledBack=True/RolledBack"] {
			t.Fatalf("after the rollback, %s: %v; want Programmed False and RolledBack True", tg, got)
		}
	}
	t.Logf("scraped every %s: the change at scrape %d, RolledBack True from scrape %d, Programmed False (RolledBack) from scrape %d",
		scrapeEvery, changed, rolledBack, notProgrammed)

	// The scrapes as promtool's input series: the families the rules read, this policy's series only (other
	// policies' conditions belong to other tests), up for each target.
	groups := c.chartRules(t)
	names := map[string]bool{}
	for _, g := range groups {
		for _, r := range g["rules"].([]any) {
			expr, _ := r.(map[string]any)["expr"].(string)
			for _, n := range promseries.Families(expr) {
				names[n] = true
			}
		}
	}
	if !names["lbplane_policy_condition"] {
		t.Fatalf("the chart's rules do not read lbplane_policy_condition: %v", names)
	}
	hold := int((5*time.Minute + 30*time.Second) / scrapeEvery)
	series := func(upTo int) []map[string]string {
		var out []map[string]string
		for _, tg := range targets {
			var per [][]promseries.Sample
			for _, s := range scrapes[:upTo] {
				var mine []promseries.Sample
				for _, x := range s[tg] {
					if n, ok := x.Labels["name"]; !ok || (n == "ro" && x.Labels["namespace"] == "default") {
						mine = append(mine, x)
					}
				}
				per = append(per, mine)
			}
			labels := map[string]string{"job": release + "-metrics", "namespace": namespace, "instance": tg}
			out = append(out, promseries.Series(per, labels, names, hold)...)
			out = append(out, map[string]string{"series": promseries.Sample{Name: "up", Labels: labels}.Key(), "values": fmt.Sprintf("1x%d", upTo+hold)})
		}
		return out
	}
	at := func(step int) string { return (time.Duration(step) * scrapeEvery).String() }
	alert := func(name string, step int, exp ...map[string]string) map[string]any {
		out := []map[string]any{}
		for _, labels := range exp {
			out = append(out, map[string]any{"exp_labels": labels})
		}
		return map[string]any{"alertname": name, "eval_time": at(step), "exp_alerts": out}
	}
	ro := map[string]string{"severity": "warning", "namespace": "default", "name": "ro", "reason": "RolledBack"}
	after5m := int(5*time.Minute/scrapeEvery) + 2
	tests := map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": scrapeEvery.String(),
		"tests": []map[string]any{{
			// The whole rollout.
			"interval":     scrapeEvery.String(),
			"input_series": series(len(scrapes)),
			"alert_rule_test": []map[string]any{
				alert("LbplaneRolloutRolledBack", changed-1),
				alert("LbplaneRolloutRolledBack", rolledBack-1),
				alert("LbplaneRolloutRolledBack", rolledBack, ro),
				alert("LbplanePolicyNotProgrammed", notProgrammed),
				alert("LbplanePolicyNotProgrammed", notProgrammed+after5m, ro),
				alert("LbplaneDown", notProgrammed+after5m),
			},
		}, {
			// No bad change: the scrapes before it, as if lbplane kept answering the same.
			"interval":     scrapeEvery.String(),
			"input_series": series(changed),
			"alert_rule_test": []map[string]any{
				alert("LbplaneRolloutRolledBack", changed+after5m),
				alert("LbplanePolicyNotProgrammed", changed+after5m),
			},
		}},
	}
	dir := t.TempDir()
	run := func(groups []map[string]any) (string, error) {
		rules, err := yaml.Marshal(map[string]any{"groups": groups})
		if err != nil {
			t.Fatal(err)
		}
		testFile, err := yaml.Marshal(tests)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"rules.yaml": rules, "alerts-test.yaml": testFile} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(promtool, "test", "rules", filepath.Join(dir, "alerts-test.yaml")).CombinedOutput()
		return string(out), err
	}
	if out, err := run(groups); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "alerts-test.yaml"))
		t.Fatalf("promtool test rules on the scraped series: %v\n%s\nthe test file:\n%.6000s", err, out, b)
	}
	if out, err := run(withoutAlert(groups, "LbplaneRolloutRolledBack")); err == nil || !strings.Contains(out, "LbplaneRolloutRolledBack") {
		t.Fatalf("promtool test rules without the rollback rule: %v, want a failure naming LbplaneRolloutRolledBack:\n%s", err, out)
	}
	t.Logf("promtool test rules: LbplaneRolloutRolledBack fires from the scraped rollback (%d series over %d scrapes), and the test fails without the rule",
		len(series(len(scrapes))), len(scrapes))
}
