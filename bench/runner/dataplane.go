package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// runRecord is one measured run; every scenario writes these, one JSON line each.
type runRecord struct {
	Scenario string `json:"scenario"` // throughput, l4, fixed-rate, propagation, swarm
	Peer     string `json:"peer"`
	Rep      int    `json:"rep"`
	Conns    int    `json:"conns,omitempty"`
	Protocol string `json:"protocol,omitempty"` // http, tcp, or the TLS version and suite
	Variant  string `json:"variant,omitempty"`  // https: reuse or handshake
	Policies int    `json:"policies,omitempty"`
	API      string `json:"api,omitempty"` // delta or sotw

	RPS      float64 `json:"rps,omitempty"`
	Requests int64   `json:"requests,omitempty"`
	Errors   int64   `json:"errors"`
	// Latencies in milliseconds.
	P50  float64 `json:"p50Ms,omitempty"`
	P90  float64 `json:"p90Ms,omitempty"`
	P99  float64 `json:"p99Ms,omitempty"`
	P999 float64 `json:"p999Ms,omitempty"`

	// The peer's CPU per request and its peak memory during the run.
	CPUMicrosPerRequest float64 `json:"cpuMicrosPerRequest,omitempty"`
	PeakRSSBytes        int64   `json:"peakRssBytes,omitempty"`
	// IdleRSSBytes is the peer's memory before the run (memory scenario: a fresh process after one request).
	IdleRSSBytes int64 `json:"idleRssBytes,omitempty"`
	// The load generator's share of one core: above 0.8 the generator, not the peer, was the limit.
	LoadGenCoreShare float64 `json:"loadGenCoreShare,omitempty"`
	Valid            bool    `json:"valid"`
	Note             string  `json:"note,omitempty"`

	// Control plane.
	Samples []float64 `json:"samplesMs,omitempty"`
	// PushSamples time from the push sent, Samples from its answer (propagation).
	PushSamples           []float64 `json:"pushSamplesMs,omitempty"`
	LbplaneRSS            int64     `json:"lbplaneRssBytes,omitempty"`
	LbplaneCPUPerChangeMs float64   `json:"lbplaneCpuMsPerChange,omitempty"`
	// Extra holds a row's own figures (endpoint churn, cold start, fan-out, status writes: incremental.go).
	Extra map[string]float64 `json:"extra,omitempty"`
}

// backendName is what the i-th backend answers with (X-Backend), so that a response tells which served it.
func backendName(i int) string { return fmt.Sprintf("backend-%d", i) }

func startBackends(e *env, n, base int) error {
	base += portOffset
	for i := range n {
		addr := fmt.Sprintf("127.0.0.1:%d", base+i)
		p, err := startBackend(e, i, addr)
		if err != nil {
			return err
		}
		e.backendProcs = append(e.backendProcs, p)
		e.backends = append(e.backends, addr)
	}
	return nil
}

// startBackend runs the i-th backend (1 KiB responses, no delay) on addr and waits until it listens.
func startBackend(e *env, i int, addr string) (*proc, error) {
	p, err := start(e.dir, backendName(i), nil, filepath.Join(e.bin, "lbplane-backend"), "--listen", addr, "--name", backendName(i), "--size", "1024")
	if err != nil {
		return nil, err
	}
	return p, waitPort(addr, 10*time.Second)
}

func (e *env) stopBackends() {
	for _, p := range e.backendProcs {
		p.stop()
	}
	e.backendProcs, e.backends = nil, nil
}

func dataPlane(ctx context.Context, e *env, cfg config, rep *report, record func(runRecord), want func(string) bool) error {
	epoch := time.Now()
	if err := startBackends(e, 3, 28081); err != nil {
		return err
	}
	defer e.stopBackends()
	var ps []*peer
	for _, p := range peers(28100) {
		if (len(cfg.Peers) == 0 && !p.optIn) || slices.Contains(cfg.Peers, p.Name) {
			ps = append(ps, p)
		}
	}
	samplers := map[string]*sampler{}
	for _, p := range ps {
		fmt.Fprintf(os.Stderr, "starting %s\n", p.Name)
		if err := p.start(e, p); err != nil {
			for _, q := range ps {
				q.stop()
			}
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		samplers[p.Name] = sample(ctx, p.pid(), 500*time.Millisecond, epoch)
	}
	defer func() {
		for _, p := range ps {
			if s := samplers[p.Name]; s != nil {
				_, series := s.stop()
				rep.Memory = append(rep.Memory, memorySeries{Peer: p.Name, Points: series})
			}
			p.stop()
		}
	}()
	// Warm every peer up (connections, caches) before anything is measured.
	for _, p := range ps {
		if _, _, err := runWrk(ctx, e, fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort), 50, 2*time.Second); err != nil {
			return fmt.Errorf("warm-up of %s: %w", p.Name, err)
		}
	}

	measureWith := func(p *peer, scenario, protocol, variant string, conns, r int, url string, opt wrkOptions) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := cfg.WrkDuration
		if opt.duration > 0 {
			d = opt.duration
		}
		before := treeUsage(p.pid())
		t0 := time.Since(epoch).Seconds()
		res, gen, err := runWrk(ctx, e, url, conns, d, opt)
		after := treeUsage(p.pid())
		rec := runRecord{Scenario: scenario, Peer: p.Name, Rep: r, Conns: conns, Protocol: protocol, Variant: variant}
		if err != nil {
			rec.Note = err.Error()
			record(rec)
			fmt.Fprintf(os.Stderr, "%s %s c=%d: %v\n", scenario, p.Name, conns, err)
			return nil
		}
		rec.RPS, rec.Requests, rec.Errors = res.rps(), res.Requests, res.errors()
		rec.P50, rec.P90, rec.P99, rec.P999 = res.LatencyUS.P50/1000, res.LatencyUS.P90/1000, res.LatencyUS.P99/1000, res.LatencyUS.P999/1000
		if res.Requests > 0 {
			rec.CPUMicrosPerRequest = (after.CPUSeconds - before.CPUSeconds) * 1e6 / float64(res.Requests)
		}
		rec.PeakRSSBytes = samplers[p.Name].peakSince(t0)
		rec.LoadGenCoreShare = gen.CPUSeconds / d.Seconds()
		rec.Valid = res.Requests > 0 && rec.Errors*100 < res.Requests
		if !rec.Valid {
			rec.Note = fmt.Sprintf("%d of %d requests failed", rec.Errors, res.Requests)
		}
		if opt.check != nil {
			if msg := opt.check(); msg != "" {
				rec.Valid, rec.Note = false, msg
			}
		}
		record(rec)
		fmt.Fprintf(os.Stderr, "%-11s %-14s c=%-5d %s %s rep %d: %8.0f req/s  p99 %7.2f ms  %5.1f µs CPU/req  errors %d %s\n",
			scenario, p.Name, conns, protocol, variant, r, rec.RPS, rec.P99, rec.CPUMicrosPerRequest, rec.Errors, rec.Note)
		return nil
	}
	measure := func(p *peer, scenario, protocol string, conns, r int, url string) error {
		return measureWith(p, scenario, protocol, "", conns, r, url, wrkOptions{})
	}

	if want("dataplane") {
		// Interleaved: each repetition goes over every concurrency and every peer, the peers' order rotated.
		for r := range cfg.Reps {
			for _, c := range cfg.Concurrency {
				for i := range ps {
					p := ps[(i+r)%len(ps)]
					if err := measure(p, "throughput", "http", c, r, fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort)); err != nil {
						return err
					}
				}
			}
			// L4 against L7: the peers with a TCP listener, and direct (which is both).
			for i := range ps {
				p := ps[(i+r)%len(ps)]
				port, protocol := p.TCPPort, "tcp"
				if p.Name == "direct" {
					port = p.HTTPPort
				}
				if port == 0 {
					continue
				}
				if err := measure(p, "l4", protocol, cfg.L4Conns, r, fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil {
					return err
				}
			}
		}
	}
	if want("paired") {
		if err := pairedCPU(ctx, e, cfg, ps, record); err != nil {
			return err
		}
	}
	if want("https") {
		for r := range cfg.Reps {
			if err := httpsRuns(ctx, e, cfg, ps, r, measureWith); err != nil {
				return err
			}
		}
	}
	if want("k6") {
		for r := range cfg.Reps {
			for i := range ps {
				p := ps[(i+r)%len(ps)]
				if err := fixedRate(ctx, e, cfg, p, r, samplers[p.Name], epoch, record); err != nil {
					return err
				}
			}
		}
		// wrk and k6 at one point: the same closed loop, direct and through lbplane's Envoy, interleaved.
		var cross []*peer
		for _, p := range ps {
			if p.Name == "direct" || p.Name == "lbplane-envoy" {
				cross = append(cross, p)
			}
		}
		for r := range cfg.Reps {
			for i := range cross {
				p := cross[(i+r)%len(cross)]
				url := fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort)
				if err := measureWith(p, "crosscheck", "http", "wrk", cfg.CrossConns, r, url, wrkOptions{duration: cfg.CrossDuration}); err != nil {
					return err
				}
				if err := closedLoopK6(ctx, e, cfg, p, r, record); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// closedLoopK6 is k6's half of the cross-check.
func closedLoopK6(ctx context.Context, e *env, cfg config, p *peer, r int, record func(runRecord)) error {
	before := treeUsage(p.pid())
	res, k6CPU, err := runK6(ctx, e, e.dir, "closed-loop.js", fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort), 0, cfg.CrossConns, cfg.CrossDuration)
	after := treeUsage(p.pid())
	rec := runRecord{Scenario: "crosscheck", Peer: p.Name, Rep: r, Conns: cfg.CrossConns, Protocol: "http", Variant: "k6"}
	rec.LoadGenCoreShare = k6CPU / cfg.CrossDuration.Seconds()
	res.fill(&rec)
	if rec.Requests > 0 {
		rec.CPUMicrosPerRequest = (after.CPUSeconds - before.CPUSeconds) * 1e6 / float64(rec.Requests)
	}
	// k6 saturating its core is expected here (that is why wrk measures throughput); the run counts when
	// nothing failed.
	rec.Valid = err == nil && rec.Requests > 0
	if err != nil {
		rec.Note = err.Error()
	}
	record(rec)
	fmt.Fprintf(os.Stderr, "crosscheck  %-14s k6  c=%d rep %d: %8.0f req/s  p50 %.2f ms  p99 %.2f ms  k6 %.0f%% of a core %s\n",
		p.Name, cfg.CrossConns, r, rec.RPS, rec.P50, rec.P99, rec.LoadGenCoreShare*100, rec.Note)
	return ctx.Err()
}

// fixedRate measures latency at cfg.K6Rate requests a second with k6.
func fixedRate(ctx context.Context, e *env, cfg config, p *peer, r int, s *sampler, epoch time.Time, record func(runRecord)) error {
	before := treeUsage(p.pid())
	t0 := time.Since(epoch).Seconds()
	res, k6CPU, err := runK6(ctx, e, e.dir, "fixed-rate.js", fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort), cfg.K6Rate, cfg.K6VUs, cfg.K6Duration)
	after := treeUsage(p.pid())
	rec := runRecord{Scenario: "fixed-rate", Peer: p.Name, Rep: r, Conns: cfg.K6VUs, Protocol: "http"}
	rec.LoadGenCoreShare = k6CPU / cfg.K6Duration.Seconds()
	res.fill(&rec)
	if rec.Requests > 0 {
		rec.CPUMicrosPerRequest = (after.CPUSeconds - before.CPUSeconds) * 1e6 / float64(rec.Requests)
	}
	rec.PeakRSSBytes = s.peakSince(t0)
	rec.Valid = err == nil && rec.LoadGenCoreShare < 0.8
	switch {
	case err != nil:
		rec.Note = err.Error()
	case !rec.Valid:
		rec.Note = fmt.Sprintf("k6 used %.0f%% of a core (limit 80%%)", rec.LoadGenCoreShare*100)
	}
	record(rec)
	fmt.Fprintf(os.Stderr, "fixed-rate  %-14s %d/s rep %d: p50 %.2f p99 %.2f p99.9 %.2f ms, k6 %.0f%% of a core, valid %v %s\n",
		p.Name, cfg.K6Rate, r, rec.P50, rec.P99, rec.P999, rec.LoadGenCoreShare*100, rec.Valid, rec.Note)
	return ctx.Err()
}
