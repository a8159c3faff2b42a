package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client churn (-fanout-churn N, opt-in): N simulated clients on -fanout-churn-replicas replicas of lbplane
// serve --store etcd (client i on replica i mod R), then for -fanout-churn-duration clients connect and
// leave at a steady rate while -fanout-churn-changes changes a second go to -fanout-churn-policies probe
// policies (through the replicas in turn). For each change, the time until every client connected (with its
// first config) when it was pushed has it (a later change of its policy counts: it holds this one); the
// replicas' CPU over the churn (cores used), and their Go heap (go_memstats_heap_inuse_bytes of their
// /metrics) and RSS every -fanout-churn-sample-every, to tell whether memory holds steady from
// -fanout-churn-heap-from on.
var (
	churnClients  = flag.String("fanout-churn", "", "comma-separated base simulated clients of the client-churn row (opt-in: empty, not run; -only fanout-churn runs it with 3000, what one runner CPU can drive at 10 changes a second); each count on fresh replicas and a fresh etcd")
	churnReplicas = flag.Int("fanout-churn-replicas", 1, "replicas of the client-churn row (lbplane serve --store etcd, one etcd)")
	churnJoin     = flag.Float64("fanout-churn-join", 30, "clients the client-churn row connects a second")
	churnLeave    = flag.Float64("fanout-churn-leave", 30, "clients the client-churn row ends a second (at random among those with their config)")
	churnChanges  = flag.Float64("fanout-churn-changes", 10, "changes the client-churn row pushes a second, over its probe policies")
	churnDuration = flag.Duration("fanout-churn-duration", 10*time.Minute, "how long the client-churn row churns")
	churnSample   = flag.Duration("fanout-churn-sample-every", 10*time.Second, "the client-churn row reads each replica's heap and RSS this often")
	churnHeapFrom = flag.Duration("fanout-churn-heap-from", 2*time.Minute, "the client-churn row judges the heap from this long into the churn to its end (within ±10 % of its first reading there)")
	churnAPI      = flag.String("fanout-churn-api", "delta", "the client-churn row's simulated clients' xDS: delta or sotw")
	churnPolicies = flag.String("fanout-churn-policies", "1", "comma-separated numbers of probe policies the client-churn row changes, each at its share of the changes a second (a policy's push waits for its last one; pushes of different policies are made at once); each number a run of its own for each client count")
)

// churnRowPlan is the row's part of the recorded plan.
type churnRowPlan struct {
	Clients     []int         `json:"clients,omitempty"`
	Replicas    int           `json:"replicas,omitempty"`
	Join        float64       `json:"joinPerSecond,omitempty"`
	Leave       float64       `json:"leavePerSecond,omitempty"`
	Changes     float64       `json:"changesPerSecond,omitempty"`
	Duration    time.Duration `json:"duration,omitempty"`
	SampleEvery time.Duration `json:"sampleEvery,omitempty"`
	HeapFrom    time.Duration `json:"heapFrom,omitempty"`
	API         string        `json:"api,omitempty"`
	Policies    []int         `json:"policies,omitempty"`
}

// applyFanoutChurn puts the row into the plan when asked for (the flag, or -only naming it).
func applyFanoutChurn(cfg *config, only string) {
	list := *churnClients
	if list == "" && strings.Contains(","+only+",", ",fanout-churn,") {
		list = "3000"
	}
	if list == "" {
		return
	}
	clients, err := intList(list)
	if err == nil {
		_, err = swarmAPI(*churnAPI)
	}
	policies, perr := intList(*churnPolicies)
	if err == nil {
		err = perr
	}
	if err != nil || slices.Min(policies) < 1 || *churnReplicas < 1 || *churnJoin < 0 || *churnLeave < 0 || *churnChanges <= 0 || *churnDuration <= 0 || *churnSample <= 0 {
		fmt.Fprintf(os.Stderr, "error: -fanout-churn %q, -fanout-churn-replicas %d, -fanout-churn-join %v, -fanout-churn-leave %v, -fanout-churn-changes %v, -fanout-churn-duration %s, -fanout-churn-sample-every %s, -fanout-churn-api %q, -fanout-churn-policies %q: want client counts, a replica, rates of 0 or more (changes above 0), positive durations, delta or sotw and a policy (%v)\n",
			list, *churnReplicas, *churnJoin, *churnLeave, *churnChanges, *churnDuration, *churnSample, *churnAPI, *churnPolicies, err)
		os.Exit(2)
	}
	cfg.Incremental.FanoutChurn = churnRowPlan{Clients: clients, Replicas: *churnReplicas, Join: *churnJoin, Leave: *churnLeave, Changes: *churnChanges,
		Duration: *churnDuration, SampleEvery: *churnSample, HeapFrom: *churnHeapFrom, API: *churnAPI, Policies: policies}
}

func fanOutChurn(ctx context.Context, e *env, plan churnRowPlan, out string, record func(runRecord)) error {
	for _, n := range plan.Clients {
		policies := plan.Policies
		if len(policies) == 0 {
			policies = []int{1}
		}
		for _, p := range policies {
			if err := fanOutChurnOnce(ctx, e, plan, n, p, out, record); err != nil {
				return err
			}
		}
	}
	return nil
}

// every calls f at rate a second until ctx ends (none when rate is 0).
func every(ctx context.Context, rate float64, f func()) {
	if rate <= 0 {
		return
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// churnSampleRec is one reading of the replicas' memory, seconds into the churn: the Go heap in use right
// after a collection (HeapInuse of /debug/pprof/heap?gc=1: what stays, without the garbage of the moment),
// go_memstats_heap_inuse_bytes of /metrics as read before it (with whatever garbage there was), and RSS.
type churnSampleRec struct {
	at               float64
	heap, inuse, rss []float64
}

// churnProfileSeconds is the length of the CPU profile of the first replica that the client-churn row takes
// from HeapFrom on (fanout-churn-N-Pp-cpu beside the results, for N clients and P policies): where a
// change's fan-out and the joins spend it.
const churnProfileSeconds = 30

func fanOutChurnOnce(ctx context.Context, e *env, plan churnRowPlan, n, P int, out string, record func(runRecord)) error {
	R := plan.Replicas
	f, err := startFleet(ctx, e, fleetOptions{row: fmt.Sprintf("fanout-churn-%dp", P), api: plan.API, replicas: R, clients: n,
		replica: replicaOptions{pprof: true}})
	if err != nil {
		return err
	}
	defer f.close()
	sotw, reps, pids := f.sotw, f.reps, f.pids
	// The fleet has the probe policy at change 1; the others start there too, before any client connects.
	names := []string{"probe"}
	for p := 1; p < P; p++ {
		names = append(names, fmt.Sprintf("probe-%d", p))
		if _, err := reps[0].c.Apply(ctx, probeNamed(names[p], "28091", 1), false); err != nil {
			return err
		}
	}
	if err := replicasHavePolicies(ctx, reps, names); err != nil {
		return err
	}
	books := newPolicyBooks(names)
	sw, err := startFanoutSwarm(ctx, f.addrs, n, swarmOptions{sotw: sotw, rejoin: true, books: books.books, clusters: books.clusters})
	if err != nil {
		return err
	}
	defer sw.stop()
	readyN, connectTook := sw.waitReady(5 * time.Minute)
	var notes []string
	if readyN < n {
		notes = append(notes, fmt.Sprintf("%d of %d simulated Envoys got a first config within 5 minutes", readyN, n))
	}
	if took, ok := waitSettled(pids); !ok {
		notes = append(notes, fmt.Sprintf("the replicas were still busy %s after the clients connected", took.Round(time.Second)))
	}

	rctx, stopRow := context.WithCancel(ctx)
	defer stopRow()
	var loops sync.WaitGroup
	for _, b := range books.books {
		loops.Go(func() { b.run(rctx, 250*time.Millisecond) })
	}
	// The cluster responses the replicas send over the churn, against the clients that were to have each
	// change: fewer when a client is sent several changes in one response (it had not acknowledged the last
	// when the next came), and the joins' first configs add some.
	// And the store writes the pushes took (lbplane_push_group_size): fewer than the pushes when pushes
	// made at once were written together.
	responses0, err := sumMetric(ctx, reps, clusterResponses)
	if err != nil {
		return err
	}
	writes0, err := sumMetric(ctx, reps, pushWrites)
	if err != nil {
		return err
	}
	started, runner0 := time.Now(), ownCPU()
	cpu0 := make([]float64, R)
	for i, pid := range pids {
		cpu0[i] = treeUsage(pid).CPUSeconds
	}
	var samples []churnSampleRec
	sample := func() {
		s := churnSampleRec{at: time.Since(started).Seconds(), heap: make([]float64, R), inuse: make([]float64, R), rss: make([]float64, R)}
		for i, r := range reps {
			s.rss[i] = float64(treeUsage(r.pid()).RSSBytes)
			s.heap[i], s.inuse[i] = -1, -1
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			if m, err := scrapeMetrics(c, r.metrics); err == nil {
				if h, ok := m["go_memstats_heap_inuse_bytes"]; ok {
					s.inuse[i] = h
				}
			}
			if h, err := heapAfterGC(c, r.metrics); err == nil {
				s.heap[i] = h
			}
			cancel()
		}
		samples = append(samples, s)
	}
	sample()
	loops.Go(func() { every(rctx, 1/plan.SampleEvery.Seconds(), sample) })
	profiled := make(chan string, 1)
	if plan.HeapFrom+churnProfileSeconds*time.Second <= plan.Duration {
		loops.Go(func() {
			select {
			case <-rctx.Done():
				profiled <- ""
			case <-time.After(plan.HeapFrom):
				profiled <- profileAt(reps[0].metrics, churnProfileSeconds, out, fmt.Sprintf("fanout-churn-%d-%dp-cpu", n, P))
			}
		})
	} else {
		profiled <- ""
	}
	// Each policy is pushed at its share of the rate, its pushes offset from the others' so that together
	// they are evenly spaced. A policy's push waits for its last one (a tick that comes meanwhile is
	// dropped), so its changes reach the store in order; pushes of different policies are made at once.
	// Change c of a policy sets its connect timeout to c seconds, which is how the clients' clusters show
	// what they have.
	var pushes, pushErrors atomic.Int64
	var pushMu sync.Mutex
	var pushMs []float64
	for p := range P {
		loops.Go(func() {
			select {
			case <-rctx.Done():
				return
			case <-time.After(time.Duration(float64(p) * float64(time.Second) / plan.Changes)):
			}
			b, change := books.books[p], 1
			every(rctx, plan.Changes/float64(P), func() {
				via := reps[int(pushes.Add(1))%R]
				k := b.begin(sw.all())
				change++
				b.made(k, strconv.Itoa(change))
				c, cancel := context.WithTimeout(rctx, 30*time.Second)
				defer cancel()
				sent := time.Now()
				if _, err := via.c.Apply(c, probeNamed(names[p], "28091", change), false); err != nil {
					if rctx.Err() == nil {
						if pushErrors.Add(1) <= 3 {
							fmt.Fprintf(os.Stderr, "fan-out churn: change %d of %s through %s: %v\n", change, names[p], via.id, err)
						}
					}
					b.failed(k)
					return
				}
				pushMu.Lock()
				pushMs = append(pushMs, float64(time.Since(sent).Microseconds())/1000)
				pushMu.Unlock()
			})
		})
	}
	joined, left := 0, 0
	loops.Go(func() {
		every(rctx, plan.Join, func() {
			if sw.add() == nil {
				joined++
			}
		})
	})
	loops.Go(func() {
		every(rctx, plan.Leave, func() {
			all := sw.all()
			// At random among the clients with their config that have not left (a few draws: nearly all are).
			for range 20 {
				st := all[rand.IntN(len(all))]
				if st.ready.Load() && !st.gone.Load() {
					sw.leave(st)
					left++
					return
				}
			}
		})
	})
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(plan.Duration):
	}
	stopRow()
	loops.Wait()
	if top := <-profiled; top != "" {
		fmt.Fprintln(os.Stderr, top)
	}
	wall := time.Since(started).Seconds()
	runnerCores := (ownCPU() - runner0).Seconds() / wall
	cores := make([]float64, R)
	coresAll := 0.0
	for i, pid := range pids {
		cores[i] = (treeUsage(pid).CPUSeconds - cpu0[i]) / wall
		coresAll += cores[i]
	}
	responses, err := sumMetric(ctx, reps, clusterResponses)
	if err == nil {
		responses -= responses0
	}
	writes, err := sumMetric(ctx, reps, pushWrites)
	if err == nil {
		writes -= writes0
	}
	// The last changes reach their clients (at most 10 s).
	lastTook := books.finish(sw.all(), 10*time.Second)
	res := books.result()
	pushesN, pushErrorsN := int(pushes.Load()), int(pushErrors.Load())
	connectedEnd := 0
	for _, c := range sw.connectedOn() {
		connectedEnd += c
	}

	extra := map[string]float64{"replicas": float64(R), "ready": float64(readyN), "connectSeconds": connectTook.Seconds(), "seconds": wall,
		"joinPerSecond": plan.Join, "leavePerSecond": plan.Leave, "changesPerSecondTarget": plan.Changes, "changesPerSecond": float64(pushesN) / wall,
		"joined": float64(joined), "left": float64(left), "connectedAtEnd": float64(connectedEnd),
		"pushes": float64(pushesN), "pushErrors": float64(pushErrorsN), "policies": float64(P),
		"pushMsP50": percentile(pushMs, 50), "pushMsP99": percentile(pushMs, 99), "clusterResponses": responses, "pushWrites": writes,
		"pushesPerWrite":            float64(pushesN-pushErrorsN) / max(writes, 1),
		"clusterResponsesPerMember": responses / float64(max(res.members, 1)), "changes": float64(res.changes), "changesLeftOut": float64(res.failed),
		"changesNotEverywhere": float64(res.incomplete), "clientChangesMissing": float64(res.missing), "membersPerChange": float64(res.members) / float64(max(res.changes, 1)),
		"leftWithout": float64(res.leftWithout), "lastChangeSeconds": lastTook,
		"backwardsClient": float64(res.backwards), "backwardsClients": float64(res.backClients), "stepVersions": float64(res.steps),
		"reconnects": float64(sw.reconnects.Load()), "connectErrors": float64(sw.clientErrors.Load()),
		"lbplaneCores": coresAll, "runnerCores": runnerCores, "runnerCoresAvailable": float64(runtime.GOMAXPROCS(0)), "heapFromSeconds": plan.HeapFrom.Seconds(), "sampleSeconds": plan.SampleEvery.Seconds()}
	for i := range reps {
		extra[fmt.Sprintf("r%d:cores", i)] = cores[i]
	}
	// Memory: every reading, and from HeapFrom on, the heap's span about its first reading there.
	drift, within := heapDrift(samples, plan.HeapFrom.Seconds(), func(s churnSampleRec) []float64 { return s.heap })
	extra["heapDrift"], extra["heapWithin10"] = drift, within
	extra["heapInuseDrift"], _ = heapDrift(samples, plan.HeapFrom.Seconds(), func(s churnSampleRec) []float64 { return s.inuse })
	var heapLo, heapHi float64 = math.Inf(1), 0
	for _, s := range samples {
		sec := int(math.Round(s.at))
		var heap, rss float64
		ok := true
		for i := range reps {
			extra[fmt.Sprintf("r%d:heap:%d", i, sec)] = s.heap[i]
			extra[fmt.Sprintf("r%d:heapInuse:%d", i, sec)] = s.inuse[i]
			extra[fmt.Sprintf("r%d:rss:%d", i, sec)] = s.rss[i]
			heap += s.heap[i]
			rss += s.rss[i]
			ok = ok && s.heap[i] > 0
		}
		if s.at >= plan.HeapFrom.Seconds() && ok {
			heapLo, heapHi = min(heapLo, heap), max(heapHi, heap)
		}
		extra["rssEnd"] = rss
	}
	if heapHi > 0 {
		extra["heapMinWindow"], extra["heapMaxWindow"] = heapLo, heapHi
	}
	if len(samples) > 0 {
		var heap float64
		for _, h := range samples[len(samples)-1].heap {
			heap += max(h, 0)
		}
		extra["heapEnd"] = heap
	}
	if note := clientsBound(runnerCores); note != "" {
		notes = append(notes, note)
	}
	if pushErrorsN > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d pushes failed", pushErrorsN, pushesN))
	}
	if rate := float64(pushesN) / wall; rate < 0.9*plan.Changes {
		notes = append(notes, fmt.Sprintf("%.1f changes a second pushed of %.1f asked for (each policy's push waits for its last one)", rate, plan.Changes))
	}
	note := strings.Join(notes, "; ")
	var rssEnd int64
	if len(samples) > 0 {
		for _, r := range samples[len(samples)-1].rss {
			rssEnd += int64(r)
		}
	}
	rec := runRecord{Scenario: "fanout-churn", Peer: "lbplane", API: apiName(sotw), Conns: n, Samples: res.latencies, Valid: note == "", Note: note,
		P50: percentile(res.latencies, 50), P99: percentile(res.latencies, 99), P999: percentile(res.latencies, 100), LbplaneRSS: rssEnd, Extra: extra}
	record(rec)
	fmt.Fprintf(os.Stderr, "fan-out churn, %d simulated %s Envoys on %d replica(s), +%.0f/-%.0f a second, %.1f changes a second of %d policies for %.0f s (a push answered in p50 %.0f ms, p99 %.0f ms): each change everywhere p50 %.0f ms, p99 %.0f ms, all %.0f ms (%d changes; %d never everywhere, %d clients short); %.2f pushes per store write; %.2f cluster responses per client and change; went back %d; lbplane %.2f cores, the simulated clients %.2f; heap %s; %d joined, %d left, %d connected at the end %s\n",
		n, rec.API, R, plan.Join, plan.Leave, float64(pushesN)/wall, P, wall, extra["pushMsP50"], extra["pushMsP99"], rec.P50, rec.P99, rec.P999, res.changes, res.incomplete, res.missing,
		extra["pushesPerWrite"], extra["clusterResponsesPerMember"], res.backwards, coresAll, runnerCores, heapText(extra), joined, left, connectedEnd, note)
	return nil
}

// clientsBound says when the simulated clients (with the rest of the runner) used nearly every core the
// runner has (GOMAXPROCS: with -fanout-pin, every CPU but lbplane's): then they, not lbplane, may have
// bounded how fast changes reached them.
func clientsBound(runnerCores float64) string {
	if have := float64(runtime.GOMAXPROCS(0)); runnerCores >= 0.85*have {
		return fmt.Sprintf("the simulated clients used %.2f of the runner's %.0f cores: they, not lbplane, may bound the times (fewer clients, or fewer changes a second)", runnerCores, have)
	}
	return ""
}

// heapAfterGC reads a replica's Go heap in use right after a collection it asks for (HeapInuse of
// /debug/pprof/heap?gc=1&debug=1, lbplane serve --pprof).
func heapAfterGC(ctx context.Context, addr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer bench")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s heap profile: %s", addr, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapInuse = "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s heap profile: no HeapInuse", addr)
}

// heapDrift is the largest departure of any replica's heap (of a reading: after a collection, or as it
// was) from its first reading at or after from seconds, as a share of that reading, and whether it stays
// within ±10 % (-1 for both with fewer than two readings there).
func heapDrift(samples []churnSampleRec, from float64, of func(churnSampleRec) []float64) (float64, float64) {
	if len(samples) == 0 {
		return -1, -1
	}
	drift := 0.0
	for i := range of(samples[0]) {
		base, n := -1.0, 0
		for _, s := range samples {
			h := of(s)[i]
			if s.at < from || h <= 0 {
				continue
			}
			if n++; base < 0 {
				base = h
				continue
			}
			drift = max(drift, math.Abs(h/base-1))
		}
		if n < 2 {
			return -1, -1
		}
	}
	return drift, b2f(drift <= 0.10)
}

func heapText(x map[string]float64) string {
	if x["heapDrift"] < 0 {
		return fmt.Sprintf("%s MiB at the end (fewer than two readings from %.0f s on)", f0MiB(x["heapEnd"]), x["heapFromSeconds"])
	}
	return fmt.Sprintf("%s–%s MiB after a collection from %.0f s on, at most %.1f %% from its first reading there (within 10 %%: %v; as read without a collection, %.1f %%)", f0MiB(x["heapMinWindow"]), f0MiB(x["heapMaxWindow"]),
		x["heapFromSeconds"], x["heapDrift"]*100, x["heapWithin10"] == 1, x["heapInuseDrift"]*100)
}

func f0MiB(b float64) string { return fmt.Sprintf("%.0f", b/(1<<20)) }

// fanoutChurnMarkdown is the runner's report part for the client-churn row.
func (r *report) fanoutChurnMarkdown(w func(string, ...any)) {
	runs := slices.DeleteFunc(slices.Clone(r.Runs), func(run runRecord) bool { return run.Scenario != "fanout-churn" })
	if len(runs) == 0 {
		return
	}
	w("\n## Client churn\n\nSimulated clients on replicas of `lbplane serve --store etcd`; clients connect and leave at a steady rate while probe policies change several times a second (each policy's push waits for its last; several policies are pushed at once). *Each change everywhere*: from its push until every client connected (with its first config) when it was pushed had it or a later change (clients that left before they had it are left out). lbplane's cores: its CPU seconds over the churn / its length. The heap is `go_memstats_heap_inuse_bytes`, read every few seconds; *drift* is its largest departure from its first reading from the given minute on.\n\n")
	w("| clients | xDS | replicas | joins / leaves a s | policies | changes a s | push answered p50 / p99 ms | changes | each change everywhere p50 / p99 / all ms | not everywhere | pushes per store write | cluster responses per client and change | went back | lbplane cores | heap MiB (drift) | RSS at the end MiB | valid |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range runs {
		x := c.Extra
		w("| %d | %s | %.0f | %.0f / %.0f | %.0f | %.1f | %.0f / %.0f | %.0f | %.0f / %.0f / %.0f | %.0f | %.2f | %.2f | %.0f | %.2f | %s | %s | %v %s |\n", c.Conns, c.API, x["replicas"], x["joinPerSecond"], x["leavePerSecond"],
			max(x["policies"], 1), x["changesPerSecond"], x["pushMsP50"], x["pushMsP99"], x["changes"], c.P50, c.P99, c.P999, x["changesNotEverywhere"], x["pushesPerWrite"], x["clusterResponsesPerMember"], x["backwardsClient"],
			x["lbplaneCores"], heapText(x), f0MiB(x["rssEnd"]), c.Valid, c.Note)
	}
}

// The series of /metrics the churn row counts: the cluster responses a replica has sent, and the store
// writes of its pushes.
const (
	clusterResponses = `lbplane_xds_pushes_total{type="Cluster"}`
	pushWrites       = "lbplane_push_group_size_count"
)

// sumMetric sums the series name of every replica's /metrics.
func sumMetric(ctx context.Context, reps []*fanoutReplica, name string) (float64, error) {
	sum := 0.0
	for _, r := range reps {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := scrapeMetrics(c, r.metrics)
		cancel()
		if err != nil {
			return 0, err
		}
		sum += m[name]
	}
	return sum, nil
}
