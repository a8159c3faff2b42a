package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lbplane/lbplane/internal/tools"
	"github.com/lbplane/lbplane/version"
)

// scrape reads a Prometheus endpoint into "name{k=v,...}" → value, labels sorted by name.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			case m.GetUntyped() != nil:
				out[key] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// TestMetricsMoveWithPushesAndNacks scrapes lbplane before and after a push Envoy accepts and one it
// rejects, reads Envoy's own stats through its stats port, and checks the JSON log has one debug line per
// push and a warning per NACK.
func TestMetricsMoveWithPushesAndNacks(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "m1")
	l := startLbplane(t, "--log-format", "json")
	e := startEnvoy(t, l, "envoy-metrics", true)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", l.metricsPort)
	waitSynced(t, l, 1)
	before := scrape(t, metricsURL)
	if got := before["lbplane_connected_proxies{group=default}"]; got != 1 {
		t.Errorf("connected proxies of group default: %v", got)
	}
	if got := before["lbplane_proxy_sync{group=default,node=envoy-metrics,state=SYNCED}"]; got != 1 {
		t.Errorf("lbplane_proxy_sync of a synced Envoy: %v", filterMetrics(before, "lbplane_proxy_sync"))
	}
	// Every xDS counter is there at 0 before its first event, so that rate() alerts see it from the start.
	for _, typ := range []string{"Cluster", "ClusterLoadAssignment", "Listener", "RouteConfiguration", "ScopedRouteConfiguration", "Secret"} {
		k := "lbplane_xds_nacks_total{group=default,type=" + typ + "}"
		if v, ok := before[k]; !ok || v != 0 {
			t.Errorf("%s before any rejection: %v (present %v)", k, v, ok)
		}
	}

	port := reservePort(t)
	push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: m}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, healthCheck: {passive: {consecutive5xx: 5}}, endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]}]
`, map[string]any{"Port": port, "Backend": bs[0].Port}))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitServing(t, url, "m1")
	waitSynced(t, l, 1)

	pushBlocked(t, l, bs[0].Port)

	var after map[string]float64
	eventually(t, 20*time.Second, "a NACK of the listener counted", func() error {
		after = scrape(t, metricsURL)
		if after["lbplane_xds_nacks_total{group=default,type=Listener}"] < 1 {
			return fmt.Errorf("nacks: %v", filterMetrics(after, "lbplane_xds_nacks_total"))
		}
		// The Envoy that rejected the listener is NACKED, one series for it alone.
		if got := filterMetrics(after, "lbplane_proxy_sync{"); len(got) != 1 || got["lbplane_proxy_sync{group=default,node=envoy-metrics,state=NACKED}"] != 1 {
			return fmt.Errorf("lbplane_proxy_sync: %v", got)
		}
		return nil
	})
	// The rejected policy is not Programmed, in the count and in its own series; the accepted one is.
	eventually(t, 20*time.Second, "the rejected policy's Programmed=False series", func() error {
		after = scrape(t, metricsURL)
		if got := after["lbplane_policy_condition{condition=Programmed,name=blocked,namespace=default,reason=Rejected,status=False}"]; got != 1 {
			return fmt.Errorf("lbplane_policy_condition of default/blocked: %v", filterMetrics(after, "lbplane_policy_condition"))
		}
		if got := after["lbplane_policies{condition=Programmed,reason=Rejected,status=False}"]; got != 1 {
			return fmt.Errorf("lbplane_policies: %v", filterMetrics(after, "lbplane_policies"))
		}
		return nil
	})
	if got := after["lbplane_policy_condition{condition=Programmed,name=m,namespace=default,reason=Programmed,status=True}"]; got != 1 {
		t.Errorf("lbplane_policy_condition of default/m: %v", filterMetrics(after, "lbplane_policy_condition"))
	}
	for _, k := range []string{
		"lbplane_xds_pushes_total{type=Cluster}", "lbplane_xds_pushes_total{type=Listener}",
		"lbplane_xds_acks_total{type=Cluster}", "lbplane_xds_acks_total{type=ClusterLoadAssignment}",
		"lbplane_xds_push_duration_seconds{type=Listener}", "lbplane_translation_duration_seconds{}",
		"lbplane_store_operations_total{operation=apply,result=ok}",
		"lbplane_source_changes_total{kind=LoadBalancerPolicy,source=store}", "lbplane_config_versions_total{group=default}",
		"lbplane_api_requests_total{code=200,method=post,route=POST /v1/policies}",
	} {
		if after[k] <= before[k] {
			t.Errorf("%s did not move: %v → %v", k, before[k], after[k])
		}
	}
	if after["lbplane_snapshot_bytes{group=default}"] <= 0 {
		t.Errorf("snapshot bytes: %v", after["lbplane_snapshot_bytes{group=default}"])
	}

	// A refused call is counted with its code.
	req, _ := http.NewRequest(http.MethodGet, l.APIURL+"/v1/policies", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := scrape(t, metricsURL)["lbplane_api_requests_total{code=401,method=get,route=GET /v1/policies}"]; got != 1 {
		t.Errorf("401s counted: %v", got)
	}

	// Changes in, versions out: one push of three policies is three changes the store source received and
	// one new version of the group's config.
	c0 := scrape(t, metricsURL)
	var three []string
	for i := range 3 {
		three = append(three, string(policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: c{{.I}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]}]
`, map[string]any{"I": i, "Port": reservePort(t), "Backend": bs[0].Port})))
	}
	push(t, l, []byte(strings.Join(three, "---\n")))
	c1 := scrape(t, metricsURL)
	const changes, versions = "lbplane_source_changes_total{kind=LoadBalancerPolicy,source=store}", "lbplane_config_versions_total{group=default}"
	if d := c1[changes] - c0[changes]; d != 3 {
		t.Errorf("%s moved by %v for a push of three policies, want 3", changes, d)
	}
	if d := c1[versions] - c0[versions]; d < 1 || d > 2 {
		t.Errorf("%s moved by %v for one push, want 1 (a second only if something else changed meanwhile)", versions, d)
	}

	// Envoy's own stats, in Prometheus format, on the stats port; admin's other pages are not there.
	stats := fmt.Sprintf("http://127.0.0.1:%d", e.StatsPort)
	envoyStats := scrape(t, stats+"/stats/prometheus")
	if got := envoyStats["envoy_cluster_upstream_rq_total{envoy_cluster_name=default/m/app}"]; got < 1 {
		t.Errorf("envoy_cluster_upstream_rq_total of default/m/app through the stats port: %v", got)
	}
	checkDashboardMetrics(t, after, envoyStats)
	for _, path := range []string{"/quitquitquit", "/config_dump", "/logging", "/"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequest(method, stats+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s on the stats port: %s, want 404", method, path, resp.Status)
			}
		}
	}
	checkLogLines(t, l)

	resp, err = http.Post(stats+"/clusters", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /clusters on the stats port: %s, want 404", resp.Status)
	}
}

func checkLogLines(t *testing.T, l *Lbplane) {
	t.Helper()
	b, err := os.ReadFile(l.Process.log)
	if err != nil {
		t.Fatal(err)
	}
	var pushes, nacks int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		switch {
		case rec["msg"] == "push" && rec["level"] == "DEBUG":
			pushes++
			for _, k := range []string{"node", "group", "version", "types", "duration"} {
				if v, ok := rec[k]; !ok || v == "" {
					t.Errorf("push line without %s: %s", k, line)
				}
			}
		case rec["msg"] == "proxy rejected config":
			nacks++
			if rec["level"] != "WARN" || rec["node"] != "envoy-metrics" || rec["type"] != "Listener" || rec["error"] == "" {
				t.Errorf("NACK line: %s", line)
			}
		}
	}
	// The empty config, the policy, the rejected listener: at least three versions went out.
	if pushes < 3 || nacks < 1 {
		t.Errorf("%d push lines and %d NACK lines in the log", pushes, nacks)
	}
}

// checkDashboardMetrics fails for every metric the Grafana dashboard queries that neither lbplane nor
// Envoy exports: a renamed metric would otherwise leave an empty panel.
func checkDashboardMetrics(t *testing.T, scraped ...map[string]float64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "charts", "lbplane", "dashboards", "lbplane.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, m := range scraped {
		for k := range m {
			families[k[:strings.Index(k, "{")]] = true
		}
	}
	name := regexp.MustCompile(`\b(lbplane|envoy)_[a-z0-9_]+`)
	// Label names are not metrics: drop "by (...)" groupings and {...} selectors first.
	labels := regexp.MustCompile(`by \([^)]*\)|\{[^}]*\}`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(labels.ReplaceAllString(tg.Expr, ""), -1) {
				n++
				fam := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
				if !families[fam] {
					t.Errorf("dashboard panel %q queries %s, which nothing exports", p.Title, m)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d metric references found in the dashboard", n)
	}
}

// TestMetricsHealthAndErrors: the build, policies by condition and the error counters move as lbplane
// meets a bad config-dir file, a good policy and an Envoy whose stats port closes; /healthz and /readyz
// answer on the metrics port; --pprof serves there, with the admin token only.
func TestMetricsHealthAndErrors(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "h1")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: bad}\nspec: {listener: {port: -1}}\n"), 0o600)
	l := startLbplane(t, "--config-dir", dir, "--pprof", "--proxy-stats-interval", "200ms")
	base := fmt.Sprintf("http://127.0.0.1:%d", l.metricsPort)
	for _, path := range []string{"/healthz", "/readyz", "/debug/pprof/cmdline"} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if strings.HasPrefix(path, "/debug/pprof/") {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	e := startEnvoy(t, l, "envoy-health", true)
	port := reservePort(t)
	push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: good}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]}]
`, map[string]any{"Port": port, "Backend": bs[0].Port}))
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "h1")
	m := scrape(t, base+"/metrics")
	// The build is stamped: the release from version/VERSION and the commit the binary was built from.
	if rev := revisionLabel(m); rev == "" || rev == "unknown" {
		t.Errorf("lbplane_build_info has no revision: %v", filterMetrics(m, "lbplane_build_info"))
	}
	if m["lbplane_build_info{goversion="+runtimeVersion()+",revision="+revisionLabel(m)+",version="+version.Version+"}"] != 1 {
		t.Errorf("lbplane_build_info: %v", filterMetrics(m, "lbplane_build_info"))
	}
	if got := m["lbplane_policies{condition=Accepted,reason=Accepted,status=True}"]; got != 1 {
		t.Errorf("accepted policies: %v (%v)", got, filterMetrics(m, "lbplane_policies"))
	}
	if got := m["lbplane_policies{condition=ResolvedRefs,reason=ResolvedRefs,status=True}"]; got != 1 {
		t.Errorf("policies with resolved references: %v (%v)", got, filterMetrics(m, "lbplane_policies"))
	}
	if got := m["lbplane_errors_total{component=config_dir_reload}"]; got < 1 {
		t.Errorf("config-dir reload errors: %v", got)
	}
	if got := m["lbplane_errors_total{component=status_write}"]; got != 0 {
		t.Errorf("status write errors without Kubernetes: %v", got)
	}
	// The stats port closes (all listeners stopped through admin) while xDS stays up: reads fail.
	resp, err := adminDo(e, http.MethodPost, "/drain_listeners")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	eventually(t, 20*time.Second, "stats-poll errors counted", func() error {
		if got := scrape(t, base+"/metrics")["lbplane_errors_total{component=stats_poll}"]; got < 1 {
			return fmt.Errorf("stats_poll errors: %v", got)
		}
		return nil
	})
}

// runtimeVersion is the Go version the binaries were built with: the test's, as TestMain builds them.
func runtimeVersion() string { return runtime.Version() }

// revisionLabel is the revision label lbplane_build_info carries (the VCS revision, or unknown).
func revisionLabel(m map[string]float64) string {
	for k := range m {
		if _, rest, ok := strings.Cut(k, "lbplane_build_info{"); ok {
			if _, r, ok := strings.Cut(rest, "revision="); ok {
				return r[:strings.Index(r, ",")]
			}
		}
	}
	return ""
}

func filterMetrics(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}
