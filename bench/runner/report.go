package main

import (
	"github.com/lbplane/lbplane/bench/internal/benchstat"

	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type memorySeries struct {
	Peer   string     `json:"peer"`
	Points []memPoint `json:"points"`
}

type report struct {
	Config    config            `json:"config"`
	Machine   map[string]string `json:"machine"`
	Command   string            `json:"command"`
	Started   time.Time         `json:"started"`
	Finished  time.Time         `json:"finished"`
	Runs      []runRecord       `json:"-"`
	Memory    []memorySeries    `json:"-"`
	Summary   []summaryRow      `json:"summary"`
	Hash      []hashResult      `json:"hash,omitempty"`
	HotKey    []hotKeyResult    `json:"hotKey,omitempty"`
	Health    []healthResult    `json:"health,omitempty"`
	WebSocket []wsResult        `json:"webSocket,omitempty"`
	Rollout   *rolloutRun       `json:"rollout,omitempty"`
	// GatewayRoutes is the gateway-routes row's plan (gatewayroutes.go), when it ran.
	GatewayRoutes *gatewayRoutesPlan `json:"gatewayRoutes,omitempty"`

	out string // the results directory, set by write
}

// stat3 is the median of the repetitions with their min and max.
type stat3 = benchstat.Stat3

func stats(xs []float64) stat3 { return benchstat.Of(xs) }

type summaryRow struct {
	Scenario string `json:"scenario"`
	Peer     string `json:"peer"`
	Conns    int    `json:"conns,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	Variant  string `json:"variant,omitempty"`
	API      string `json:"api,omitempty"`
	Policies int    `json:"policies,omitempty"`
	Runs     int    `json:"runs"`
	Invalid  int    `json:"invalid"`
	RPS      stat3  `json:"rps"`
	P50      stat3  `json:"p50Ms"`
	P90      stat3  `json:"p90Ms"`
	P99      stat3  `json:"p99Ms"`
	P999     stat3  `json:"p999Ms"`
	CPU      stat3  `json:"cpuMicrosPerRequest"`
	RSS      stat3  `json:"peakRssBytes"`
	IdleRSS  stat3  `json:"idleRssBytes"`
	Errors   int64  `json:"errors"`
	LoadGen  stat3  `json:"loadGenCoreShare"`
	// Control plane.
	CPUPerChange stat3     `json:"lbplaneCpuMsPerChange"`
	LbplaneRSS   stat3     `json:"lbplaneRssBytes"`
	Samples      []float64 `json:"samplesMs,omitempty"`
	PushSamples  []float64 `json:"pushSamplesMs,omitempty"`
}

func (r *report) summarize() {
	type key struct {
		scenario, peer, protocol, variant, api string
		conns, policies                        int
	}
	groups := map[key][]runRecord{}
	var order []key
	for _, run := range r.Runs {
		k := key{run.Scenario, run.Peer, run.Protocol, run.Variant, run.API, run.Conns, run.Policies}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], run)
	}
	for _, k := range order {
		row := summaryRow{Scenario: k.scenario, Peer: k.peer, Conns: k.conns, Protocol: k.protocol, Variant: k.variant, API: k.api, Policies: k.policies}
		var rps, p50, p90, p99, p999, cpu, rss, idle, gen, cpc, lrss []float64
		for _, run := range groups[k] {
			row.Runs++
			row.Errors += run.Errors
			if !run.Valid {
				row.Invalid++
				continue
			}
			rps, p50, p90, p99, p999 = append(rps, run.RPS), append(p50, run.P50), append(p90, run.P90), append(p99, run.P99), append(p999, run.P999)
			cpu, rss, gen = append(cpu, run.CPUMicrosPerRequest), append(rss, float64(run.PeakRSSBytes)), append(gen, run.LoadGenCoreShare)
			cpc, lrss = append(cpc, run.LbplaneCPUPerChangeMs), append(lrss, float64(run.LbplaneRSS))
			idle = append(idle, float64(run.IdleRSSBytes))
			row.Samples = append(row.Samples, run.Samples...)
			row.PushSamples = append(row.PushSamples, run.PushSamples...)
		}
		row.RPS, row.P50, row.P90, row.P99, row.P999 = stats(rps), stats(p50), stats(p90), stats(p99), stats(p999)
		row.CPU, row.RSS, row.LoadGen, row.CPUPerChange, row.LbplaneRSS = stats(cpu), stats(rss), stats(gen), stats(cpc), stats(lrss)
		row.IdleRSS = stats(idle)
		r.Summary = append(r.Summary, row)
	}
}

func (r *report) rows(scenario string) []summaryRow {
	var out []summaryRow
	for _, s := range r.Summary {
		if s.Scenario == scenario {
			out = append(out, s)
		}
	}
	return out
}

func (r *report) find(scenario, peer string, conns int) (summaryRow, bool) {
	for _, s := range r.Summary {
		if s.Scenario == scenario && s.Peer == peer && s.Conns == conns {
			return s, true
		}
	}
	return summaryRow{}, false
}

func (r *report) write(out string) error {
	r.out = out
	r.summarize()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.json"), b, 0o644); err != nil {
		return err
	}
	if b, err = json.Marshal(r.Memory); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "memory.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "REPORT.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	mpl, err := exec.Command(filepath.Join(repoRoot, "hack", "tools.sh"), "path-matplotlib").Output()
	if err != nil {
		return err
	}
	plot := exec.Command("python3", filepath.Join(repoRoot, "bench", "plot.py"), out)
	plot.Env = append(os.Environ(), "PYTHONPATH="+strings.TrimSpace(string(mpl)), "MPLBACKEND=Agg")
	plot.Stdout, plot.Stderr = os.Stderr, os.Stderr
	if err := plot.Run(); err != nil {
		return fmt.Errorf("plotting: %w", err)
	}
	fmt.Fprintf(os.Stderr, "results in %s\n", out)
	return nil
}

// rerender reads a results directory back (summary.json, runs.jsonl, memory.json) and writes its REPORT.md
// and plots again: a change to the report's wording or tables without running the benchmarks again.
func rerender(dir string) error {
	r := &report{}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, r); err != nil {
		return fmt.Errorf("summary.json: %w", err)
	}
	r.Summary = nil
	if b, err = os.ReadFile(filepath.Join(dir, "runs.jsonl")); err != nil {
		return err
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var run runRecord
		if err := json.Unmarshal([]byte(line), &run); err != nil {
			return fmt.Errorf("runs.jsonl line %d: %w", i+1, err)
		}
		r.Runs = append(r.Runs, run)
	}
	if b, err = os.ReadFile(filepath.Join(dir, "memory.json")); err == nil {
		if err := json.Unmarshal(b, &r.Memory); err != nil {
			return fmt.Errorf("memory.json: %w", err)
		}
	}
	return r.write(dir)
}

func mib(b float64) string { return fmt.Sprintf("%.0f", b/(1<<20)) }

func rng(s stat3, format string) string {
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.Median, s.Min, s.Max)
}

func (r *report) markdown() string {
	if r.rolloutOnly() {
		return r.rolloutReport()
	}
	if r.gatewayRoutesOnly() {
		return r.gatewayRoutesReport(r.out)
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# lbplane benchmark report\n\n")
	w("Command: `%s` (started %s, took %s).\n\n", r.Command, r.Started.Format(time.RFC3339), r.Finished.Sub(r.Started).Round(time.Second))
	w("Machine:\n\n")
	for _, k := range sortedKeys(r.Machine) {
		w("- %s: %s\n", k, r.Machine[k])
	}
	w("\nEvery peer runs on loopback with one worker (Envoy `--concurrency 1`, nginx `worker_processes 1`, HAProxy `nbthread 1`, Traefik `GOMAXPROCS=1`) in front of the same three Go backends (1 KiB responses, no delay); configs in `bench/peers/`. Runs are interleaved (each repetition goes over every peer, the order rotated) and repeated %d times; tables give the median with (min–max). The machine has two cores shared by the load generator, the peer and the backends, so the absolute numbers are low and noisy: compare peers within a table. CPU µs/request is the peer's own CPU time (its whole process tree, from /proc) divided by the requests it served, the fairest figure on a shared machine.\n\n", r.Config.Reps)

	w("## Throughput and latency against concurrency (wrk, %s per run)\n\n", r.Config.WrkDuration)
	w("RSS at this load is from the memory runs below (a fresh process at that connection count); the throughput runs share one process per peer over every load, so their own peak (in `runs.jsonl`) is a high-water mark of the whole run.\n\n")
	w("| peer | connections | requests/s | p50 ms | p90 ms | p99 ms | p99.9 ms | CPU µs/request | RSS MiB at this load | errors | invalid runs |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.rows("throughput") {
		at := "not measured"
		if m, ok := r.find("memory", s.Peer, s.Conns); ok && m.RSS.Median > 0 {
			at = mib(m.RSS.Median)
		}
		w("| %s | %d | %s | %.2f | %.2f | %.2f | %.2f | %.1f | %s | %d | %d of %d |\n", s.Peer, s.Conns, rng(s.RPS, "%.0f"), s.P50.Median, s.P90.Median, s.P99.Median, s.P999.Median, s.CPU.Median, at, s.Errors, s.Invalid, s.Runs)
	}
	w("\n![throughput](throughput.png) ![p99](p99.png)\n\n")

	w("## Performance loss against direct\n\n(direct − peer) / direct, on median requests/s, as in the Zuul / Spring Cloud Gateway / EdgeService comparison (their published losses: 60 %%, 34 %%, 18 %%). Direct is wrk against one backend, the ceiling.\n\n")
	w("| connections |")
	names := peerNames(r.rows("throughput"))
	for _, n := range names {
		if n != "direct" {
			w(" %s |", n)
		}
	}
	w("\n|---|")
	for _, n := range names {
		if n != "direct" {
			w("---|")
		}
	}
	w("\n")
	for _, c := range r.Config.Concurrency {
		d, ok := r.find("throughput", "direct", c)
		if !ok || d.RPS.Median == 0 {
			continue
		}
		w("| %d |", c)
		for _, n := range names {
			if n == "direct" {
				continue
			}
			if s, ok := r.find("throughput", n, c); ok && s.RPS.Median > 0 {
				w(" %.0f %% |", (d.RPS.Median-s.RPS.Median)/d.RPS.Median*100)
			} else {
				w(" - |")
			}
		}
		w("\n")
	}

	w("\n## lbplane's generated config against the hand-tuned static Envoy\n\nSame binary, same worker count, same backends, measured side by side. `lbplane-envoy` is lbplane's default, with the router's dynamic stats on (they give each backend's p99 and errors in the policy's status); `lbplane-envoy-lean` is `lbplane serve --router-dynamic-stats=false --proxy-stats-interval=0`: no dynamic stats (the hand-tuned config turns them off too) and no reading of Envoy's stats port. `lbplane-envoy-noretry`, when it ran, is lbplane's default without the default retry of connection failures (`retry: {attempts: 0}`; the static config has no retry).\n\n| connections | peer | req/s | static req/s | ratio | CPU µs/req | static CPU µs/req | CPU ratio |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Config.Concurrency {
		s, ok := r.find("throughput", "static-envoy", c)
		if !ok || s.RPS.Median == 0 || s.CPU.Median == 0 {
			continue
		}
		for _, name := range []string{"lbplane-envoy", "lbplane-envoy-lean", "lbplane-envoy-noretry"} {
			if a, ok := r.find("throughput", name, c); ok {
				w("| %d | %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f |\n", c, name, a.RPS.Median, s.RPS.Median, a.RPS.Median/s.RPS.Median, a.CPU.Median, s.CPU.Median, a.CPU.Median/s.CPU.Median)
			}
		}
	}

	w("\n## L4 (TCP listener) against L7 (HTTP listener), %d connections\n\n| peer | L4 requests/s | L7 requests/s | L4 p99 ms | L7 p99 ms | L4 CPU µs/req | L7 CPU µs/req |\n|---|---|---|---|---|---|---|\n", r.Config.L4Conns)
	for _, s := range r.rows("l4") {
		l7, _ := r.find("throughput", s.Peer, r.Config.L4Conns)
		w("| %s | %s | %.0f | %.2f | %.2f | %.1f | %.1f |\n", s.Peer, rng(s.RPS, "%.0f"), l7.RPS.Median, s.P99.Median, l7.P99.Median, s.CPU.Median, l7.CPU.Median)
	}

	r.hardeningMarkdown(w)
	r.accessLogMarkdown(w)
	r.pairedMarkdown(w)
	r.memoryMarkdown(w)
	r.httpsMarkdown(w)

	if rows := r.rows("fixed-rate"); len(rows) > 0 {
		w("\n## Latency at a fixed rate (k6 constant-arrival-rate, %d requests/s, %s, %d VUs)\n\nA run counts only when k6 dropped no iteration, no request failed, and k6 stayed under 80 %% of a core.\n\n", r.Config.K6Rate, r.Config.K6Duration, r.Config.K6VUs)
		w("| peer | p50 ms | p90 ms | p99 ms | p99.9 ms | CPU µs/request | k6 share of a core | valid runs |\n|---|---|---|---|---|---|---|---|\n")
		for _, s := range rows {
			w("| %s | %s | %.2f | %s | %.2f | %.1f | %.0f %% | %d of %d |\n", s.Peer, rng(s.P50, "%.2f"), s.P90.Median, rng(s.P99, "%.2f"), s.P999.Median, s.CPU.Median, s.LoadGen.Median*100, s.Runs-s.Invalid, s.Runs)
		}
	}
	if rows := r.rows("crosscheck"); len(rows) > 0 {
		w("\n## wrk and k6 at one point\n\nThe same closed loop from both tools (%d connection for %s: each request sent when the last is answered), direct and through lbplane's Envoy, interleaved. At one connection neither tool nor peer is short of CPU, and each tool's own time per request is the same with or without the proxy, so the latency the proxy adds (p50 through lbplane's Envoy minus p50 direct) should agree between the tools, while their absolute figures differ (k6 spends several times wrk's CPU per request).\n\n", r.Config.CrossConns, r.Config.CrossDuration)
		w("| tool | peer | requests/s | p50 ms | p99 ms | generator's share of a core | valid runs |\n|---|---|---|---|---|---|---|\n")
		for _, tool := range []string{"wrk", "k6"} {
			for _, s := range rows {
				if s.Variant == tool {
					w("| %s | %s | %s | %.2f | %.2f | %.0f %% | %d of %d |\n", tool, s.Peer, rng(s.RPS, "%.0f"), s.P50.Median, s.P99.Median, s.LoadGen.Median*100, s.Runs-s.Invalid, s.Runs)
				}
			}
		}
		added := func(tool string) float64 {
			var d, l float64
			for _, s := range rows {
				if s.Variant == tool && s.Peer == "direct" {
					d = s.P50.Median
				}
				if s.Variant == tool && s.Peer == "lbplane-envoy" {
					l = s.P50.Median
				}
			}
			return (l - d) * 1000
		}
		w("\nLatency lbplane's Envoy adds at p50: wrk %.0f µs, k6 %.0f µs.\n", added("wrk"), added("k6"))
	}

	if rows := r.rows("propagation"); len(rows) > 0 {
		w("\n## Control plane: from a policy change to the first 200 through Envoy\n\nOne policy changes (its endpoint moves to another backend and its cluster's connect timeout changes) with N policies already present, timed to the first response from the new backend through a real Envoy: from the push API's answer (the policy accepted), and from the push sent (validation, the store write and translation included). lbplane CPU per change and RSS from /proc.\n\n")
		w("Through Kubernetes (*kubernetes* rows) the change is written to a real kube-apiserver (with etcd) as `kubectl apply` writes a custom resource, a JSON merge patch of the object; lbplane watches it. *Accepted* is then the API server's answer, and *push* the patch sent.\n\n")
		w("| via | xDS | policies | changes | accepted → 200 p50 ms | p99 ms | push → 200 p50 ms | p99 ms | lbplane CPU ms/change | lbplane RSS MiB |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range rows {
			w("| %s | %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", s.Variant, s.API, s.Policies, len(s.Samples), s.P50.Median, s.P99.Median,
				percentile(s.PushSamples, 50), percentile(s.PushSamples, 99), s.CPUPerChange.Median, mib(s.LbplaneRSS.Median))
		}
		var small, big summaryRow
		for _, s := range rows {
			if s.Variant == "push" && s.API == "delta" && s.Policies == r.Config.PolicyCounts[0] {
				small = s
			}
			if s.Variant == "push" && s.API == "delta" && s.Policies == r.Config.PolicyCounts[len(r.Config.PolicyCounts)-1] {
				big = s
			}
		}
		if small.CPUPerChange.Median > 0 {
			w("\nCPU per single-policy update with %d policies against %d (push API, delta): %.1f×.\n", big.Policies, small.Policies, big.CPUPerChange.Median/small.CPUPerChange.Median)
		}
		w("\n![propagation](propagation.png)\n")
	}
	if rows := r.rows("swarm"); len(rows) > 0 {
		w("\n## A change reaching many Envoys\n\nSimulated Envoys (ADS clients in one process, each its own gRPC connection, subscribed to clusters and acknowledging) beside the real one, with only the probe policy present, one cluster change, time from the push sent to each client's receipt.\n\n| xDS | clients | p50 ms | p99 ms | all ms |\n|---|---|---|---|---|\n")
		for _, s := range rows {
			w("| %s | %d | %.1f | %.1f | %.1f |\n", s.API, s.Conns, s.P50.Median, s.P99.Median, s.P999.Median)
		}
	}
	if rows := r.rows("stats-pacing"); len(rows) > 0 {
		w("\n## Reading Envoy's stats beside config changes\n\nOne Envoy with N policies and a stats port; lbplane reads it at `--proxy-stats-interval` (stats on) or never (off). One policy changes at a time, timed from the push sent to the first 200 from the new backend. The target: p99 within twice p50, stats on as off.\n\n| stats | policies | changes | p50 ms | p99 ms | p99 / p50 |\n|---|---|---|---|---|---|\n")
		for _, s := range rows {
			w("| %s | %d | %d | %.1f | %.1f | %.2f |\n", s.Variant, s.Policies, len(s.Samples), s.P50.Median, s.P99.Median, s.P99.Median/max(s.P50.Median, 0.001))
		}
	}
	r.hashMarkdown(w)
	r.hotKeyMarkdown(w)
	r.healthMarkdown(w)
	r.wsMarkdown(w)
	r.incrementalMarkdown(w)
	r.rolloutMarkdown(w)
	r.gatewayRoutesMarkdown(w, r.out)
	if len(r.Memory) > 0 {
		w("\n## Memory over the whole run\n\n![memory](memory.png)\n")
	}
	return b.String()
}

func (r *report) httpsMarkdown(w func(string, ...any)) {
	rows := r.rows("https")
	if len(rows) == 0 {
		return
	}
	w("\n## HTTPS termination (wrk, %d connections, %s per run)\n\n", r.Config.HTTPSConns, r.Config.HTTPSDuration)
	w("Every peer offers TLS 1.2 and 1.3 with the same suites and a self-signed RSA 2048 certificate; wrk's OpenSSL is limited to one protocol version and one suite per row (`OPENSSL_CONF`), so the suite is the client's choice, as it is on the internet. On the Envoy peers the runner checks Envoy's `ssl.ciphers.*` counters after each run: a run in which Envoy negotiated anything else is invalid. *reuse*: keep-alive connections, the handshake amortised; *handshake*: `Connection: close`, a new TCP connection and a full handshake (wrk does not resume sessions) for every request. The backends speak plain HTTP; there is no direct row.\n\n")
	w("| suite | mode | peer | requests/s | p99 ms | CPU µs/request | invalid runs |\n|---|---|---|---|---|---|---|\n")
	for _, suite := range r.Config.TLSSuites {
		for _, mode := range []string{"reuse", "handshake"} {
			for _, s := range rows {
				if s.Protocol == suite.Key && s.Variant == mode {
					w("| %s | %s | %s | %s | %.2f | %.1f | %d of %d |\n", suite.Key, mode, s.Peer, rng(s.RPS, "%.0f"), s.P99.Median, s.CPU.Median, s.Invalid, s.Runs)
				}
			}
		}
	}
	// The price of TLS: HTTPS with reuse against plain HTTP at the same connection count.
	w("\nHTTPS with reuse against plain HTTP at %d connections (median requests/s, from the throughput table), first suite:\n\n| peer | HTTP | HTTPS reuse | HTTPS handshake per request |\n|---|---|---|---|\n", r.Config.HTTPSConns)
	for _, s := range rows {
		if s.Protocol != r.Config.TLSSuites[0].Key || s.Variant != "reuse" {
			continue
		}
		h, _ := r.find("throughput", s.Peer, r.Config.HTTPSConns)
		var hs summaryRow
		for _, x := range rows {
			if x.Peer == s.Peer && x.Protocol == s.Protocol && x.Variant == "handshake" {
				hs = x
			}
		}
		w("| %s | %.0f | %.0f | %.0f |\n", s.Peer, h.RPS.Median, s.RPS.Median, hs.RPS.Median)
	}
}

func (r *report) hashMarkdown(w func(string, ...any)) {
	if len(r.Hash) == 0 {
		return
	}
	h0 := r.Hash[0]
	w("\n## Hash persistence\n\n%d clients, each its own source address (127.10.x.y), send %d requests each over %d connections (a new one every 10 requests) through a hash on the client address, to %d backends; the backend is read from each response. *Persistence*: the share of requests that went to their client's usual backend. *Spread*: clients per backend, as the coefficient of variation and the busiest backend against an even share. Then one backend leaves (the peer gets the same config without it, as a user would change it), every client sends 10 more requests, and we count the clients whose backend changed: ideally only those that were on the backend that left.\n\n",
		h0.Clients, h0.RequestsPerClient, h0.RequestsPerClient/10, h0.Backends)
	w("| peer | algorithm | persistence | clients always on one backend | spread (cv) | busiest / even | clients moved when 1 of %d left | ideal (were on it) | moved although their backend stayed | errors |\n|---|---|---|---|---|---|---|---|---|---|\n", h0.Backends)
	for _, h := range r.Hash {
		w("| %s | %s | %.2f %% | %d of %d | %.3f | %.2f | %.1f %% | %.1f %% | %d | %d |\n", h.Peer, h.Algorithm, h.Persistence*100, h.FullyPersistent, h.Clients,
			h.SpreadCV, h.MaxOverIdeal, h.RemapShare*100, h.IdealShare*100, h.RemappedOthers, h.Errors)
	}
}

func (r *report) healthMarkdown(w func(string, ...any)) {
	if len(r.Health) == 0 {
		return
	}
	w("\n## Health: one of five backends killed under load\n\nSteady load of %d requests/s (keep-alive, a 2 s client timeout) through each peer to five backends; the third is killed with SIGKILL, stays dead, and is started again on the same port. Seen from the clients: the requests that failed after the kill and when the last one was sent (a proxy that retries elsewhere hides the dead backend's connection refusals, and they show as latency instead: nginx does by default), p99 latency before and while it was dead, and how long after its return it served a request again. *default*: each peer's own defaults with health checking turned on the usual way; *equal*: every active checker at a 1 s interval, out after 2 failures and back after 2 passes where it has such counts (nginx has passive checks only). Retries decide most of the failed requests, and they are left at each peer's default: nginx tries the next server on a connection error; lbplane retries a request that never reached an endpoint on another one, twice; HAProxy retries the same server 3 times, 1 s apart, and fails (no `option redispatch`), which the 2 s client timeout counts as a failure; Traefik does not retry without its retry middleware.\n\n", r.Health[0].Rate)
	w("| peer | checks | dead for | failed requests | last failure after the kill | p99 before ms | p99 while dead ms | while dead / before | max while dead ms | p99 after ms | while dead / before and after pooled | back after return |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, h := range r.Health {
		last, back := "none", "never"
		if h.LastFailure >= 0 {
			last = fmt.Sprintf("%.2f s", h.LastFailure)
		}
		if h.Back >= 0 {
			back = fmt.Sprintf("%.2f s", h.Back)
		}
		ratio := "-"
		if h.P99Before > 0 {
			ratio = fmt.Sprintf("%.1f", h.P99Down/h.P99Before)
		}
		after := "-"
		if h.P99After > 0 {
			after = fmt.Sprintf("%.1f", h.P99After)
		}
		calm := "-"
		if h.P99Calm > 0 {
			calm = fmt.Sprintf("%.1f (%.1f ms)", h.P99Down/h.P99Calm, h.P99Calm)
		}
		w("| %s | %s: %s | %.0f s | %d of %d | %s | %.1f | %.1f | %s | %.0f | %s | %s | %s |\n", h.Peer, h.Variant, h.Checks, h.ReturnAt-h.KillAt, h.Failed, h.Requests, last, h.P99Before, h.P99Down, ratio, h.MaxDown, after, calm, back)
	}
	w("\n![health timelines](health.png)\n")
	for _, h := range r.Health {
		if len(h.EnvoyStats) == 0 {
			continue
		}
		w("\n%s, %s: Envoy's counters just before the killed backend returned (cluster, and `victim.*` for the killed endpoint in `/clusters`):", h.Peer, h.Variant)
		for _, k := range sortedKeys(h.EnvoyStats) {
			if v := h.EnvoyStats[k]; v != 0 {
				w(" `%s` %d;", k, v)
			}
		}
		w("\n")
	}
}

func (r *report) wsMarkdown(w func(string, ...any)) {
	if len(r.WebSocket) == 0 {
		return
	}
	w("\n## Long-lived WebSocket connections\n\nConnections opened through each peer in four steps to the target and held open together (each greeted by its backend), then each sends a message and must get it echoed. Memory per connection is the slope of the peer's resident memory (whole process tree) over the four steps. The aim is 50,000 through Envoy; the target here is %d: the plan's (or `-ws-conns`), at most what the machine's hard open-file limit (%s, which an unprivileged process cannot raise) allows with two descriptors per proxied connection.\n\n", r.WebSocket[0].Target, r.Machine["noFile"])
	w("Each kind runs in a fresh peer process: *websocket* as above; *http-idle* keep-alive HTTP/1.1 connections left idle after one request (checked again with a second one), the memory a proxy spends on clients that hold connections open between requests; *websocket-l4* (with `-ws-l4`) the same WebSockets through the peer's TCP listener, with no HTTP layer in the proxy.\n\n")
	w("*Heap KiB per connection* is the same slope through Envoy's allocated heap (admin `/memory`): its live objects, without what tcmalloc keeps cached.\n\n")
	w("| peer | kind | opened | echoed / answered again | errors | idle RSS MiB | RSS at the target MiB | KiB per connection | heap KiB per connection | seconds to open |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.WebSocket {
		var top int64
		if len(x.Steps) > 0 {
			top = x.Steps[len(x.Steps)-1].RSS
		}
		kind := cmp.Or(x.Kind, "websocket")
		heap := "-"
		if x.HeapPerConn != 0 {
			heap = fmt.Sprintf("%.1f", x.HeapPerConn/1024)
		}
		w("| %s | %s | %d of %d | %d | %d | %s | %s | %.1f | %s | %.1f |\n", x.Peer, kind, x.Opened, x.Target, x.Alive, x.Errors, mib(float64(x.RSSIdle)), mib(float64(top)), x.BytesPerConn/1024, heap, x.OpenSeconds)
	}
	w("\n![WebSocket memory](websocket.png)\n")
}

func peerNames(rows []summaryRow) []string {
	var out []string
	for _, s := range rows {
		if !slices.Contains(out, s.Peer) {
			out = append(out, s.Peer)
		}
	}
	return out
}
