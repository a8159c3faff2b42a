package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// wrkResult is what bench/wrk/report.lua prints.
type wrkResult struct {
	Requests   int64 `json:"requests"`
	DurationUS int64 `json:"duration_us"`
	Bytes      int64 `json:"bytes"`
	Errors     struct {
		Connect, Read, Write, Status, Timeout int64
	} `json:"errors"`
	LatencyUS struct {
		P50  float64 `json:"p50"`
		P90  float64 `json:"p90"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p999"`
		Max  float64 `json:"max"`
		Mean float64 `json:"mean"`
	} `json:"latency_us"`
}

func (r wrkResult) rps() float64 {
	if r.DurationUS == 0 {
		return 0
	}
	return float64(r.Requests) / (float64(r.DurationUS) / 1e6)
}

func (r wrkResult) errors() int64 {
	return r.Errors.Connect + r.Errors.Read + r.Errors.Write + r.Errors.Status + r.Errors.Timeout
}

// wrkOptions are what some scenarios add to a wrk run.
type wrkOptions struct {
	env      []string // OPENSSL_CONF for HTTPS
	headers  []string
	duration time.Duration // instead of the plan's
	// check, when set, runs after the run; a non-empty answer makes the run invalid and is its note.
	check func() string
}

// runWrk runs wrk with one thread (two cores: the rest is the peer's and the backends') against url.
func runWrk(ctx context.Context, e *env, url string, conns int, d time.Duration, opt ...wrkOptions) (wrkResult, usage, error) {
	args := []string{"-t1", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--timeout", "10s",
		"-s", filepath.Join(repoRoot, "bench", "wrk", "report.lua")}
	var env []string
	for _, o := range opt {
		for _, h := range o.headers {
			args = append(args, "-H", h)
		}
		env = append(env, o.env...)
	}
	cmd := exec.CommandContext(ctx, e.tools["wrk"], append(args, url)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return wrkResult{}, usage{}, err
	}
	// wrk's own CPU tells whether the load generator was the bottleneck.
	cpu := watchCPU(cmd.Process.Pid)
	err := cmd.Wait()
	u := usage{CPUSeconds: cpu()}
	if err != nil {
		return wrkResult{}, u, fmt.Errorf("wrk: %v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r wrkResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return r, u, fmt.Errorf("wrk output: %v: %s", err, out.String())
	}
	return r, u, nil
}

// k6Result is the part of k6's summary export the report uses.
type k6Result struct {
	Metrics map[string]map[string]any `json:"metrics"`
}

// fill sets a run's requests, rate, latencies and failures from k6's summary (nothing when there is none).
func (r k6Result) fill(rec *runRecord) {
	if r.Metrics == nil {
		return
	}
	rec.Requests = int64(r.value("http_reqs", "count"))
	rec.RPS = r.value("http_reqs", "rate")
	rec.P50, rec.P90 = r.value("http_req_duration", "med"), r.value("http_req_duration", "p(90)")
	rec.P99, rec.P999 = r.value("http_req_duration", "p(99)"), r.value("http_req_duration", "p(99.9)")
	rec.Errors = int64(r.value("http_req_failed", "passes"))
}

func (r k6Result) value(metric, key string) float64 {
	v, _ := r.Metrics[metric][key].(float64)
	return v
}

// runK6 runs bench/k6/<script> (fixed-rate.js holds rate requests a second; closed-loop.js ignores rate)
// for d and returns k6's summary and its CPU seconds. A run whose thresholds fail (a dropped iteration or
// a failed request) is returned with err set.
func runK6(ctx context.Context, e *env, dir, script, url string, rate, vus int, d time.Duration) (k6Result, float64, error) {
	summary := filepath.Join(dir, fmt.Sprintf("k6-%d.json", time.Now().UnixNano()))
	cmd := exec.CommandContext(ctx, e.tools["k6"], "run", "--quiet", "--no-usage-report", "--summary-export", summary,
		filepath.Join(repoRoot, "bench", "k6", script))
	cmd.Env = append(os.Environ(), "URL="+url, "RATE="+strconv.Itoa(rate), "VUS="+strconv.Itoa(vus),
		"DURATION="+strconv.Itoa(int(d.Seconds()))+"s", "K6_NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return k6Result{}, 0, err
	}
	cpuOf := watchCPU(cmd.Process.Pid)
	runErr := cmd.Wait()
	cpu := cpuOf()
	var r k6Result
	b, err := os.ReadFile(summary)
	if err != nil {
		return r, cpu, fmt.Errorf("k6: %v: %s", runErr, out.String())
	}
	os.Remove(summary)
	if err := json.Unmarshal(b, &r); err != nil {
		return r, cpu, err
	}
	if runErr != nil {
		return r, cpu, fmt.Errorf("k6 thresholds failed (dropped iterations %v, failed requests %v)",
			r.value("dropped_iterations", "count"), r.value("http_req_failed", "passes"))
	}
	return r, cpu, nil
}

// watchCPU samples a process tree's CPU seconds until the returned function is called, which returns the
// last reading (a process's counters vanish when it exits, so they are read while it runs).
func watchCPU(pid int) func() float64 {
	done := make(chan struct{})
	result := make(chan float64, 1)
	go func() {
		var cpu float64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if u := treeUsage(pid); u.CPUSeconds > cpu {
				cpu = u.CPUSeconds
			}
			select {
			case <-done:
				result <- cpu
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 { close(done); return <-result }
}

// openLoop is the runner's steady load: rate requests a second from began until end (seconds since began)
// or ctx ends, each sent by send in its own goroutine, open-loop (a slow answer does not delay the next
// request). before, when set, runs before each request with the seconds since began; an error ends the
// load. It returns what every request met, in no particular order.
//
// More slots than requests can be outstanding (rate × the clients' 2 s timeout), so that the load stays
// open-loop: with 64, a proxy holding requests for seconds (HAProxy retrying a dead server) made the
// generator count requests it could not send as failures, 447 where about 240 went to the dead server. A
// request due when every slot is taken fails at its due time, as a timeout would.
func openLoop(ctx context.Context, began time.Time, end float64, rate int, before func(now float64) error, send func() (string, error)) ([]outcome, error) {
	var mu sync.Mutex
	var outs []outcome
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(1000, 3*rate))
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for ctx.Err() == nil {
		now := time.Since(began).Seconds()
		if now >= end {
			break
		}
		if before != nil {
			if err := before(now); err != nil {
				wg.Wait()
				return outs, err
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			mu.Lock()
			outs = append(outs, outcome{sent: now, took: 2, failed: true})
			mu.Unlock()
			<-tick.C
			continue
		}
		wg.Add(1)
		go func(sent float64) {
			defer wg.Done()
			defer func() { <-slots }()
			t0 := time.Now()
			b, err := send()
			o := outcome{sent: sent, took: time.Since(t0).Seconds(), backend: b, failed: err != nil}
			mu.Lock()
			outs = append(outs, o)
			mu.Unlock()
		}(now)
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return outs, nil
}
