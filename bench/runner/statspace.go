package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// The stats row: does reading the Envoy's stats hold back config? lbplane reads each Envoy's stats port
// (/clusters and /stats/prometheus, answered on Envoy's main thread, which also applies xDS) every
// --proxy-stats-interval. With 10,000 policies on one Envoy, one change in 40-60 used to take 435-631 ms
// instead of about 20 (issue 31). This row fills one Envoy with -stats-policies policies, with its stats
// port read at lbplane's default interval, then with reading off, and times -stats-changes changes from
// outside the server (push sent → first 200 from the new backend) in each: p50 and p99 side by side. A third
// run reads everything at every interval (--proxy-stats-full-share 1), as lbplane did before it read only
// the busy clusters between full reads kept to a share of Envoy's main thread: the A/B of that.
var (
	statsPolicies   = flag.Int("stats-policies", 10000, "the stats row: policies on its one Envoy (at most 10,000)")
	statsChanges    = flag.Int("stats-changes", 100, "the stats row: timed changes per setting")
	statsAdminTimes = flag.Bool("stats-admin-times", false, "the stats row: before the changes, time each admin read lbplane could make (on Envoy's main thread) and print it")
	statsInterval   = flag.String("stats-interval", "2s", "the stats row: lbplane's --proxy-stats-interval for the 'stats on' run (its default)")
	statsSettings   = flag.String("stats-settings", "stats-on,stats-every-read,stats-off", "the stats row: which runs to make, comma-separated")
	statsLogLevel   = flag.String("stats-log-level", "", "the stats row: lbplane's --log-level (with -keep, each run's lbplane.log and changes.log, the changes' times, can be set side by side)")
)

func statsRow(ctx context.Context, e *env, cfg config, record func(runRecord)) error {
	n, changes := min(*statsPolicies, 10000), *statsChanges
	if cfg.Quick {
		n, changes = min(n, 200), min(changes, 10)
	}
	if err := startBackends(e, 2, cpBackendBase); err != nil {
		return err
	}
	defer e.stopBackends()
	ports := e.backendPorts()
	// stats-every-read reads everything at every interval, as lbplane did before it kept full reads to a
	// share of Envoy's main thread.
	for _, setting := range []struct{ name, interval, share string }{
		{"stats-on", *statsInterval, "0.01"}, {"stats-every-read", *statsInterval, "1"}, {"stats-off", "0", "0.01"},
	} {
		if !slices.Contains(strings.Split(*statsSettings, ","), setting.name) {
			continue
		}
		samples, err := statsRun(ctx, e, setting.name, setting.interval, setting.share, n, changes, ports, cfg.ProfileDir)
		if err != nil {
			return fmt.Errorf("stats row (%s): %w", setting.name, err)
		}
		rec := runRecord{Scenario: "stats-pacing", Peer: "lbplane", Variant: setting.name, API: "delta", Policies: n, Samples: samples, Valid: true,
			Note: "--proxy-stats-interval " + setting.interval + " --proxy-stats-full-share " + setting.share + "; push sent → first 200 from the new backend"}
		rec.P50, rec.P99 = percentile(samples, 50), percentile(samples, 99)
		record(rec)
		fmt.Fprintf(os.Stderr, "stats row %-16s %5d policies, %d changes: push→200 p50 %.1f ms p99 %.1f ms (p99/p50 %.2f)\n",
			setting.name, n, len(samples), rec.P50, rec.P99, rec.P99/max(rec.P50, 0.001))
	}
	return nil
}

// statsRun starts lbplane reading stats every interval ("0": never) and one Envoy with a stats port, fills
// n policies, and returns the times of the changes, in milliseconds.
func statsRun(ctx context.Context, e *env, name, interval, share string, n, changes int, ports []string, profileDir string) ([]float64, error) {
	dir := filepath.Join(e.dir, "stats-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	xds, apiAddr := fmt.Sprintf("127.0.0.1:%d", cpBase), fmt.Sprintf("127.0.0.1:%d", cpBase+1)
	metrics := []string{"--metrics-address", ""}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", cpBase+6)
	if profileDir != "" {
		metrics = pprofArgs(cpBase + 6)
	}
	args := serveArgs(dir, xds, apiAddr, append(metrics, "--proxy-stats-interval", interval)...)
	args = append(args, "--proxy-stats-full-share", share)
	if *statsLogLevel != "" {
		args = append(args, "--log-level", *statsLogLevel)
	}
	lb, err := serveLbplane(e, dir, apiAddr, 20*time.Second, args)
	if err != nil {
		return nil, err
	}
	defer lb.stop()
	c := &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: 10 * time.Minute}}
	if _, err := c.Apply(ctx, probe(ports[0], 1), false); err != nil {
		return nil, err
	}
	cfgPath, err := writeBootstrap(dir, envoybootstrap.Params{NodeID: "bench-stats", XDS: xds, Delta: true, AdminPort: cpBase + 2,
		InsecureAdminTCP: true, StatsPort: cpBase + 5, MaxConnections: 10000})
	if err != nil {
		return nil, err
	}
	envoy, err := startEnvoyWith(e, dir, "envoy", cfgPath)
	if err != nil {
		return nil, err
	}
	defer envoy.stop()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	serves := probeServes(client)
	if !waitFor(30*time.Second, func() bool { return serves(backendName(0)) }) {
		return nil, fmt.Errorf("the Envoy never served the probe policy")
	}
	for have := 0; have < n; {
		next := min(n, have+1000)
		if _, err := c.Apply(ctx, fillersOn("f", cpListenerPort, have, next, ports[0], func(int) string { return "" }), false); err != nil {
			return nil, fmt.Errorf("pushing %d policies: %w", next, err)
		}
		have = next
	}
	if !servesHost(client, fmt.Sprintf("f-%d.bench.local", n-1)) || !proxiesSynced(ctx, c, 10*time.Minute) {
		return nil, fmt.Errorf("the Envoy never took the config of %d policies", n)
	}
	if *statsAdminTimes {
		adminTimes(fmt.Sprintf("http://127.0.0.1:%d", cpBase+2), n)
	}
	if interval != "0" {
		// The reads have started, and one has read every cluster since the fill: the last filler's health is
		// known. A full read during the fill can time out behind the config Envoy is applying, and the next
		// waits its turn (up to two minutes): timing changes before that would time stats off.
		last := fmt.Sprintf("f-%d", n-1)
		read := func() bool {
			live, err := c.Live(ctx, "default", last)
			return err == nil && len(live.Backends) > 0
		}
		if !waitFor(5*time.Minute, func() bool { time.Sleep(100 * time.Millisecond); return read() }) {
			return nil, fmt.Errorf("lbplane never read the Envoy's stats of %s", last)
		}
		// The partial reads that follow a first full read ask for every cluster it found busy: two intervals
		// bring the reads to what they are in steady use, which is what the row times.
		d, err := time.ParseDuration(interval)
		if err != nil {
			return nil, err
		}
		time.Sleep(2 * d)
	}
	if profileDir != "" {
		// lbplane's CPU and allocations over the timed changes (ProfileSeconds), beside each run's changes.log.
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			return nil, err
		}
		go profileCPU(ctx, pprofAddr, filepath.Join(profileDir, "stats-"+name+"-cpu.pprof"))
		go profileURL(ctx, pprofAddr, fmt.Sprintf("allocs?seconds=%d", ProfileSeconds), filepath.Join(profileDir, "stats-"+name+"-allocs.pprof"))
	}
	var samples []float64
	changeLog, err := os.Create(filepath.Join(dir, "changes.log"))
	if err != nil {
		return nil, err
	}
	defer changeLog.Close()
	timeout := 1
	for i := range changes {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		target := (i + 1) % 2
		timeout = timeout%5 + 1
		sent := time.Now()
		if _, err := c.Apply(ctx, probe(ports[target], timeout), false); err != nil {
			return nil, err
		}
		if !waitFor(30*time.Second, func() bool { return serves(backendName(target)) }) {
			return nil, fmt.Errorf("change %d did not reach Envoy in 30s", i)
		}
		samples = append(samples, float64(time.Since(sent).Microseconds())/1000)
		fmt.Fprintf(changeLog, "%s change %d took %.1f ms\n", sent.UTC().Format(time.RFC3339Nano), i, samples[len(samples)-1])
		// Changes come at a person's pace, not back to back: spread them over the stats reads' cycle.
		time.Sleep(time.Duration(100+37*(i%11)) * time.Millisecond)
	}
	return samples, nil
}

// adminTimes times the admin reads lbplane makes or could make of an Envoy with n policies, each three times
// back to back, and prints the fastest and slowest with the answer's size: what each costs Envoy's main thread.
func adminTimes(base string, n int) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for _, path := range []string{
		"/ready",
		"/clusters?format=json",
		"/clusters",
		"/clusters?format=json&filter=" + url.QueryEscape("f-1/app"),
		"/stats/prometheus?usedonly&filter=" + url.QueryEscape(proxystats.StatsFilter),
		"/stats/prometheus?filter=" + url.QueryEscape(proxystats.StatsFilter),
		"/stats/prometheus?usedonly",
		"/stats?usedonly&format=json&filter=" + url.QueryEscape(`membership_(healthy|total)$`),
		"/stats?format=json&filter=" + url.QueryEscape(`^cluster\.probe\.`),
		"/stats?usedonly&type=Histograms&filter=" + url.QueryEscape(`upstream_rq_time`),
		"/stats?usedonly&format=json&type=Counters&filter=" + url.QueryEscape(`upstream_rq_total$`),
	} {
		var lo, hi time.Duration
		size := 0
		for i := range 3 {
			t := time.Now()
			resp, err := client.Get(base + path)
			if err != nil {
				fmt.Fprintf(os.Stderr, "admin %s: %v\n", path, err)
				break
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			d := time.Since(t)
			size = len(b)
			if i == 0 || d < lo {
				lo = d
			}
			hi = max(hi, d)
		}
		fmt.Fprintf(os.Stderr, "admin read at %d policies: %-90s %7.1f-%7.1f ms %9d bytes\n", n, path, lo.Seconds()*1000, hi.Seconds()*1000, size)
	}
}
