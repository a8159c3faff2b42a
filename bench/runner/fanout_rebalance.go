package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// Rebalancing after a restart (-fanout-rebalance N, opt-in): replicas of lbplane serve --store etcd with a
// short --xds-max-connection-age and simulated clients that, as clients behind a Kubernetes Service's one
// address, reach a replica at random each time they connect (and reconnect at once when a replica ends
// their connection at its age). Once every client has its config, one replica is killed (SIGKILL, as a
// crash), its clients move to the others, and it is started again the same (same flags, replica id and
// ports); the clients that reach it at their next reconnect are its share back. The push API of every
// replica is read every -fanout-rebalance-read-every for its clients (its ACK tracker, GET /v1/proxies), and
// a change of the probe policy is pushed every -fanout-rebalance-push-every through the replicas in turn
// throughout: no client may ever acknowledge an older change than one it had (as the clients saw it, and
// as the replicas' ACK trackers did), and every client must have the last one.
var (
	rebalanceClients  = flag.String("fanout-rebalance", "", "comma-separated simulated clients of the rebalancing row (one replica killed and restarted among -fanout-rebalance-replicas with a short maximum connection age; opt-in: empty, not run; -only fanout-rebalance runs it with 3000); each count on fresh replicas and a fresh etcd")
	rebalanceReplicas = flag.Int("fanout-rebalance-replicas", 3, "replicas of the rebalancing row")
	rebalanceMaxAge   = flag.Duration("fanout-rebalance-max-age", 30*time.Second, "the rebalancing row's lbplane serve --xds-max-connection-age")
	rebalanceWindow   = flag.Duration("fanout-rebalance-window", 90*time.Second, "how long the rebalancing row reads the client counts after the restart (the target is read at 60 s)")
	rebalanceEvery    = flag.Duration("fanout-rebalance-push-every", 2*time.Second, "the rebalancing row pushes a change of the probe policy this often, through the live replicas in turn")
	rebalanceRead     = flag.Duration("fanout-rebalance-read-every", time.Second, "the rebalancing row reads every replica's clients and the versions they acknowledged (GET /v1/proxies) this often")
	rebalanceShare    = flag.Float64("fanout-rebalance-share", 0.28, "the rebalancing row times the restarted replica until it holds this share of the clients")
	rebalanceAPI      = flag.String("fanout-rebalance-api", "delta", "the rebalancing row's simulated clients' xDS: delta or sotw")
)

// rebalancePlan is the row's part of the recorded plan.
type rebalancePlan struct {
	Clients   []int         `json:"clients,omitempty"`
	Replicas  int           `json:"replicas,omitempty"`
	MaxAge    time.Duration `json:"maxAge,omitempty"`
	Window    time.Duration `json:"window,omitempty"`
	PushEvery time.Duration `json:"pushEvery,omitempty"`
	ReadEvery time.Duration `json:"readEvery,omitempty"`
	Share     float64       `json:"share,omitempty"`
	API       string        `json:"api,omitempty"`
}

// applyRebalance puts the row into the plan when asked for (the flag, or -only naming it).
func applyRebalance(cfg *config, only string) {
	list := *rebalanceClients
	if list == "" && strings.Contains(","+only+",", ",fanout-rebalance,") {
		list = "3000"
	}
	if list == "" {
		return
	}
	clients, err := intList(list)
	if err == nil {
		_, err = swarmAPI(*rebalanceAPI)
	}
	if err != nil || *rebalanceReplicas < 2 || *rebalanceMaxAge <= 0 || *rebalanceEvery <= 0 || *rebalanceRead <= 0 || *rebalanceWindow < time.Minute {
		fmt.Fprintf(os.Stderr, "error: -fanout-rebalance %q, -fanout-rebalance-replicas %d, -fanout-rebalance-max-age %s, -fanout-rebalance-push-every %s, -fanout-rebalance-read-every %s, -fanout-rebalance-window %s, -fanout-rebalance-api %q: want client counts, at least two replicas, positive intervals, a window of at least a minute and delta or sotw (%v)\n",
			list, *rebalanceReplicas, *rebalanceMaxAge, *rebalanceEvery, *rebalanceRead, *rebalanceWindow, *rebalanceAPI, err)
		os.Exit(2)
	}
	cfg.Incremental.FanoutRebalance = rebalancePlan{Clients: clients, Replicas: *rebalanceReplicas, MaxAge: *rebalanceMaxAge, Window: *rebalanceWindow,
		PushEvery: *rebalanceEvery, ReadEvery: *rebalanceRead, Share: *rebalanceShare, API: *rebalanceAPI}
}

func fanOutRebalance(ctx context.Context, e *env, plan rebalancePlan, out string, record func(runRecord)) error {
	for _, n := range plan.Clients {
		if err := fanOutRebalanceOnce(ctx, e, plan, n, out, record); err != nil {
			return err
		}
	}
	return nil
}

// rebalanceReading is one reading of every replica's clients (-1: its push API did not answer or it was
// down), At seconds after the killed replica was started again (negative before).
type rebalanceReading struct {
	At      float64 `json:"at"`
	Clients []int   `json:"clients"`
	// ClientsSeen: the clients connected to each replica as the clients saw it at the same moment.
	ClientsSeen []int `json:"clientsSeen"`

	start time.Time
}

func fanOutRebalanceOnce(ctx context.Context, e *env, plan rebalancePlan, n int, out string, record func(runRecord)) error {
	R := plan.Replicas
	f, err := startFleet(ctx, e, fleetOptions{row: "fanout-rebalance", api: plan.API, replicas: R, clients: n,
		replica: replicaOptions{metrics: true, extra: []string{"--xds-max-connection-age", plan.MaxAge.String()}}, book: true})
	if err != nil {
		return err
	}
	defer f.close()
	sotw, reps, book := f.sotw, f.reps, f.book
	change := 1
	sw, err := startFanoutSwarm(ctx, f.addrs, n, swarmOptions{sotw: sotw, random: true, rejoin: true, books: []*versionBook{book}})
	if err != nil {
		return err
	}
	defer sw.stop()
	readyN, connectTook := sw.waitReady(5 * time.Minute)
	var notes []string
	if readyN < n {
		notes = append(notes, fmt.Sprintf("%d of %d simulated Envoys got a first config within 5 minutes", readyN, n))
	}
	if took, ok := waitSettled(f.pids); !ok {
		notes = append(notes, fmt.Sprintf("the replicas were still busy %s after the clients connected", took.Round(time.Second)))
	}
	rctx, stopRow := context.WithCancel(ctx)
	defer stopRow()
	go book.run(rctx, 250*time.Millisecond)
	started, runner0 := time.Now(), ownCPU()

	// Which replicas are up (the killed one is neither read nor pushed through), and when the killed one
	// was started again (readings are timed from it).
	victim := R - 1
	var mu sync.Mutex
	down := false
	var restartAt time.Time
	var readings []rebalanceReading
	var check trackerCheck
	var readTook []float64
	var readers sync.WaitGroup
	readers.Go(func() {
		t := time.NewTicker(plan.ReadEvery)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			mu.Lock()
			isDown := down
			mu.Unlock()
			r := rebalanceReading{Clients: make([]int, R), start: time.Now()}
			lists := make([][]apiwire.ProxyStatus, R)
			var wg sync.WaitGroup
			start := time.Now()
			for i, rep := range reps {
				r.Clients[i] = -1
				if isDown && i == victim {
					continue
				}
				wg.Go(func() {
					c, cancel := context.WithTimeout(rctx, 5*time.Second)
					defer cancel()
					if ps, err := rep.c.Proxies(c); err == nil {
						lists[i] = ps
						r.Clients[i] = len(ps)
					}
				})
			}
			wg.Wait()
			r.ClientsSeen = sw.connectedOn()
			took := time.Since(start)
			for i, ps := range lists {
				if ps != nil {
					check.add(i, ps, book.known)
				}
			}
			mu.Lock()
			readings = append(readings, r)
			readTook = append(readTook, took.Seconds()*1000)
			mu.Unlock()
		}
	})
	// A change every PushEvery, through the live replicas in turn.
	pushes, pushErrors := 0, 0
	var pushers sync.WaitGroup
	// pushing is held through each push, so that the kill never falls into one (a push the killed replica
	// took and never answered would count as refused).
	var pushing sync.Mutex
	pushOne := func(via *fanoutReplica) {
		k := book.begin(sw.all())
		change++
		c, cancel := context.WithTimeout(rctx, 30*time.Second)
		defer cancel()
		pushes++
		if _, err := via.c.Apply(c, probe("28091", change), false); err != nil {
			pushErrors++
			book.failed(k)
			if pushErrors <= 3 {
				fmt.Fprintf(os.Stderr, "fan-out rebalance: change %d through %s: %v\n", k, via.id, err)
			}
			return
		}
		v, err := groupVersion(c, via)
		if err != nil {
			pushErrors++
			book.failed(k)
			return
		}
		book.made(k, v)
	}
	pushers.Go(func() {
		t := time.NewTicker(plan.PushEvery)
		defer t.Stop()
		for next := 0; ; next++ {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			pushing.Lock()
			mu.Lock()
			isDown := down
			mu.Unlock()
			via := reps[next%R]
			if isDown && next%R == victim {
				via = reps[(next+1)%R]
			}
			pushOne(via)
			pushing.Unlock()
		}
	})
	// A few changes with every replica up, then the crash.
	time.Sleep(3 * plan.PushEvery)
	pushing.Lock()
	mu.Lock()
	down = true
	mu.Unlock()
	killAt := time.Now()
	reps[victim].lb.kill()
	pushing.Unlock()
	// Its clients move to the others (each reconnects at once, to a replica at random, again when that is
	// the dead one): until the others hold every client, for at most a minute.
	movedTook := -1.0
	pollFor(time.Minute, 100*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(readings) == 0 {
			return false
		}
		last := readings[len(readings)-1]
		sum := 0
		for i, c := range last.Clients {
			if i != victim {
				sum += max(c, 0)
			}
		}
		if sum >= readyN {
			movedTook = time.Since(killAt).Seconds()
			return true
		}
		return false
	})
	if movedTook < 0 {
		notes = append(notes, "the other replicas did not hold every client within a minute of the kill")
	}
	mu.Lock()
	restartAt = time.Now()
	mu.Unlock()
	if err := reps[victim].start(); err != nil {
		return err
	}
	if err := reps[victim].waitServing(90 * time.Second); err != nil {
		return err
	}
	servingTook := time.Since(restartAt).Seconds()
	servingAt := time.Now()
	mu.Lock()
	down = false
	mu.Unlock()
	fmt.Fprintf(os.Stderr, "fan-out rebalance: %s killed; the others held every client %.1f s later; started again, serving after %.1f s\n", reps[victim].id, movedTook, servingTook)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(restartAt.Add(plan.Window))):
	}
	// The share at 60 s is read from the first reading at or after it.
	pollFor(10*time.Second, 100*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(readings) > 0 && readings[len(readings)-1].start.Sub(restartAt) >= time.Minute
	})
	// The last change, then until every client has it (at most 30 s).
	stopRow()
	pushers.Wait()
	readers.Wait()
	last := book.begin(sw.all())
	change++
	lastVia := reps[0]
	pushes++
	if _, err := lastVia.c.Apply(ctx, probe("28091", change), false); err != nil {
		return fmt.Errorf("the last change: %w", err)
	}
	v, err := groupVersion(ctx, lastVia)
	if err != nil {
		return err
	}
	book.made(last, v)
	lastTook := -1.0
	if pollFor(30*time.Second, 100*time.Millisecond, func() bool { book.collect(); return book.complete(last) }) {
		lastTook = time.Since(book.pushedAt(last)).Seconds()
	}
	runnerCores := (ownCPU() - runner0).Seconds() / time.Since(started).Seconds()
	if note := clientsBound(runnerCores); note != "" {
		notes = append(notes, note)
	}
	book.collect()
	res := book.result()
	trackerStreams, trackerNodes := check.backwards()

	// The restarted replica's share of the clients at each reading after its restart.
	share := func(r rebalanceReading) float64 {
		sum := 0
		for _, c := range r.Clients {
			sum += max(c, 0)
		}
		if sum == 0 || r.Clients[victim] < 0 {
			return 0
		}
		return float64(r.Clients[victim]) / float64(sum)
	}
	toShare, shareAt60 := -1.0, -1.0
	var at60 *rebalanceReading
	for i := range readings {
		r := &readings[i]
		r.At = r.start.Sub(restartAt).Seconds()
		if r.At < 0 {
			continue
		}
		if toShare < 0 && share(*r) >= plan.Share {
			toShare = r.At
		}
		if at60 == nil && r.At >= 60 {
			at60 = r
		}
	}
	extra := map[string]float64{"replicas": float64(R), "maxAgeSeconds": plan.MaxAge.Seconds(), "targetShare": plan.Share, "windowSeconds": plan.Window.Seconds(),
		"ready": float64(readyN), "connectSeconds": connectTook.Seconds(), "victim": float64(victim), "movedSeconds": movedTook, "servingSeconds": servingTook,
		"toShareSeconds": toShare, "pushes": float64(pushes), "pushErrors": float64(pushErrors), "changes": float64(res.changes), "changesLeftOut": float64(res.failed),
		"changesNotEverywhere": float64(res.incomplete), "clientChangesMissing": float64(res.missing), "lastChangeSeconds": lastTook,
		"backwardsClient": float64(res.backwards), "backwardsClients": float64(res.backClients), "stepVersions": float64(res.steps),
		"backwardsTrackerStreams": float64(trackerStreams), "backwardsTrackerNodes": float64(trackerNodes), "trackerStreamsSeen": float64(check.streams()),
		"readings":        float64(len(readings)),
		"beforeKillP99Ms": percentile(res.between(time.Time{}, killAt), 99), "outageMaxMs": percentile(res.between(killAt, servingAt), 100),
		"afterRestartP50Ms": percentile(res.between(servingAt, time.Time{}), 50), "afterRestartP99Ms": percentile(res.between(servingAt, time.Time{}), 99),
		"afterRestartMaxMs": percentile(res.between(servingAt, time.Time{}), 100), "readMsP50": percentile(readTook, 50), "readMsMax": percentile(readTook, 100),
		"runnerCores": runnerCores, "reconnects": float64(sw.reconnects.Load()), "connectErrors": float64(sw.clientErrors.Load())}
	if at60 != nil {
		shareAt60 = share(*at60)
		sum, most := 0, 0
		for i, c := range at60.Clients {
			extra[fmt.Sprintf("r%d:clientsAt60", i)] = float64(c)
			sum += max(c, 0)
			most = max(most, c)
		}
		extra["maxOverMeanAt60"] = float64(most) / (float64(sum) / float64(R))
		extra["clientsAt60"] = float64(sum)
	}
	extra["shareAt60"] = shareAt60
	for i, r := range reps {
		if r.metrics == "" {
			continue
		}
		if m, err := scrapeMetrics(ctx, r.metrics); err == nil {
			extra[fmt.Sprintf("r%d:closedMaxAge", i)] = m[`lbplane_xds_connections_closed_total{reason="max_age"}`]
		}
	}
	if at60 == nil {
		notes = append(notes, "no reading 60 s after the restart")
	}
	if pushErrors > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d pushes failed", pushErrors, pushes))
	}
	if res.incomplete > 0 {
		notes = append(notes, fmt.Sprintf("%d changes never reached every client connected when they were pushed (%d clients short in all)", res.incomplete, res.missing))
	}
	if lastTook < 0 {
		notes = append(notes, "the last change had not reached every client 30 s after it was pushed")
	}
	note := strings.Join(notes, "; ")
	rec := runRecord{Scenario: "fanout-rebalance", Peer: "lbplane", API: apiName(sotw), Conns: n, Samples: res.latencies, Valid: note == "", Note: note,
		P50: percentile(res.latencies, 50), P99: percentile(res.latencies, 99), P999: percentile(res.latencies, 100), Extra: extra}
	record(rec)
	if b, err := json.Marshal(readings); err == nil {
		os.WriteFile(filepath.Join(out, fmt.Sprintf("fanout-rebalance-%s-%d-readings.json", rec.API, n)), b, 0o644)
	}
	var per []string
	if at60 != nil {
		for i, c := range at60.Clients {
			per = append(per, fmt.Sprintf("%s %d", reps[i].id, c))
		}
	}
	fmt.Fprintf(os.Stderr, "fan-out rebalance, %d simulated %s Envoys over %d replicas (max age %s): %s restarted holds %.0f %% of the clients after %s (target %.0f %% within 60 s); at 60 s %.1f %% (%s), max/mean %.2f; %d changes, each everywhere p50 %.0f ms, p99 %.0f ms, all %.0f ms (those pushed after the restart p99 %.0f ms, all %.0f ms; while a replica was down, all %.0f ms); went back: %d acknowledgements by %d clients, %d tracker streams of %d nodes; %d changes not everywhere; %d reconnects %s\n",
		n, rec.API, R, plan.MaxAge, reps[victim].id, plan.Share*100, secondsOrNever(toShare), plan.Share*100, shareAt60*100, strings.Join(per, ", "), extra["maxOverMeanAt60"],
		res.changes, rec.P50, rec.P99, rec.P999, extra["afterRestartP99Ms"], extra["afterRestartMaxMs"], extra["outageMaxMs"], res.backwards, res.backClients, trackerStreams, trackerNodes, res.incomplete, sw.reconnects.Load(), note)
	return nil
}

func secondsOrNever(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.0f s", s)
}

// groupVersion is the config version a replica serves the default proxy group (GET /v1/version: a hash of
// the content, the same on every replica serving the same records).
func groupVersion(ctx context.Context, r *fanoutReplica) (string, error) {
	v, err := r.c.Version(ctx)
	if err != nil {
		return "", err
	}
	if v.Store == nil || v.Store.Versions["default"] == "" {
		return "", fmt.Errorf("replica %s names no version for the default group", r.id)
	}
	return v.Store.Versions["default"], nil
}

// scrapeMetrics reads lbplane's /metrics at addr: each sample by its name and labels as written
// (name{label="value",...}).
func scrapeMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer bench")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// rebalanceMarkdown is the runner's report part for the rebalancing row.
func (r *report) rebalanceMarkdown(w func(string, ...any)) {
	runs := slices.DeleteFunc(slices.Clone(r.Runs), func(run runRecord) bool { return run.Scenario != "fanout-rebalance" })
	if len(runs) == 0 {
		return
	}
	w("\n## Rebalancing after a replica restarts\n\nReplicas of `lbplane serve --store etcd` with a short `--xds-max-connection-age`; simulated clients reach a replica at random each time they connect (as behind one Kubernetes Service) and reconnect at once when a replica ends their connection. One replica is killed once every client has its config, and started again the same once the others hold every client; every replica's clients are read from its push API (`/v1/proxies`) every second, and the probe policy changes every few seconds throughout. *Went back*: a client acknowledged an older change than one it had (as the clients saw it / as the replicas' ACK trackers did). *Each change everywhere*: from its push until every client connected then had it; over every change, and over those pushed after the restarted replica served again (the changes pushed while a replica was down wait for its clients to reconnect).\n\n")
	w("| clients | xDS | replicas | max age s | others hold all after s | to the target share s | share at 60 s | max/mean at 60 s | changes | each change everywhere p50 / p99 / all ms | after the restart p99 / all ms | went back: client / tracker | changes not everywhere | valid |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range runs {
		x := c.Extra
		share := "-"
		if x["shareAt60"] >= 0 {
			share = fmt.Sprintf("%.1f %%", x["shareAt60"]*100)
		}
		w("| %d | %s | %.0f | %.0f | %s | %s | %s | %.2f | %.0f | %.0f / %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f | %v %s |\n", c.Conns, c.API, x["replicas"], x["maxAgeSeconds"], secondsOrNever(x["movedSeconds"]),
			secondsOrNever(x["toShareSeconds"]), share, x["maxOverMeanAt60"], x["changes"], c.P50, c.P99, c.P999, x["afterRestartP99Ms"], x["afterRestartMaxMs"], x["backwardsClient"], x["backwardsTrackerStreams"], x["changesNotEverywhere"], c.Valid, c.Note)
	}
}
