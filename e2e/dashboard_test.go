package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/internal/tools"
)

const dashboardPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: dash}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      loadBalancing: {algorithm: LeastRequest}
      healthCheck:
        passive: {consecutive5xx: 3, interval: 1s, baseEjectionTime: 30s, maxEjectionPercent: 50}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// browser starts Debian's chromium headless with a fresh profile, with the flags this machine needs.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := tools.Require(t, "chromium")
	// Not t.TempDir: chromium's helper processes may still write to the profile while the test's cleanup
	// removes it, which t.TempDir reports as a failure.
	profile, err := os.MkdirTemp("", "lbplane-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Loopback only, whatever proxy the environment names.
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 1100),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting %s: %v (install it with `hack/tools.sh chromium`)", bin, err)
	}
	return ctx
}

// run runs browser actions with a bound, failing the test on error.
func run(t *testing.T, ctx context.Context, timeout time.Duration, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// awaitPromise lets Evaluate wait for a promise's value.
func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// chartEndpoint is one endpoint as the spread chart shows it.
type chartEndpoint struct {
	Requests int    `json:"requests"`
	State    string `json:"state"`
	Share    string `json:"share"`
}

// readChart reads the spread chart's numbers from the page: the text it shows, not the data it came from.
const readChart = `Object.fromEntries([...document.querySelectorAll('svg.spread g.ep')].map(g => [g.getAttribute('data-endpoint'), {
  requests: parseInt(g.querySelector('.ep-requests').textContent, 10),
  state: g.querySelector('.ep-state').textContent,
  share: g.querySelector('.ep-share').textContent}]))`

// TestDashboardInABrowser logs in to the dashboard in a real headless chromium, against lbplane, a real
// Envoy and three backends: the spread chart's numbers match what the test's own client sent, the chart
// names what the expected shares leave out (least request under concurrent requests), a killed backend
// shows as ejected within 3 s, and a wrong token gets no data.
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	bs := startBackends(t, "a", "b", "c")
	// Stats read every half second: the page refreshes every second, and an ejection must show within 3 s.
	l := startLbplane(t, "--proxy-stats-interval", "500ms")
	port := reservePort(t)
	target := fmt.Sprintf("http://127.0.0.1:%d", port)
	envoy := startEnvoy(t, l, "envoy-dash", true)
	push(t, l, policy(t, dashboardPolicy, map[string]any{"B": bs, "Port": port}))
	waitSynced(t, l, 1)
	roToken, err := os.ReadFile(filepath.Join(l.DataDir, serve.ReadOnlyTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	dash := l.APIURL + "/dashboard/"
	addr := func(b *Backend) string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

	// A wrong token: the login form says so, no session cookie is set, and every data call is refused.
	var loginError string
	run(t, ctx, 30*time.Second, "logging in with a wrong token",
		chromedp.Navigate(dash),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		chromedp.SendKeys(`#token`, "wrong-token", chromedp.ByID),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#login-error`, chromedp.ByID),
		chromedp.Text(`#login-error`, &loginError, chromedp.ByID))
	var statuses []int
	run(t, ctx, 30*time.Second, "calling the data endpoints without a session",
		chromedp.Evaluate(`Promise.all(['/dashboard/api/state', '/dashboard/api/policies/default/dash', '/dashboard/api/events?policy=default/dash']
		  .map(u => fetch(u, {credentials: 'same-origin'}).then(r => r.status)))`, &statuses, awaitPromise))
	for i, s := range statuses {
		if s != http.StatusUnauthorized {
			t.Errorf("data call %d without a session: status %d, want 401", i, s)
		}
	}
	if loginError != "wrong token" || len(statuses) != 3 {
		t.Fatalf("wrong token: error %q, statuses %v", loginError, statuses)
	}

	// The right (read-only) token through the login form.
	var location string
	run(t, ctx, 30*time.Second, "logging in",
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		chromedp.SendKeys(`#token`, strings.TrimSpace(string(roToken)), chromedp.ByID),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#policies li[data-policy="default/dash"]`, chromedp.ByQuery),
		chromedp.Location(&location))
	if u, _ := url.Parse(location); u == nil || u.RawQuery != "" || u.Path != "/dashboard/" {
		t.Errorf("after login the page is at %q; want the clean /dashboard/", location)
	}

	// The chart lists the three endpoints before any request is sent, so the counts it shows start at 0.
	var chart map[string]chartEndpoint
	run(t, ctx, 30*time.Second, "the chart shows the three endpoints",
		chromedp.WaitVisible(`svg.spread g.ep:nth-of-type(3)`, chromedp.ByQuery),
		chromedp.Evaluate(readChart, &chart))
	for _, b := range bs {
		if e, ok := chart[addr(b)]; !ok || e.Requests != 0 || e.State != "healthy" {
			t.Fatalf("before traffic, %s: %+v (chart %v)", addr(b), e, chart)
		}
	}

	// The test's own traffic, counted by the backend that answered.
	c := newClient(true)
	sent := map[string]int{}
	eventually(t, 30*time.Second, "Envoy's listener answers", func() error {
		b, err := requestVia(c, target, nil)
		if err == nil {
			sent[b]++
		}
		return err
	})
	for b, n := range c.Spread(t, target, 600, nil) {
		sent[b] += n
	}
	eventually(t, 20*time.Second, "the chart shows the requests the client sent (within 5 %)", func() error {
		if err := chromedp.Run(ctx, chromedp.Evaluate(readChart, &chart)); err != nil {
			return err
		}
		for _, b := range bs {
			got, want := chart[addr(b)].Requests, sent[b.Name]
			if float64(got) < 0.95*float64(want) || float64(got) > 1.05*float64(want) {
				return fmt.Errorf("%s (%s): chart %d, client sent %d; chart %v", b.Name, addr(b), got, want, chart)
			}
		}
		return nil
	})
	t.Logf("client sent %v; the chart shows %v", sent, chart)
	// What the expected shares leave out is under the chart, as lbctl trace and status say it.
	var caveats string
	run(t, ctx, 20*time.Second, "the chart names what the expected shares leave out",
		chromedp.WaitVisible(`ul.caveats[data-backend="app"] li.caveat`, chromedp.ByQuery),
		chromedp.TextContent(`ul.caveats[data-backend="app"]`, &caveats, chromedp.ByQuery))
	if !strings.Contains(caveats, "not predicted: least request: under concurrent requests Envoy sends more to the endpoints with fewer requests in flight") {
		t.Errorf("caveats under the chart: %q", caveats)
	}

	// The Envoy's sync state and the policy's YAML and resources are on the page.
	var page struct{ Proxy, YAML, Resources string }
	eventually(t, 10*time.Second, "the page shows the Envoy SYNCED, the policy's YAML and its Envoy resources", func() error {
		err := chromedp.Run(ctx, chromedp.Evaluate(`({
		  proxy: document.querySelector('#proxies [data-node="envoy-dash"]')?.textContent || "",
		  yaml: document.getElementById('yaml').textContent,
		  resources: document.getElementById('resources').textContent})`, &page))
		if err == nil && (page.Proxy != "SYNCED" || !strings.Contains(page.YAML, "name: dash") || !strings.Contains(page.Resources, "default/dash/app")) {
			err = fmt.Errorf("%+v", page)
		}
		return err
	})

	// Kill a backend under load: the chart marks it ejected within 3 s of the kill.
	load := startLoad(target, 60, 3, time.Minute)
	defer load.Stop()
	dead := bs[2]
	killed := time.Now()
	dead.Stop()
	sel := fmt.Sprintf(`svg.spread g.ep[data-endpoint="%s"][data-state="ejected"]`, addr(dead))
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = chromedp.Run(wctx, chromedp.WaitVisible(sel, chromedp.ByQuery))
	cancel()
	if err != nil {
		t.Fatalf("%s not shown ejected within 3 s of the kill: %v\nEnvoy: %s", addr(dead), err, envoy.Clusters(t))
	}
	t.Logf("%s shown ejected %s after the kill", addr(dead), time.Since(killed).Round(10*time.Millisecond))
	var events string
	run(t, ctx, 10*time.Second, "the health event is logged",
		chromedp.WaitVisible(`#events li.bad`, chromedp.ByQuery),
		chromedp.TextContent(`#events`, &events, chromedp.ByID))
	if !strings.Contains(events, addr(dead)+" ejected") {
		t.Errorf("events: %q", events)
	}

	// lbctl status shows the same per endpoint, summed and per Envoy.
	out := lbctlOK(t, l, "status", "dash", "--per-proxy")
	for _, want := range []string{"OBSERVED", addr(dead), "ejected on 1 of 1: outlier detection", "envoy-dash",
		"(not predicted, backend app: least request: under concurrent requests"} {
		if !strings.Contains(out, want) {
			t.Errorf("lbctl status dash --per-proxy lacks %q:\n%s", want, out)
		}
	}

	// The history is the server's: after a reload the page still shows the ejection (as many as lbctl events
	// lists), the policy flagged as degraded, and each endpoint's series, whose last reading matches the rate
	// the test's own client sends to it.
	loadStart := time.Now()
	load.mu.Lock()
	before := maps.Clone(load.Backends)
	load.mu.Unlock()
	run(t, ctx, 30*time.Second, "reloading the page",
		chromedp.Reload(),
		chromedp.WaitVisible(fmt.Sprintf(`#events li[data-type="Ejected"][data-endpoint="%s"]`, addr(dead)), chromedp.ByQuery),
		chromedp.WaitVisible(`#policies li[data-policy="default/dash"][data-degraded="true"]`, chromedp.ByQuery))
	var pageEjections int
	run(t, ctx, 10*time.Second, "counting the ejections on the page",
		chromedp.Evaluate(`document.querySelectorAll('#events li[data-type="Ejected"]').length`, &pageEjections))
	serverEjections := 0
	for _, ev := range eventsOf(t, l, "dash") {
		if ev.Type == "Ejected" {
			serverEjections++
		}
	}
	if pageEjections == 0 || pageEjections != serverEjections {
		t.Errorf("after a reload the page shows %d ejections, lbctl events %d", pageEjections, serverEjections)
	}
	type seriesView struct {
		Points int     `json:"points"`
		Last   float64 `json:"last"`
	}
	readSeries := `Object.fromEntries([...document.querySelectorAll('svg.series.rps')].map(s => [s.getAttribute('data-endpoint'),
	  {points: +s.getAttribute('data-points'), last: +s.getAttribute('data-last')}]))`
	eventually(t, 40*time.Second, "the series show the client's rate to each live endpoint, and nothing to the dead one", func() error {
		var series map[string]seriesView
		var p99 int
		if err := chromedp.Run(ctx, chromedp.Evaluate(readSeries, &series),
			chromedp.Evaluate(`+(document.querySelector('svg.series.p99')?.getAttribute('data-points') || 0)`, &p99)); err != nil {
			return err
		}
		load.mu.Lock()
		elapsed := time.Since(loadStart).Seconds()
		rates := map[string]float64{}
		for _, b := range bs[:2] {
			rates[addr(b)] = float64(load.Backends[b.Name]-before[b.Name]) / elapsed
		}
		load.mu.Unlock()
		if len(series) != 3 || p99 == 0 {
			return fmt.Errorf("series %v, p99 points %d", series, p99)
		}
		for a, rate := range rates {
			s := series[a]
			if s.Points == 0 || rate <= 0 || s.Last < 0.4*rate || s.Last > 2.5*rate {
				return fmt.Errorf("%s: last reading %.1f rps over %d points; the client sends it %.1f/s", a, s.Last, s.Points, rate)
			}
		}
		if s := series[addr(dead)]; s.Last != 0 {
			return fmt.Errorf("the dead endpoint's last reading is %.1f rps", s.Last)
		}
		t.Logf("after a reload: series %v; client rates %v", series, rates)
		return nil
	})

	var png []byte
	run(t, ctx, 30*time.Second, "taking a screenshot", chromedp.FullScreenshot(&png, 100))
	shot := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
	if p := os.Getenv("LBPLANE_DASHBOARD_SCREENSHOT"); p != "" {
		// The README's picture: LBPLANE_DASHBOARD_SCREENSHOT=$PWD/docs/dashboard.png go test -run TestDashboardInABrowser ./e2e
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The ?token= exchange ends on the clean URL too.
	run(t, ctx, 30*time.Second, "the ?token= exchange",
		chromedp.Navigate(dash+"?token="+url.QueryEscape(strings.TrimSpace(string(roToken)))),
		chromedp.WaitVisible(`#policies li`, chromedp.ByQuery),
		chromedp.Location(&location))
	if strings.Contains(location, "token") {
		t.Errorf("the token stayed in the URL: %s", location)
	}
}
