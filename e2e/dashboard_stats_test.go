package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/serve"
)

const dashboardStatsPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: stats}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends:
    - name: app
      healthCheck:
        active: {type: HTTP, interval: 1s, timeout: 1s, unhealthyThreshold: 1, healthyThreshold: 1, http: {path: /healthz}}
      endpoints:
{{- range .B}}
        - {address: 127.0.0.1, port: {{.Port}}}
{{- end}}
`

// screenshot writes the page to the test's artifacts and, with LBPLANE_DASHBOARD_SCREENSHOTS set to a
// directory (docs/ for the pictures docs/operations.md shows), there too.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var png []byte
	run(t, ctx, 30*time.Second, "taking a screenshot", chromedp.FullScreenshot(&png, 100))
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv("LBPLANE_DASHBOARD_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pageTiles reads the selected policy's figures from the page.
const pageTiles = `Object.fromEntries([...document.querySelectorAll('#totals .tile')].map(x => [x.getAttribute('data-tile'), x.querySelector('.value').textContent]))`

// endpointRows reads the endpoint table: by address, its state, last check and downtime, and its buttons.
const endpointRows = `Object.fromEntries([...document.querySelectorAll('#endpoint-table tr.ep-row')].map(r => [r.getAttribute('data-endpoint'), {
  state: r.getAttribute('data-state'), cells: [...r.querySelectorAll('td')].map(c => c.textContent),
  downtime: +(r.querySelector('[data-downtime]')?.getAttribute('data-downtime') || 0),
  actions: [...r.querySelectorAll('button[data-action]')].map(b => b.getAttribute('data-action'))}]))`

type endpointRow struct {
	State    string   `json:"state"`
	Cells    []string `json:"cells"`
	Downtime int      `json:"downtime"`
	Actions  []string `json:"actions"`
}

// TestDashboardStatsAndEndpointActions drives the dashboard in headless chromium against lbplane, a real
// Envoy and three backends: the policy's responses by status class match what the test's client received,
// with the client-facing error rate, connections and bytes; each endpoint shows its last check, and an
// endpoint that fails its health check shows downtime, on the table and shaded on its chart, whose time axis
// follows the range chosen. A read-only session has no action and its request is refused; an admin session
// drains an endpoint (Envoy holds it DRAINING, the client's requests avoid it), puts it under maintenance
// (it leaves Envoy's cluster), and makes it ready again, as the push API's status shows.
func TestDashboardStatsAndEndpointActions(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	bs := startBackends(t, "a", "b", "c")
	l := startLbplane(t, "--proxy-stats-interval", "500ms")
	port := reservePort(t)
	target := fmt.Sprintf("http://127.0.0.1:%d/", port)
	envoy := startEnvoy(t, l, "envoy-stats", true)
	push(t, l, policy(t, dashboardStatsPolicy, map[string]any{"B": bs, "Port": port}))
	waitSynced(t, l, 1)
	addr := func(b *Backend) string { return "127.0.0.1:" + strconv.Itoa(b.Port) }
	eventuallySpread(t, target, "every endpoint serves", "a", "b", "c")
	roToken, err := os.ReadFile(filepath.Join(l.DataDir, serve.ReadOnlyTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	dash := l.APIURL + "/dashboard/"

	// The client's own responses: 2xx, 4xx and 5xx from the backends.
	c := newClient(true)
	got := map[int]int{}
	for i := range 90 {
		q := ""
		switch i % 9 {
		case 0:
			q = "?status=404"
		case 1:
			q = "?status=503"
		}
		_, code, err := doWith(c, target+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		got[code/100]++
	}
	if got[2] != 70 || got[4] != 10 || got[5] != 10 {
		t.Fatalf("the client got %v", got)
	}

	run(t, ctx, 30*time.Second, "logging in with the read-only token",
		chromedp.Navigate(dash+"?token="+url.QueryEscape(strings.TrimSpace(string(roToken)))),
		chromedp.WaitVisible(`#policies li[data-policy="default/stats"]`, chromedp.ByQuery))
	eventually(t, 30*time.Second, "the responses by class are those the client got, with the 5xx share", func() error {
		var tiles map[string]string
		if err := chromedp.Run(ctx, chromedp.Evaluate(pageTiles, &tiles)); err != nil {
			return err
		}
		// The window holds the test's earlier requests too (all 2xx): 4xx and 5xx are exact.
		n2, _ := strconv.Atoi(tiles["2xx"])
		if tiles["4xx"] != "10" || tiles["5xx"] != "10" || n2 < 70 {
			return fmt.Errorf("tiles %v", tiles)
		}
		if want := fmt.Sprintf("%.1f%%", 100*10/float64(n2+20)); tiles["error-rate"] != want {
			return fmt.Errorf("error rate %q, want %q (tiles %v)", tiles["error-rate"], want, tiles)
		}
		if tiles["bytes"] == "" || strings.HasPrefix(tiles["bytes"], "0 B") || tiles["connections"] == "" {
			return fmt.Errorf("tiles %v", tiles)
		}
		return nil
	})
	var cls map[string]string
	run(t, ctx, 10*time.Second, "reading the colours of conditions",
		chromedp.WaitVisible(`#conditions [data-condition="Programmed"]`, chromedp.ByQuery),
		chromedp.Evaluate(`({programmed: document.querySelector('#conditions [data-condition="Programmed"]').className,
		  rolledBack: condClass({type: "RolledBack", status: "True"}), notProgrammed: condClass({type: "Programmed", status: "False"}),
		  notRolledBack: condClass({type: "RolledBack", status: "False"}), unknown: condClass({type: "Accepted", status: "Unknown"})})`, &cls))
	if cls["programmed"] != "cond ok" || cls["rolledBack"] != "bad" || cls["notProgrammed"] != "bad" || cls["notRolledBack"] != "ok" || cls["unknown"] != "degraded" {
		t.Errorf("condition colours: %v", cls)
	}

	// Every endpoint: its last check a few seconds ago; the read-only session has no button.
	readRows := func() (map[string]endpointRow, error) {
		var rows map[string]endpointRow
		err := chromedp.Run(ctx, chromedp.Evaluate(endpointRows, &rows))
		return rows, err
	}
	eventually(t, 20*time.Second, "each endpoint healthy, with its last check", func() error {
		rows, err := readRows()
		if err != nil {
			return err
		}
		for _, b := range bs {
			r, ok := rows[addr(b)]
			if !ok || r.State != "healthy" || len(r.Actions) != 0 || len(r.Cells) < 13 || !strings.HasSuffix(r.Cells[11], "s ago") {
				return fmt.Errorf("%s: %+v", addr(b), r)
			}
		}
		return nil
	})
	var refused int
	run(t, ctx, 10*time.Second, "a drain from the read-only session",
		chromedp.Evaluate(`fetch('/dashboard/api/policies/default/stats/endpoint-state', {method: 'POST', headers: {'Content-Type': 'application/json'},
		  body: JSON.stringify({endpoint: '`+addr(bs[1])+`', state: 'Draining'})}).then(r => r.status)`, &refused, awaitPromise))
	if refused != 403 {
		t.Errorf("the read-only session's drain: %d, want 403", refused)
	}

	// c fails its health checks for a while: the table and the chart show its downtime.
	bs[2].SetHealth(503)
	eventually(t, 20*time.Second, "c shows ejected, down since the failed check", func() error {
		rows, err := readRows()
		if err != nil {
			return err
		}
		if r := rows[addr(bs[2])]; r.State != "ejected" || r.Downtime < 1 || !strings.Contains(r.Cells[12], "down since") {
			return fmt.Errorf("c: %+v", r)
		}
		return nil
	})
	bs[2].SetHealth(200)
	var spans int
	eventually(t, 30*time.Second, "c is back, its downtime kept and shaded on its chart", func() error {
		// (The history the page reads is fetched every 5 s.)
		rows, err := readRows()
		if err != nil {
			return err
		}
		if r := rows[addr(bs[2])]; r.State != "healthy" || r.Downtime < 1 || strings.Contains(r.Cells[12], "down since") {
			return fmt.Errorf("c: %+v", r)
		}
		if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`document.querySelectorAll('svg.series.rps[data-endpoint="%s"] rect.down-span').length`, addr(bs[2])), &spans)); err != nil {
			return err
		}
		if spans < 1 {
			return fmt.Errorf("%d shaded spans on c's chart", spans)
		}
		return nil
	})
	// The range selector: the time axis of 5 minutes has a tick a minute, that of an hour one every 10.
	var ticks []string
	run(t, ctx, 10*time.Second, "choosing 5 minutes",
		clickWhenThere(`#range button[data-range="300"]`),
		chromedp.Evaluate(`[...document.querySelector('svg.series.classes').querySelectorAll('text.axis')].map(x => x.textContent).filter(x => x.includes(':'))`, &ticks))
	if len(ticks) < 4 || len(ticks) > 6 {
		t.Errorf("5 minutes: axis %v", ticks)
	}
	run(t, ctx, 10*time.Second, "choosing an hour",
		clickWhenThere(`#range button[data-range="3600"]`),
		chromedp.Evaluate(`[...document.querySelector('svg.series.classes').querySelectorAll('text.axis')].map(x => x.textContent).filter(x => x.includes(':'))`, &ticks))
	if len(ticks) < 5 || len(ticks) > 7 || !strings.HasSuffix(ticks[0], "0") {
		t.Errorf("an hour: axis %v", ticks)
	}
	run(t, ctx, 10*time.Second, "back to 15 minutes", clickWhenThere(`#range button[data-range="900"]`))

	// The admin session drains b from the page.
	run(t, ctx, 30*time.Second, "logging in with the admin token",
		chromedp.Navigate(dash+"?token="+url.QueryEscape(token)+"#default%2Fstats"),
		chromedp.WaitVisible(fmt.Sprintf(`#endpoint-table tr[data-endpoint="%s"] button[data-action="Draining"]`, addr(bs[1])), chromedp.ByQuery))
	clickAction := func(endpoint, action string) {
		t.Helper()
		run(t, ctx, 30*time.Second, action+" "+endpoint,
			clickWhenThere(fmt.Sprintf(`#endpoint-table tr[data-endpoint="%s"] button[data-action="%s"]`, endpoint, action)),
			chromedp.WaitVisible(fmt.Sprintf(`#action-result[data-done="%s %s"]`, action, endpoint), chromedp.ByQuery))
	}
	overrides := func() []v1alpha1.EndpointOverrideStatus {
		p, err := l.Client.Get(context.Background(), "default", "stats")
		if err != nil {
			t.Fatal(err)
		}
		return p.Status.EndpointOverrides
	}
	clickAction(addr(bs[1]), "Draining")
	if ovs := overrides(); len(ovs) != 1 || ovs[0].State != v1alpha1.OverrideDraining || ovs[0].Endpoint != addr(bs[1]) || ovs[0].Backend != "app" {
		t.Errorf("after the drain, status: %+v", ovs)
	}
	if cl := envoy.Clusters(t); !strings.Contains(cl, addr(bs[1])+"::health_flags::/eds_status_draining") {
		t.Errorf("Envoy does not hold %s draining:\n%s", addr(bs[1]), cl)
	}
	if got := spreadOver(t, target, 30); got["b"] != 0 {
		t.Errorf("after the drain: %v", got)
	}
	eventually(t, 10*time.Second, "the page shows b draining, with Ready", func() error {
		rows, err := readRows()
		if err != nil {
			return err
		}
		if r := rows[addr(bs[1])]; r.State != "draining" || !strings.Contains(strings.Join(r.Actions, " "), "Ready") || strings.Contains(r.Cells[12], "down since") {
			return fmt.Errorf("b: %+v", r)
		}
		return nil
	})
	screenshot(t, ctx, "dashboard-stats.png")
	clickAction(addr(bs[1]), "Maintenance")
	eventually(t, 10*time.Second, "b leaves Envoy's cluster", func() error {
		if cl := envoy.Clusters(t); strings.Contains(cl, addr(bs[1])) {
			return fmt.Errorf("Envoy still has %s", addr(bs[1]))
		}
		return nil
	})
	eventually(t, 10*time.Second, "the page shows b under maintenance", func() error {
		rows, err := readRows()
		if err != nil {
			return err
		}
		if r := rows[addr(bs[1])]; r.State != "maintenance" {
			return fmt.Errorf("b: %+v", r)
		}
		return nil
	})
	clickAction(addr(bs[1]), "Ready")
	if ovs := overrides(); len(ovs) != 0 {
		t.Errorf("after ready, status: %+v", ovs)
	}
	eventuallySpread(t, target, "b serves again", "a", "b", "c")
}

// TestDashboardOverviewWithAThousandPolicies: with 1,000 policies on one Envoy (ten of them in a proxy
// group no Envoy serves, so not programmed), the overview counts them by state as the push API's status says, the list draws a bounded
// number with the failing first, and the filter and the counts find any one policy.
func TestDashboardOverviewWithAThousandPolicies(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	bs := startBackends(t, "a")
	l := startLbplane(t)
	port := reservePort(t)
	startEnvoy(t, l, "envoy-many", true)
	// Pushed a hundred at a time: one push of 1,000 outlasts the client's timeout on a busy machine.
	var doc strings.Builder
	for i := range 1000 {
		if i%100 == 0 && i > 0 {
			push(t, l, []byte(doc.String()))
			doc.Reset()
		}
		group := "default"
		if i%100 == 50 {
			group = "nowhere" // no Envoy of it: not programmed
		}
		fmt.Fprintf(&doc, `---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: p%04d}
spec:
  proxyGroup: %s
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP, hostnames: [h%04d.example.test]}
  backends:
    - name: app
      endpoints: [{address: 127.0.0.1, port: %d}]
`, i, group, port, i, bs[0].Port)
	}
	push(t, l, []byte(doc.String()))
	waitSynced(t, l, 1)
	// What the push API says: the policies with a condition in a bad state.
	var failing []string
	eventually(t, 60*time.Second, "every policy programmed but the ten no Envoy serves", func() error {
		ps, err := l.Client.List(context.Background())
		if err != nil {
			return err
		}
		failing = failing[:0]
		for _, p := range ps {
			for _, c := range p.Status.Conditions {
				if c.Status != "True" {
					failing = append(failing, p.Name)
					break
				}
			}
		}
		if len(ps) != 1000 || len(failing) != 10 {
			return fmt.Errorf("%d policies, %d failing: %v", len(ps), len(failing), failing)
		}
		return nil
	})

	run(t, ctx, 60*time.Second, "logging in",
		chromedp.Navigate(l.APIURL+"/dashboard/?token="+url.QueryEscape(token)),
		chromedp.WaitVisible(`#overview button[data-count="all"][data-value="1000"]`, chromedp.ByQuery))
	type listView struct {
		Counts map[string]int `json:"counts"`
		Items  []string       `json:"items"`
		States []string       `json:"states"`
		More   string         `json:"more"`
	}
	readList := `({counts: Object.fromEntries([...document.querySelectorAll('#overview button')].map(b => [b.getAttribute('data-count'), +b.getAttribute('data-value')])),
	  items: [...document.querySelectorAll('#policies li')].map(li => li.getAttribute('data-policy')),
	  states: [...document.querySelectorAll('#policies li')].map(li => li.getAttribute('data-state')),
	  more: document.getElementById('policies-more').textContent})`
	var v listView
	eventually(t, 30*time.Second, "the counts are the push API's, the list bounded with the failing first", func() error {
		if err := chromedp.Run(ctx, chromedp.Evaluate(readList, &v)); err != nil {
			return err
		}
		if v.Counts["all"] != 1000 || v.Counts["failing"] != 10 || v.Counts["failing"]+v.Counts["degraded"]+v.Counts["ok"] != 1000 {
			return fmt.Errorf("counts %v", v.Counts)
		}
		if len(v.Items) != 200 || v.States[0] != "failing" || v.States[9] != "failing" || v.States[10] == "failing" ||
			!strings.Contains(v.More, "Showing 200 of 1000") {
			return fmt.Errorf("%d listed, states %v..., %q", len(v.Items), v.States[:min(12, len(v.States))], v.More)
		}
		return nil
	})
	for _, name := range failing {
		if !strings.Contains(strings.Join(v.Items[:10], " "), "default/"+name) {
			t.Errorf("%s is not among the first listed: %v", name, v.Items[:10])
		}
	}
	// The filter finds one policy among the thousand, and the page shows it.
	run(t, ctx, 30*time.Second, "filtering",
		chromedp.SendKeys(`#filter`, "p0777", chromedp.ByID),
		chromedp.WaitVisible(`#policies li[data-policy="default/p0777"]`, chromedp.ByQuery),
		chromedp.Evaluate(readList, &v))
	if len(v.Items) != 1 || v.Items[0] != "default/p0777" {
		t.Errorf("filtered on p0777: %v (%q)", v.Items, v.More)
	}
	var heading string
	run(t, ctx, 30*time.Second, "selecting it",
		clickWhenThere(`#policies li[data-policy="default/p0777"]`),
		chromedp.WaitVisible(`#policies li.selected[data-policy="default/p0777"]`, chromedp.ByQuery),
		chromedp.Text(`#policy-name`, &heading, chromedp.ByID))
	if heading != "default/p0777" {
		t.Errorf("heading %q", heading)
	}
	// The failing count lists the ten, whatever the text filter.
	run(t, ctx, 30*time.Second, "showing the failing",
		chromedp.Evaluate(`{const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'))}`, nil),
		clickWhenThere(`#overview button[data-count="failing"]`),
		chromedp.Evaluate(readList, &v))
	if len(v.Items) != 10 || strings.Count(strings.Join(v.States, " "), "failing") != 10 {
		t.Errorf("the failing: %v %v", v.Items, v.States)
	}
	run(t, ctx, 10*time.Second, "showing all", clickWhenThere(`#overview button[data-count="all"]`))
	screenshot(t, ctx, "dashboard-overview.png")
}

// clickWhenThere clicks the element the CSS selector finds, once there is one, in one script: the page redraws
// its tables and lists as stats arrive, so a node found by one call can be gone by the next (chromedp.Click
// then fails with "Could not find node with given id").
func clickWhenThere(sel string) chromedp.Action {
	return chromedp.Poll(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) { return false; } e.click(); return true; })()`, sel), nil)
}
