package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// pairedCPU loads two peers at the same time, one wrk each, for cfg.Reps rounds, and records each peer's CPU
// per request (its process tree's CPU time from /proc over the round, divided by the requests it served).
// Sequential A/B runs on a shared machine see different moments of its other load; two peers loaded together
// see the same moment, so the ratio of one round cancels most of that noise. The pair order alternates each
// round so that neither wrk is always started first.
func pairedCPU(ctx context.Context, e *env, cfg config, ps []*peer, record func(runRecord)) error {
	if len(ps) != 2 {
		return fmt.Errorf("the paired CPU scenario compares two peers (-peers a,b), got %d", len(ps))
	}
	conns := cfg.Concurrency[0]
	for r := range cfg.Reps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pair := []*peer{ps[r%2], ps[(r+1)%2]}
		load := loadAverage()
		var before, after [2]usage
		var res [2]wrkResult
		var errs [2]error
		for i, p := range pair {
			before[i] = treeUsage(p.pid())
		}
		var wg sync.WaitGroup
		for i, p := range pair {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], _, errs[i] = runWrk(ctx, e, fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort), conns, cfg.WrkDuration)
			}()
		}
		wg.Wait()
		for i, p := range pair {
			after[i] = treeUsage(p.pid())
		}
		var cpu [2]float64
		for i, p := range pair {
			rec := runRecord{Scenario: "paired-cpu", Peer: p.Name, Rep: r, Conns: conns, Protocol: "http", Note: "load " + load}
			if errs[i] != nil {
				rec.Note += ": " + errs[i].Error()
				record(rec)
				continue
			}
			rec.RPS, rec.Requests, rec.Errors = res[i].rps(), res[i].Requests, res[i].errors()
			rec.P99 = res[i].LatencyUS.P99 / 1000
			if rec.Requests > 0 {
				rec.CPUMicrosPerRequest = (after[i].CPUSeconds - before[i].CPUSeconds) * 1e6 / float64(rec.Requests)
				cpu[i] = rec.CPUMicrosPerRequest
			}
			rec.Valid = rec.Requests > 0 && rec.Errors*100 < rec.Requests
			record(rec)
		}
		fmt.Fprintf(os.Stderr, "paired-cpu rep %d (load %s): %s %.1f µs/req %.0f req/s, %s %.1f µs/req %.0f req/s\n", r, load,
			pair[0].Name, cpu[0], res[0].rps(), pair[1].Name, cpu[1], res[1].rps())
	}
	return nil
}

// loadAverage is the machine's 1-minute load average, for the record.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// pairedMarkdown gives each round's CPU ratio of the two peers loaded together, and their median and quartiles.
func (r *report) pairedMarkdown(w func(string, ...any)) {
	byRep := map[int]map[string]runRecord{}
	var names []string
	for _, x := range r.Runs {
		if x.Scenario != "paired-cpu" || !x.Valid {
			continue
		}
		if byRep[x.Rep] == nil {
			byRep[x.Rep] = map[string]runRecord{}
		}
		byRep[x.Rep][x.Peer] = x
		if !slices.Contains(names, x.Peer) {
			names = append(names, x.Peer)
		}
	}
	if len(names) != 2 {
		return
	}
	slices.Sort(names) // lbplane-envoy before lbplane-envoy-relaxed: the ratio is hardened / relaxed
	a, b := names[0], names[1]
	w("\n## CPU per request, two peers loaded at the same time\n\nEach round runs one wrk (%d connections, %s) against each of the two peers at once; each peer's CPU time is read from /proc before and after. The ratio is %s / %s per round.\n\n", r.Config.Concurrency[0], r.Config.WrkDuration, a, b)
	w("| round | load average | %s CPU µs/req | %s CPU µs/req | ratio | %s req/s | %s req/s |\n|---|---|---|---|---|---|---|\n", a, b, a, b)
	var ratios []float64
	reps := make([]int, 0, len(byRep))
	for k := range byRep {
		reps = append(reps, k)
	}
	slices.Sort(reps)
	for _, k := range reps {
		x, ok1 := byRep[k][a]
		y, ok2 := byRep[k][b]
		if !ok1 || !ok2 || y.CPUMicrosPerRequest == 0 {
			continue
		}
		ratio := x.CPUMicrosPerRequest / y.CPUMicrosPerRequest
		ratios = append(ratios, ratio)
		w("| %d | %s | %.1f | %.1f | %.3f | %.0f | %.0f |\n", k, strings.TrimPrefix(x.Note, "load "), x.CPUMicrosPerRequest, y.CPUMicrosPerRequest, ratio, x.RPS, y.RPS)
	}
	if len(ratios) == 0 {
		return
	}
	slices.Sort(ratios)
	q := func(f float64) float64 { return ratios[int(f*float64(len(ratios)-1)+0.5)] }
	w("\nRatio over %d rounds: median %.3f, quartiles %.3f–%.3f, min–max %.3f–%.3f.\n", len(ratios), q(0.5), q(0.25), q(0.75), ratios[0], ratios[len(ratios)-1])
}
