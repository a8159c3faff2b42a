package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/pushapi"
)

// The fan-out across replicas (-fanout-replicas N, opt-in): N lbplane replicas (lbplane serve --store
// etcd) on one one-member etcd, the simulated delta clients of the fan-out row spread over them (client i
// on replica i mod N), and a few changes of the probe policy, each pushed through one replica in turn and
// timed from the push sent until every client, on every replica, has all of it.
var (
	fanoutReplicas          = flag.Int("fanout-replicas", 0, "run the fan-out row across this many lbplane replicas on one etcd (lbplane serve --store etcd; 0: not run; -only fanout-replicas runs it alone)")
	fanoutReplicaClients    = flag.String("fanout-replica-clients", "10000", "comma-separated simulated delta clients of the -fanout-replicas row, spread evenly over the replicas; each count on fresh replicas and a fresh etcd")
	fanoutReplicaChanges    = flag.Int("fanout-replica-changes", 3, "changes timed in each -fanout-replicas run, pushed through each replica in turn")
	fanoutReplicaAPI        = flag.String("fanout-replica-api", "delta", "the -fanout-replicas row's simulated clients' xDS: delta, or sotw (state of the world, as an Envoy asks: clusters and listeners by wildcard, endpoints and routes by the names those name); recorded as the runs' api")
	fanoutReplicaSwarmProcs = flag.Int("fanout-replica-swarm-procs", 1, "-fanout-replicas: spread the simulated clients over this many child processes of the runner, about clients/K each (client i still on replica i mod N), so that each holds fewer sockets than the open-file limit allows one process; 1: all in the runner's process")
	fanoutReplicaProfile    = flag.String("fanout-replica-profile-dir", "", "-fanout-replicas: write a CPU profile of each replica over each change (change<c>-r<i>.pprof, from just before the push) and its heap profile once every client is connected (connected-r<i>-heap.pprof; its heap in use, stacks and goroutines from /metrics then go into the record) to this directory, and run the replicas with GODEBUG=gctrace=1 (in their logs: keep them with -keep)")
)

// fanoutReplicasPlan is the row's part of the recorded plan.
type fanoutReplicasPlan struct {
	Replicas int    `json:"replicas,omitempty"`
	Clients  []int  `json:"clients,omitempty"`
	Changes  int    `json:"changes,omitempty"`
	API      string `json:"api,omitempty"`
}

// applyFanoutReplicas puts the -fanout-replicas row into the plan when asked for (the flag, or -only naming it).
func applyFanoutReplicas(cfg *config, only string) {
	n := *fanoutReplicas
	if n == 0 && strings.Contains(","+only+",", ",fanout-replicas,") {
		n = 3
	}
	if n == 0 {
		return
	}
	clients, err := intList(*fanoutReplicaClients)
	if err == nil {
		_, err = swarmAPI(*fanoutReplicaAPI)
	}
	if err != nil || n < 1 || *fanoutReplicaChanges < 1 || *fanoutReplicaSwarmProcs < 1 {
		fmt.Fprintf(os.Stderr, "error: -fanout-replicas %d, -fanout-replica-clients %q, -fanout-replica-changes %d, -fanout-replica-api %q, -fanout-replica-swarm-procs %d: want at least one replica, client counts, one change, delta or sotw and at least one process (%v)\n",
			n, *fanoutReplicaClients, *fanoutReplicaChanges, *fanoutReplicaAPI, *fanoutReplicaSwarmProcs, err)
		os.Exit(2)
	}
	cfg.Incremental.FanoutReplicas = fanoutReplicasPlan{Replicas: n, Clients: clients, Changes: *fanoutReplicaChanges, API: *fanoutReplicaAPI}
}

// fanoutReplicasBase is the row's first port: replica r has xDS and API at base+3r and base+3r+1 (moves
// with -cp-port-offset).
func fanoutReplicasBase() int { return cpBase + 980 }

func fanOutReplicas(ctx context.Context, e *env, plan fanoutReplicasPlan, record func(runRecord)) error {
	for _, n := range plan.Clients {
		if err := fanOutReplicasOnce(ctx, e, plan, n, record); err != nil {
			return err
		}
	}
	return nil
}

// fanoutReplica is one lbplane of the replica rows: its addresses, its process and push API client, and
// what it was started with, so that it can be started again the same (restart).
type fanoutReplica struct {
	id, xds, metrics string
	dir, bin         string
	args, env        []string
	lb               *proc
	c                *pushapi.Client
	starts           int
}

// replicaOptions say how the replica rows start their lbplanes.
type replicaOptions struct {
	// etcd: lbplane serve's flags for the shared etcd (startEtcdStore); none: one standalone lbplane with its
	// own store.
	etcd []string
	pin  *pinning
	// metrics: serve /metrics at each replica's third port (base+3r+2); pprof: and net/http/pprof there.
	metrics, pprof bool
	env            []string
	extra          []string // more lbplane serve flags, for every replica
}

// startFanoutReplicas starts n replicas under dir (replica r with xDS at fanoutReplicasBase()+3r and its
// push API at the next port; every replica on lbplane's CPU when pinned: together they have what the
// one-lbplane rows' lbplane had) and waits for their push APIs (a follower waits for the leader's CA and
// tokens, up to a minute, before it serves).
func startFanoutReplicas(e *env, dir string, n int, o replicaOptions) ([]*fanoutReplica, error) {
	var reps []*fanoutReplica
	fail := func(err error) ([]*fanoutReplica, error) {
		for _, r := range reps {
			r.lb.stop()
		}
		return nil, err
	}
	for r := range n {
		base := fanoutReplicasBase() + 3*r
		rdir := filepath.Join(dir, fmt.Sprintf("r%d", r))
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			return fail(err)
		}
		id := fmt.Sprintf("r%d", r)
		xds, apiAddr, metrics := fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1), ""
		args := serveArgs(rdir, xds, apiAddr, "--xds-max-connections", "-1")
		if len(o.etcd) > 0 {
			args = append(append(args, "--replica-id", id), o.etcd...)
		}
		switch {
		case o.pprof:
			args = append(args, pprofArgs(base+2)...)
			metrics = fmt.Sprintf("127.0.0.1:%d", base+2)
		case o.metrics:
			metrics = fmt.Sprintf("127.0.0.1:%d", base+2)
			args = append(args, "--metrics-address", metrics)
		default:
			args = append(args, "--metrics-address", "")
		}
		args = append(args, o.extra...)
		bin := filepath.Join(e.bin, "lbplane")
		if o.pin != nil {
			args = append([]string{"-c", o.pin.lbplane, bin}, args...)
			bin = o.pin.taskset
		}
		rep := &fanoutReplica{id: id, xds: xds, metrics: metrics, dir: rdir, bin: bin, args: args, env: o.env,
			c: &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: time.Minute}}}
		if err := rep.start(); err != nil {
			return fail(err)
		}
		reps = append(reps, rep)
	}
	for _, r := range reps {
		if err := r.waitServing(90 * time.Second); err != nil {
			return fail(err)
		}
	}
	return reps, nil
}

// start starts the replica's lbplane (again: the same command, its log beside the first one's).
func (r *fanoutReplica) start() error {
	name := "lbplane"
	if r.starts > 0 {
		name = fmt.Sprintf("lbplane-%d", r.starts+1)
	}
	lb, err := start(r.dir, name, r.env, r.bin, r.args...)
	if err != nil {
		return err
	}
	r.lb, r.starts = lb, r.starts+1
	return nil
}

// waitServing waits for the replica's push API.
func (r *fanoutReplica) waitServing(within time.Duration) error {
	if err := waitPort(strings.TrimPrefix(r.c.BaseURL, "http://"), within); err != nil {
		return fmt.Errorf("replica %s: %w", r.id, err)
	}
	return nil
}

func (r *fanoutReplica) pid() int { return r.lb.cmd.Process.Pid }

func stopReplicas(reps []*fanoutReplica) {
	for _, r := range reps {
		r.lb.stop()
	}
}

// replicasHaveProbe waits until every replica lists the probe policy (loaded from the store).
func replicasHaveProbe(ctx context.Context, reps []*fanoutReplica) error {
	return replicasHavePolicies(ctx, reps, []string{"probe"})
}

// replicasHavePolicies waits until every replica lists every policy named (loaded from the store).
func replicasHavePolicies(ctx context.Context, reps []*fanoutReplica, names []string) error {
	for _, r := range reps {
		if !waitFor(30*time.Second, func() bool {
			ps, err := r.c.List(ctx)
			if err != nil {
				return false
			}
			for _, name := range names {
				if !slices.ContainsFunc(ps, func(p *v1alpha1.LoadBalancerPolicy) bool { return p.Name == name }) {
					return false
				}
			}
			return true
		}) {
			return fmt.Errorf("replica %s never listed every policy of %v pushed through %s", r.id, names, reps[0].id)
		}
	}
	return nil
}

func fanOutReplicasOnce(ctx context.Context, e *env, plan fanoutReplicasPlan, n int, record func(runRecord)) error {
	R := plan.Replicas
	ro := replicaOptions{pprof: *fanoutReplicaProfile != ""}
	if ro.pprof {
		ro.env = []string{"GODEBUG=gctrace=1"}
	}
	idle := make([]usage, R)
	f, err := startFleet(ctx, e, fleetOptions{row: "fanout-replicas", api: cmp.Or(plan.API, "delta"), replicas: R, clients: n, replica: ro,
		idle: func(reps []*fanoutReplica) {
			time.Sleep(2 * time.Second) // the first publish settles; idle is each replica with its config and no client
			for i, r := range reps {
				idle[i] = treeUsage(r.pid())
			}
		}})
	if err != nil {
		return err
	}
	defer f.close()
	sotw, reps, pin := f.sotw, f.reps, f.pin
	sw, err := startReplicaSwarm(ctx, f.addrs, n, *fanoutReplicaSwarmProcs, sotw)
	if err != nil {
		return err
	}
	defer sw.stop()
	readyN, connectTook := sw.waitReady(5 * time.Minute)
	if err := sw.failed(); err != nil {
		return err
	}
	note := ""
	if readyN < n {
		note = fmt.Sprintf("%d of %d simulated Envoys got a first config within 5 minutes; the changes are timed to those", readyN, n)
		fmt.Fprintln(os.Stderr, "fan-out across replicas: "+note)
	}
	// The replicas have finished with the connects (their last responses and their garbage) before the
	// first change: their CPU has gone quiet.
	atReady := make([]usage, R)
	for i, r := range reps {
		atReady[i] = treeUsage(r.pid())
	}
	settleTook, settled := waitSettled(f.pids)
	if !settled {
		note = strings.TrimPrefix(note+fmt.Sprintf("; the replicas were still busy %s after the clients connected", settleTook.Round(time.Second)), "; ")
	}
	connected := make([]usage, R)
	streams := make([]int, R)
	var rssAll int64
	for i, r := range reps {
		connected[i] = treeUsage(r.pid())
		rssAll += connected[i].RSSBytes
		fmt.Fprintf(os.Stderr, "  %s: %.0f ms CPU from every client ready until settled (%.1f s)\n", r.id, (connected[i].CPUSeconds-atReady[i].CPUSeconds)*1000, settleTook.Seconds())
		streams[i] = -1
		if ps, err := r.c.Proxies(ctx); err == nil {
			streams[i] = len(ps)
		}
	}
	// What each replica's heap holds with every client connected, read after the RSS above: the live heap a
	// client costs, beside the RSS, which keeps the heap's peak.
	// Beside it, from /metrics: the heap in use, the goroutines' stacks and the goroutines, which RSS holds
	// too and a heap profile does not show.
	memory := make([]map[string]float64, R)
	if *fanoutReplicaProfile != "" {
		for i := range reps {
			addr := fmt.Sprintf("127.0.0.1:%d", fanoutReplicasBase()+3*i+2)
			profileURL(ctx, addr, "heap", filepath.Join(*fanoutReplicaProfile, fmt.Sprintf("connected-r%d-heap.pprof", i)))
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			if m, err := scrapeMetrics(c, addr); err == nil {
				memory[i] = m
			}
			cancel()
		}
	}
	onReplica := func(r int) int { return n/R + b2i(r < n%R) }
	for c := range plan.Changes {
		via := c % R
		before := make([]usage, R)
		for i, r := range reps {
			before[i] = treeUsage(r.pid())
		}
		lostBefore := sw.lostAfterChange()
		var profiles sync.WaitGroup
		if *fanoutReplicaProfile != "" {
			for i := range reps {
				profiles.Go(func() {
					profileCPUFor(ctx, fmt.Sprintf("127.0.0.1:%d", fanoutReplicasBase()+3*i+2), 6,
						filepath.Join(*fanoutReplicaProfile, fmt.Sprintf("change%d-r%d.pprof", c+1, i)))
				})
			}
			time.Sleep(200 * time.Millisecond) // the profiles have started
		}
		for i, r := range reps {
			u := treeUsage(r.pid())
			fmt.Fprintf(os.Stderr, "  before change %d: %s %.0f ms CPU since connected\n", c+1, r.id, (u.CPUSeconds-connected[i].CPUSeconds)*1000)
		}
		usedBefore := sw.usage()
		sw.startChange()
		// Each change a new connect timeout (1 s is the first config's), so that it is a change.
		if _, err := reps[via].c.Apply(ctx, probe("28091", 7+c), false); err != nil {
			return fmt.Errorf("change %d through %s: %w", c+1, reps[via].id, err)
		}
		acceptedMs := float64(time.Now().UnixNano()-sw.changeStart()) / 1e6
		sw.waitChange()
		if err := sw.failed(); err != nil {
			return fmt.Errorf("change %d: %w", c+1, err)
		}
		used, procsText := sw.usage(), ""
		if sw.procs() > 1 {
			procsText = fmt.Sprintf(" in %d processes (theirs %d MiB resident)", sw.procs(), used.childRSS>>20)
		}
		fmt.Fprintf(os.Stderr, "  change %d (pushed %s, %.3f s after the runner started): the simulated clients used %.0f ms CPU and %d page faults%s\n", c+1,
			time.Unix(0, sw.changeStart()).UTC().Format("15:04:05.000"), time.Since(runnerStart).Seconds()-time.Since(time.Unix(0, sw.changeStart())).Seconds(), (used.cpu-usedBefore.cpu).Seconds()*1000, used.faults-usedBefore.faults, procsText)
		profiles.Wait()
		all := sw.result(-1)
		cnote := note
		if lost := sw.lostAfterChange() - lostBefore; lost > 0 {
			cnote += fmt.Sprintf("; %d simulated Envoys lost their connection during the change", lost)
		}
		if len(all.samples) < readyN {
			cnote += fmt.Sprintf("; only %d of %d simulated Envoys got the change within 2 minutes", len(all.samples), readyN)
		}
		cnote = strings.TrimPrefix(cnote, "; ")
		extra := map[string]float64{"replicas": float64(R), "change": float64(c + 1), "via": float64(via), "acceptedMs": acceptedMs,
			"connectSeconds": connectTook.Seconds(), "settleSeconds": settleTook.Seconds(), "ready": float64(readyN), "got": float64(len(all.samples)),
			"firstP50": percentile(all.firsts, 50), "firstAll": percentile(all.firsts, 100), "pinned": b2f(pin != nil),
			"types": float64(len(fanoutTypes())), "connectionsLost": float64(sw.connectionsLost()), "swarmProcs": float64(sw.procs())}
		var cpuMs float64
		var perReplica []string
		for i, r := range reps {
			res := sw.result(i)
			after := treeUsage(r.pid())
			rcpu := (after.CPUSeconds - before[i].CPUSeconds) * 1000
			cpuMs += rcpu
			perClient := float64(connected[i].RSSBytes-idle[i].RSSBytes) / float64(max(onReplica(i), 1)) / 1024
			p := r.id + ":"
			extra[p+"clients"] = float64(onReplica(i))
			extra[p+"streams"] = float64(streams[i])
			extra[p+"got"] = float64(len(res.samples))
			extra[p+"p50"] = percentile(res.samples, 50)
			extra[p+"p99"] = percentile(res.samples, 99)
			extra[p+"max"] = percentile(res.samples, 100)
			extra[p+"cpuMs"] = rcpu
			extra[p+"idleRSS"] = float64(idle[i].RSSBytes)
			extra[p+"connectedRSS"] = float64(connected[i].RSSBytes)
			extra[p+"rssPerClientKiB"] = perClient
			if m := memory[i]; m != nil {
				extra[p+"heapInuse"], extra[p+"stackInuse"], extra[p+"goroutines"] = m["go_memstats_heap_inuse_bytes"], m["go_memstats_stack_inuse_bytes"], m["go_goroutines"]
			}
			perReplica = append(perReplica, fmt.Sprintf("%s (%d clients, %d streams): p50 %.1f, p99 %.1f, all %.1f ms, %.0f ms CPU, RSS %d → %d MiB, %.1f KiB per client",
				r.id, onReplica(i), streams[i], extra[p+"p50"], extra[p+"p99"], extra[p+"max"], rcpu, idle[i].RSSBytes>>20, connected[i].RSSBytes>>20, perClient))
		}
		rec := runRecord{Scenario: "fanout-replicas", Peer: "lbplane", API: apiName(sotw), Conns: n, Samples: all.samples, Valid: cnote == "", Note: cnote,
			P50: percentile(all.samples, 50), P99: percentile(all.samples, 99), P999: percentile(all.samples, 100), LbplaneRSS: rssAll,
			LbplaneCPUPerChangeMs: cpuMs, Extra: extra}
		record(rec)
		fmt.Fprintf(os.Stderr, "fan-out %d simulated %s Envoys over %d replicas on etcd, change %d through %s: complete p50 %.1f ms, p99 %.1f ms, all %.1f ms (push answered after %.1f ms; %d of %d got it); lbplane %.0f ms CPU in all %s\n  %s\n",
			n, rec.API, R, c+1, reps[via].id, rec.P50, rec.P99, rec.P999, acceptedMs, len(all.samples), readyN, cpuMs, cnote, strings.Join(perReplica, "\n  "))
	}
	return nil
}

var runnerStart = time.Now()

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fanoutReplicasMarkdown is the report's part for the fan-out across replicas.
func (r *report) fanoutReplicasMarkdown(w func(string, ...any)) {
	var runs []runRecord
	for _, run := range r.Runs {
		if run.Scenario == "fanout-replicas" {
			runs = append(runs, run)
		}
	}
	if len(runs) == 0 {
		return
	}
	w("\n## Fan-out across lbplane replicas on etcd\n\nReplicas of `lbplane serve --store etcd` on one one-member etcd (on loopback), each fresh with only the probe policy; simulated ADS clients (as in the fan-out row; delta, or state of the world asking as an Envoy does) in the runner's process, or spread over child processes of it when a run's `swarmProcs` is more than 1 (each holding fewer sockets than the open-file limit), client i on replica i mod N. The first change is pushed once every client has its first config and every replica's CPU has gone quiet (under 10%% of a core for 1 s). Each change of the probe policy is pushed through one replica in turn and timed from the push sent until every client, on every replica, has all of it (the pushing replica writes it to etcd; every replica loads it from its watch of etcd). RSS per client: (a replica's RSS with its clients connected − before the first) / its clients.\n\n")
	w("| clients | xDS | replicas | change (through) | connect s | p50 ms | p99 ms | all ms | got it | per replica p50 / p99 / all ms | lbplane CPU ms for the change | RSS per client KiB, per replica | valid |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range runs {
		x := c.Extra
		var per, rss []string
		for i := range int(x["replicas"]) {
			p := fmt.Sprintf("r%d:", i)
			per = append(per, fmt.Sprintf("r%d %.0f / %.0f / %.0f", i, x[p+"p50"], x[p+"p99"], x[p+"max"]))
			rss = append(rss, fmt.Sprintf("r%d %.1f", i, x[p+"rssPerClientKiB"]))
		}
		w("| %d | %s | %.0f | %.0f (r%.0f) | %.1f | %.1f | %.1f | %.1f | %.0f of %.0f | %s | %.0f | %s | %v %s |\n", c.Conns, cmp.Or(c.API, "delta"), x["replicas"], x["change"], x["via"], x["connectSeconds"],
			c.P50, c.P99, c.P999, x["got"], x["ready"], strings.Join(per, "; "), c.LbplaneCPUPerChangeMs, strings.Join(rss, "; "), c.Valid, c.Note)
	}
}
