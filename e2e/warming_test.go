package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// warmingInterval is how often TestStatusShowsEndpointsWarmingUp's lbplane reads the Envoy's stats.
const warmingInterval = 250 * time.Millisecond

// TestStatusShowsEndpointsWarmingUp: a third endpoint joins a round-robin backend with a 20 s slow-start
// window (Envoy's defaults otherwise: aggression 1, from 10 %) once the first two are past their own ramp.
// lbctl status shows it "warming" with the percentage of its weight trafficmodel's Ramp.Fraction gives for
// the time since the push, rising, and then no longer warming after the window; the other two never are.
// The dashboard, in a real headless chromium, says "warming N %" on the endpoint's row of the spread chart
// and "warming, N % of full weight" in its endpoint table, N within the same bounds.
//
// The tolerance: lbplane dates the ramp's start from the two reads of the Envoy between which the endpoint
// appeared, to within half the time between them (a read right after a push waits for the next interval:
// at most two intervals apart, so one interval off), and the status is of the last read, at most about an
// interval and a half old. The percentage is checked between what the ramp gives for the time from the
// push's end to the start of the lbctl status call, less two intervals and a second (the status
// computation), and for the time from the push's start to the call's end, plus an interval: with 250 ms
// reads, a 20 s window and an lbctl call of about a second under the race detector, a band of about 15
// points (measured: 10, 22, 38, 53, 70 and 85 % at 2.7, 5.8, 9.0, 12.1, 15.2 and 18.3 s after the push).
func TestStatusShowsEndpointsWarmingUp(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "warm1", "warm2", "warm3")
	tmpl := oneBackend("HTTP", fmt.Sprintf("{slowStart: {window: %s}}", slowStartWindow), false)
	e := &env{L: startLbplane(t, "--files-root", certs(""), "--proxy-stats-interval", warmingInterval.String()), Port: reservePort(t), B: bs[:2]}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", e.Port)
	e.E = startEnvoy(t, e.L, "envoy-"+strings.ReplaceAll(t.Name(), "/", "."), true)
	push(t, e.L, policy(t, tmpl, e))
	waitServing(t, e.URL, "warm1", "warm2")
	waitSynced(t, e.L, 1)
	third := fmt.Sprintf("127.0.0.1:%d", bs[2].Port)
	warming := func() (map[string]*int32, error) {
		b, err := backendStatus(t, e.L, "p", "app")
		if err != nil {
			return nil, err
		}
		out := map[string]*int32{}
		for _, ep := range b.PerEndpoint {
			out[ep.Address] = ep.WarmingPercent
		}
		if len(out) != len(e.B) {
			return out, fmt.Errorf("%d endpoints listed, want %d: %+v", len(out), len(e.B), b.PerEndpoint)
		}
		return out, nil
	}
	// The first two ramp from the cluster's creation on the Envoy: wait until status says they are past it.
	eventually(t, slowStartWindow+15*time.Second, "the first endpoints past their ramp", func() error {
		w, err := warming()
		if err != nil {
			return err
		}
		for a, p := range w {
			if p != nil {
				return fmt.Errorf("%s still warming: %d %%", a, *p)
			}
		}
		return nil
	})

	ramp := &trafficmodel.Ramp{Window: slowStartWindow, Aggression: 1, MinFraction: 0.1}
	e.B = bs
	pushed := time.Now()
	push(t, e.L, policy(t, tmpl, e))
	applied := time.Now()
	slack := 2*warmingInterval + time.Second
	var seen []int32
	for {
		from := time.Now()
		w, err := warming()
		to := time.Now()
		if err != nil {
			if to.Sub(pushed) > 10*time.Second {
				t.Fatalf("no status of the third endpoint: %v", err)
			}
			time.Sleep(warmingInterval)
			continue
		}
		for a, p := range w {
			if a != third && p != nil {
				t.Errorf("%s warming %d %% although it joined long ago", a, *p)
			}
		}
		lo := math.Floor(100 * ramp.Fraction(max(0, from.Sub(applied)-slack)))
		hi := math.Floor(100 * ramp.Fraction(to.Sub(pushed)+warmingInterval))
		p := w[third]
		if p == nil {
			if hi < 100 && len(seen) > 0 {
				t.Fatalf("%s after the push: not warming, want %.0f to %.0f %% (seen %v)", to.Sub(pushed).Round(time.Millisecond), lo, hi, seen)
			}
			if lo >= 100 {
				break // past the window, and status says so
			}
			if len(seen) == 0 && to.Sub(pushed) > 5*time.Second {
				t.Fatalf("the third endpoint never showed warming")
			}
			time.Sleep(warmingInterval)
			continue
		}
		t.Logf("%s after the push: warming, %d %% of full weight (the ramp gives %.0f to %.0f %%)", to.Sub(pushed).Round(time.Millisecond), *p, lo, hi)
		if len(seen) == 0 {
			dashboardWarming(t, e.L, third, ramp, pushed, applied, slack)
		}
		if float64(*p) < lo || float64(*p) > hi {
			t.Errorf("%s after the push: warming %d %%, want %.0f to %.0f %%", to.Sub(pushed).Round(time.Millisecond), *p, lo, hi)
		}
		if n := len(seen); n > 0 && *p < seen[n-1] {
			t.Errorf("the percentage went down: %v then %d", seen, *p)
		}
		seen = append(seen, *p)
		if to.Sub(pushed) > slowStartWindow+slack+5*time.Second {
			t.Fatalf("still warming %s after the push", to.Sub(pushed))
		}
		time.Sleep(2 * time.Second)
	}
	if len(seen) < 3 || seen[len(seen)-1] <= seen[0]+40 {
		t.Errorf("warming percentages %v: want it seen rising over the window", seen)
	}
}

// dashboardWarming logs in to the dashboard with the read-only token and reads what the spread chart and the
// endpoint table say of addr: "warming N %" and "healthy, warming, N % of full weight", N within what the
// ramp gives for the time since the push (see TestStatusShowsEndpointsWarmingUp).
func dashboardWarming(t *testing.T, l *Lbplane, addr string, ramp *trafficmodel.Ramp, pushed, applied time.Time, slack time.Duration) {
	t.Helper()
	ctx := browser(t)
	roToken, err := os.ReadFile(filepath.Join(l.DataDir, serve.ReadOnlyTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	chartSel := fmt.Sprintf(`svg.spread g.ep[data-endpoint="%s"] .ep-warming`, addr)
	tableSel := `#endpoint-table span.ep-state[data-warming]`
	from := time.Now()
	var chart, table string
	run(t, ctx, 30*time.Second, "the dashboard shows the endpoint warming",
		chromedp.Navigate(l.APIURL+"/dashboard/"),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		chromedp.SendKeys(`#token`, strings.TrimSpace(string(roToken)), chromedp.ByID),
		chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(chartSel, chromedp.ByQuery),
		chromedp.TextContent(chartSel, &chart, chromedp.ByQuery), // SVG text has no innerText
		chromedp.WaitReady(tableSel, chromedp.ByQuery),
		chromedp.TextContent(tableSel, &table, chromedp.ByQuery))
	to := time.Now()
	lo := math.Floor(100 * ramp.Fraction(max(0, from.Sub(applied)-slack)))
	hi := math.Floor(100 * ramp.Fraction(to.Sub(pushed)+2*warmingInterval+time.Second)) // the page refreshes every second
	t.Logf("%s after the push, the dashboard: chart %q, table %q (the ramp gives %.0f to %.0f %%)", to.Sub(pushed).Round(time.Millisecond), chart, table, lo, hi)
	m := regexp.MustCompile(`^warming (\d+) %$`).FindStringSubmatch(chart)
	if m == nil {
		t.Fatalf("the chart says %q, want \"warming N %%\"", chart)
	}
	if n, _ := strconv.Atoi(m[1]); float64(n) < lo || float64(n) > hi {
		t.Errorf("the chart says %q, want %.0f to %.0f %%", chart, lo, hi)
	}
	if !regexp.MustCompile(`^healthy, warming, \d+ % of full weight$`).MatchString(table) {
		t.Errorf("the endpoint table says %q, want \"healthy, warming, N %% of full weight\"", table)
	}
}
