package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// healthResult is one peer's view of a backend killed under steady load and started again, as its clients
// see it. A connection refused by a dead backend cannot be seen from outside the proxy without root, so a
// request "goes to" the dead backend when it fails; a proxy that retries elsewhere (nginx does by default)
// hides those, and they show only as latency.
type healthResult struct {
	Peer    string `json:"peer"`
	Variant string `json:"variant"` // default or equal
	Checks  string `json:"checks"`  // what the peer was configured with
	Rate    int    `json:"rate"`
	// Seconds since the load started.
	KillAt   float64 `json:"killAt"`
	ReturnAt float64 `json:"returnAt"`
	End      float64 `json:"end"`
	Requests int64   `json:"requests"`
	// Failed requests after the kill, and the last one's time after the kill (-1: none).
	Failed      int64   `json:"failed"`
	LastFailure float64 `json:"lastFailureAfterKill"`
	// The killed backend's first response after it returned, in seconds after its return (-1: never).
	Back float64 `json:"backAfterReturn"`
	// Latency before the kill and from the kill to its return, p99 and max in ms.
	P99Before float64 `json:"p99BeforeMs"`
	P99Down   float64 `json:"p99DownMs"`
	MaxDown   float64 `json:"maxDownMs"`
	// P99After is from its return to the end; P99Calm pools before and after, a steadier baseline than the
	// 3 s before the kill alone on a shared machine.
	P99After float64 `json:"p99AfterMs"`
	P99Calm  float64 `json:"p99CalmMs"`
	// EnvoyStats (lbplane's Envoy) are the cluster's ejection, retry and connect-failure counters, and the
	// killed endpoint's own, read just before it returned: what bounds the tail while it is dead.
	EnvoyStats map[string]int64 `json:"envoyStats,omitempty"`
	Bins       []bin            `json:"bins"`
	Note       string           `json:"note,omitempty"`
}

// bin is one slice of the timeline.
type bin struct {
	T      float64 `json:"t"`
	Total  int     `json:"total"`
	Killed int     `json:"killed"` // served by the backend that is killed
	Failed int     `json:"failed"`
}

const binWidth = 0.25 // seconds

var healthChecks = map[string]map[string]string{
	"default": {
		"lbplane-envoy":          "active HTTP, lbplane's defaults: every 5s, out after 3, back after 2",
		"lbplane-envoy-before17": "the same, with the tail defaults before issue 17: no ejection on a refused connect, retry back-off 25 ms",
		"nginx":                  "passive only, nginx's defaults: max_fails=1 fail_timeout=10s, retries the next server",
		"haproxy":                "check: TCP connect every 2s, down after 3, up after 2",
		"traefik":                "healthCheck path /healthz, Traefik's default interval 30s",
	},
	"equal": {
		"lbplane-envoy":          "active HTTP every 1s, out after 2, back after 2",
		"lbplane-envoy-before17": "the same, with the tail defaults before issue 17",
		"nginx":                  "passive only: max_fails=2 fail_timeout=1s",
		"haproxy":                "option httpchk, inter 1s fall 2 rise 2",
		"traefik":                "healthCheck path /healthz, interval 1s",
	},
}

type outcome struct {
	sent, took float64 // seconds since the start
	backend    string
	failed     bool
}

// healthScenario kills the third of five backends under steady load, starts it again, and records what the
// clients of each peer saw.
func healthScenario(ctx context.Context, e *env, cfg config, rep *report) error {
	for _, variant := range cfg.HealthVariants {
		for _, p := range balancingPeers(28500) {
			if !cfg.runs(cfg.HealthPeers, p.Name) || (p.optIn && !slices.Contains(cfg.Peers, p.Name)) {
				continue
			}
			if p.vars == nil {
				p.vars = map[string]any{}
			}
			p.vars["Health"] = variant
			res, err := healthOne(ctx, e, cfg, p, variant)
			p.stop()
			if err != nil {
				return fmt.Errorf("health %s %s: %w", p.Name, variant, err)
			}
			rep.Health = append(rep.Health, res)
			fmt.Fprintf(os.Stderr, "health      %-14s %-7s failed %d, last failure %.2fs after the kill, back %.2fs after its return, p99 %.1f→%.1f→%.1f ms %v\n",
				p.Name, variant, res.Failed, res.LastFailure, res.Back, res.P99Before, res.P99Down, res.P99After, res.EnvoyStats)
		}
	}
	return ctx.Err()
}

func healthOne(ctx context.Context, e *env, cfg config, p *peer, variant string) (healthResult, error) {
	down := cfg.HealthDown[variant]
	res := healthResult{Peer: p.Name, Variant: variant, Checks: healthChecks[variant][p.Name], Rate: cfg.HealthRate,
		KillAt: 3, ReturnAt: 3 + down.Seconds(), End: 3 + 2*down.Seconds()}
	if err := p.start(e, p); err != nil {
		return res, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort)
	if err := waitServing(ctx, url, len(e.backends)); err != nil {
		return res, err
	}
	// Let the health checkers see every backend up before anything is measured.
	time.Sleep(2 * time.Second)
	const victim = 2
	killed := backendName(victim)
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}

	began := time.Now()
	killDone, returnDone := false, false
	outs, err := openLoop(ctx, began, res.End, cfg.HealthRate, func(now float64) error {
		if !killDone && now >= res.KillAt {
			e.backendProcs[victim].kill()
			killDone = true
		}
		if !returnDone && now >= res.ReturnAt {
			if isEnvoy(p) {
				res.EnvoyStats = envoyOutlierStats(p.HTTPPort+1000, e.backends[victim])
			}
			pr, err := startBackend(e, victim, e.backends[victim])
			e.backendProcs[victim] = pr
			if err != nil {
				return err
			}
			returnDone = true
		}
		return nil
	}, func() (string, error) { return get(client, url) })
	if err != nil {
		return res, err
	}
	if !returnDone {
		return res, ctx.Err()
	}
	summarizeHealth(&res, outs, killed)
	return res, nil
}

func summarizeHealth(res *healthResult, outs []outcome, killed string) {
	slices.SortFunc(outs, func(a, b outcome) int {
		switch {
		case a.sent < b.sent:
			return -1
		case a.sent > b.sent:
			return 1
		}
		return 0
	})
	res.LastFailure, res.Back = -1, -1
	res.Bins = make([]bin, int(res.End/binWidth))
	for i := range res.Bins {
		res.Bins[i].T = float64(i) * binWidth
	}
	var before, down, after []float64
	for _, o := range outs {
		res.Requests++
		if i := int(o.sent / binWidth); i < len(res.Bins) {
			b := &res.Bins[i]
			b.Total++
			switch {
			case o.failed:
				b.Failed++
			case o.backend == killed:
				b.Killed++
			}
		}
		if o.sent >= res.KillAt && o.failed {
			res.Failed++
			res.LastFailure = o.sent - res.KillAt
		}
		if o.sent >= res.ReturnAt && !o.failed && o.backend == killed && res.Back < 0 {
			res.Back = o.sent - res.ReturnAt
		}
		switch {
		case o.sent < res.KillAt:
			before = append(before, o.took*1000)
		case o.sent < res.ReturnAt:
			down = append(down, o.took*1000)
			res.MaxDown = max(res.MaxDown, o.took*1000)
		default:
			after = append(after, o.took*1000)
		}
	}
	res.P99Before, res.P99Down, res.P99After = percentile(before, 99), percentile(down, 99), percentile(after, 99)
	res.P99Calm = percentile(append(before, after...), 99)
}

// envoyOutlierStats reads the bench cluster's counters that decide the tail while an endpoint is dead
// (ejections, retries, connect failures, requests that waited for a connection), and the dead endpoint's
// connect failures and health flags from /clusters. Errors leave the map short: the numbers are a diagnosis,
// not the measurement.
func envoyOutlierStats(adminPort int, victim string) map[string]int64 {
	out := map[string]int64{}
	const cluster = "cluster.default/bench-http/app."
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats?filter=%s", adminPort,
		url.QueryEscape(`^cluster\.default/bench-http/app\.(outlier_detection\.|upstream_rq_retry|upstream_cx_connect_fail|upstream_rq_pending|upstream_cx_destroy|upstream_rq_total|membership_healthy|upstream_rq_5xx|health_check\.failure)`))); err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			name, value, ok := strings.Cut(sc.Text(), ": ")
			if n, err := strconv.ParseInt(value, 10, 64); ok && err == nil && strings.HasPrefix(name, cluster) {
				out[strings.TrimPrefix(name, cluster)] = n
			}
		}
		resp.Body.Close()
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/clusters", adminPort)); err == nil {
		sc := bufio.NewScanner(resp.Body)
		prefix := "default/bench-http/app::" + victim + "::"
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), prefix)
			if !ok {
				continue
			}
			k, v, _ := strings.Cut(rest, "::")
			switch k {
			case "cx_connect_fail", "rq_error", "rq_total", "rq_success":
				n, _ := strconv.ParseInt(v, 10, 64)
				out["victim."+k] = n
			case "health_flags":
				// "/failed_active_hc/failed_outlier_check": each flag present counts 1.
				for _, f := range strings.Split(v, "/") {
					if f != "" {
						out["victim.flag."+f] = 1
					}
				}
			}
		}
		resp.Body.Close()
	}
	return out
}
