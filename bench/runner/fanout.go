package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lbplane/lbplane/controlplane/pushapi"
)

// fanoutBase is the fan-out row's first port (xDS, API, metrics and pprof); it moves with -cp-port-offset.
func fanoutBase() int { return cpBase + 960 }

var (
	fanoutPin  = flag.Bool("fanout-pin", true, "fan-out row: run lbplane on the last CPU and the simulated clients on the others (taskset), so that lbplane's time is its own")
	fanoutGRPC = flag.Bool("fanout-grpc-clients", false, "fan-out row: simulated clients on grpc-go (the row before 2026-11-23 22:00) instead of bare HTTP/2 connections (h2Client)")
	fanoutAll  = flag.Bool("fanout-all-types", true, "fan-out row: the simulated clients subscribe to clusters, endpoints, listeners and routes on one ADS stream, as an Envoy does (false: clusters only, the row before 2026-11-23 evening)")
	fanoutAPI  = flag.String("fanout-api", "delta", "fan-out row: the simulated clients' xDS, delta (DeltaAggregatedResources) or sotw (StreamAggregatedResources: clusters and listeners by wildcard, endpoints and routes by the names those name, as an Envoy asks)")
)

// fanOut is the fan-out row on its own: for each client count a fresh lbplane with only the probe policy,
// its RSS with no client, then n simulated delta clients (fanoutClient, each its own gRPC connection), its
// RSS with all of them connected and acknowledged, and one change of the probe policy (its cluster and
// its endpoints) timed from the push sent until every client has all of it. lbplane's heap is profiled
// with every client connected, and its CPU while the change spreads.
func fanOut(ctx context.Context, e *env, counts []int, out string, record func(runRecord)) error {
	for _, n := range counts {
		if err := fanOutOnce(ctx, e, n, out, record); err != nil {
			return err
		}
	}
	return nil
}

// fanoutTypes are what the simulated clients subscribe to, in the order an Envoy asks for them.
func fanoutTypes() []string {
	if *fanoutAll {
		return []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}
	}
	return []string{resource.ClusterType}
}

// pinning splits the CPUs between lbplane (the last one) and this process (the others). On one CPU there
// is nothing to split.
type pinning struct {
	taskset      string
	lbplane, own string
	all          string
}

func pinCPUs() (*pinning, error) {
	n := runtime.NumCPU()
	if !*fanoutPin || n < 2 {
		return nil, nil
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return nil, fmt.Errorf("taskset (util-linux) keeps lbplane and the simulated clients on different CPUs: apt-get install util-linux, or -fanout-pin=false")
	}
	return &pinning{taskset: ts, lbplane: strconv.Itoa(n - 1), own: fmt.Sprintf("0-%d", n-2), all: fmt.Sprintf("0-%d", n-1)}, nil
}

// self moves every thread of this process to cpus (threads started later inherit it).
func (p *pinning) self(cpus string) error {
	if p == nil {
		return nil
	}
	out, err := exec.Command(p.taskset, "-a", "-p", "-c", cpus, strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset: %v: %s", err, out)
	}
	return nil
}

// clientState is what one simulated client has seen, written by its goroutine and read by the row.
type clientState struct {
	seen   atomic.Uint32 // bit per type index: had a response with resources
	ready  atomic.Bool
	first  atomic.Int64 // ns since the change of the first response after it; 0: none yet
	last   atomic.Int64 // ns since the change of the last response after it
	count  atomic.Int32 // responses after the change
	byType [4]atomic.Int32
	// readyAt: unix ns when it had a response of every type; on: the index in addrs of the server it is
	// connected to, -1 between connections.
	readyAt atomic.Int64
	on      atomic.Int32
	// tracks are what it acknowledged, one for each version book the swarm tells (swarmOptions.books,
	// fanout_versions.go); gone: the row ended it; cancel ends this client alone.
	tracks []*clientTrack
	gone   atomic.Bool
	cancel context.CancelFunc
}

func fanOutOnce(ctx context.Context, e *env, n int, out string, record func(runRecord)) error {
	sotw, err := swarmAPI(*fanoutAPI)
	if err != nil {
		return fmt.Errorf("-fanout-api: %w", err)
	}
	dir := filepath.Join(e.dir, fmt.Sprintf("fanout-%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := fanoutBase()
	xds, apiAddr := fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1)
	pprofPort := base + 2
	args := append(serveArgs(dir, xds, apiAddr, "--xds-max-connections", "-1"), pprofArgs(pprofPort)...)
	pin, err := pinCPUs()
	if err != nil {
		return err
	}
	bin := filepath.Join(e.bin, "lbplane")
	if pin != nil {
		args = append([]string{"-c", pin.lbplane, bin}, args...)
		bin = pin.taskset
	}
	// taskset execs lbplane in its own process: the PID read below is lbplane's.
	lb, err := start(dir, "lbplane", nil, bin, args...)
	if err != nil {
		return err
	}
	defer lb.stop()
	if err := waitPort(apiAddr, 60*time.Second); err != nil {
		return err
	}
	if err := pin.self(pinOwn(pin)); err != nil {
		return err
	}
	defer pin.self(pinAll(pin))
	if pin != nil {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.NumCPU() - 1))
	}
	c := &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: time.Minute}}
	if _, err := c.Apply(ctx, probe("28091", 1), false); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the first publish settles; idle is lbplane with its config and no client
	idle := treeUsage(lb.cmd.Process.Pid)

	sw, err := startFanoutSwarm(ctx, []string{xds}, n, swarmOptions{sotw: sotw})
	if err != nil {
		return err
	}
	defer sw.stop()
	types := sw.types
	readyN, connectTook := sw.waitReady(5 * time.Minute)
	streams := -1
	if ps, err := c.Proxies(ctx); err == nil {
		streams = len(ps)
	}
	note := ""
	if readyN < n {
		note = fmt.Sprintf("%d of %d simulated Envoys got a first config within 5 minutes (lbplane holds %d streams); the change is timed to those", readyN, n, streams)
		fmt.Fprintln(os.Stderr, "fan-out: "+note)
	}
	settleTook, settled := waitSettled([]int{lb.cmd.Process.Pid})
	if !settled {
		note += fmt.Sprintf("; lbplane was still busy %s after the clients connected", settleTook.Round(time.Second))
	}
	connected := treeUsage(lb.cmd.Process.Pid)
	heapTop := profile(pprofPort, 0, out, fmt.Sprintf("fanout-%d-heap", n))
	var cpuTop string
	profDone := make(chan struct{})
	go func() { defer close(profDone); cpuTop = profile(pprofPort, 15, out, fmt.Sprintf("fanout-%d-cpu", n)) }()
	time.Sleep(500 * time.Millisecond) // the CPU profile has started
	before := treeUsage(lb.cmd.Process.Pid)
	ioBefore := syscallCounts(lb.cmd.Process.Pid)
	runnerBefore := ownCPU()
	sw.startChange()
	if _, err := c.Apply(ctx, probe("28091", 7), false); err != nil {
		return err
	}
	// The push API answers once the change is translated and published (its first responses queued):
	// what comes after is distribution alone.
	acceptedMs := float64(time.Now().UnixNano()-sw.changeAt.Load()) / 1e6
	sw.waitChange()
	after := treeUsage(lb.cmd.Process.Pid)
	ioAfter := syscallCounts(lb.cmd.Process.Pid)
	runnerCPU := ownCPU() - runnerBefore
	res := sw.result(-1)
	samples, firsts, counts, perType := res.samples, res.firsts, res.counts, res.perType
	if e := sw.lostAfter.Load(); e > 0 {
		note += fmt.Sprintf("; %d simulated Envoys lost their connection after the change", e)
	}
	if len(samples) < readyN {
		note += fmt.Sprintf("; only %d of %d simulated Envoys got the change within 2 minutes", len(samples), readyN)
	}
	<-profDone
	perClient := float64(connected.RSSBytes-idle.RSSBytes) / float64(n) / 1024
	cpuMs := (after.CPUSeconds - before.CPUSeconds) * 1000
	extra := map[string]float64{"idleRSS": float64(idle.RSSBytes), "rssPerClientKiB": perClient, "connectSeconds": connectTook.Seconds(),
		"got": float64(len(samples)), "ready": float64(readyN), "settleSeconds": settleTook.Seconds(), "streams": float64(streams), "runnerGoroutines": float64(runtime.NumGoroutine()),
		"firstP50": percentile(firsts, 50), "firstAll": percentile(firsts, 100), "pinned": b2f(pin != nil), "grpcClients": b2f(*fanoutGRPC), "types": float64(len(types)),
		"lbplaneCPUPerClientUs": cpuMs * 1000 / float64(max(len(samples), 1)),
		"acceptedMs":            acceptedMs,
		"connectionsLost":       float64(sw.connectionsLost()),
		// The simulated clients' own CPU over the change (with the runner's small share): whether they
		// or lbplane bound the row's wall time.
		"runnerCPUPerClientUs":   runnerCPU.Seconds() * 1e6 / float64(max(len(samples), 1)),
		"readSyscallsPerClient":  float64(ioAfter[0]-ioBefore[0]) / float64(max(len(samples), 1)),
		"writeSyscallsPerClient": float64(ioAfter[1]-ioBefore[1]) / float64(max(len(samples), 1))}
	var total int64
	for t, typ := range types {
		extra["responses:"+typ] = float64(perType[t]) / float64(max(len(samples), 1))
		total += perType[t]
	}
	extra["responsesPerClient"] = float64(total) / float64(max(len(samples), 1))
	var distinct []int32
	for k := range counts {
		distinct = append(distinct, k)
	}
	slices.Sort(distinct)
	countsText := ""
	for _, k := range distinct {
		countsText += fmt.Sprintf(" %d responses: %d clients;", k, counts[k])
		extra[fmt.Sprintf("clientsWith%dResponses", k)] = float64(counts[k])
	}
	rec := runRecord{Scenario: "fanout", Peer: "lbplane", API: apiName(sotw), Conns: n, Samples: samples, Valid: note == "", Note: note,
		P50: percentile(samples, 50), P99: percentile(samples, 99), P999: percentile(samples, 100), LbplaneRSS: connected.RSSBytes,
		LbplaneCPUPerChangeMs: cpuMs, Extra: extra}
	record(rec)
	fmt.Fprintf(os.Stderr, "fan-out %d simulated %s Envoys (%d types, pinned %v, connected in %.1f s): change complete p50 %.1f ms, p99 %.1f ms, all %.1f ms (push answered after %.1f ms; first response p50 %.1f, all %.1f; %d got it;%s %.2f responses per client); lbplane %.0f ms CPU for the change (%.0f µs, %.2f reads and %.2f writes per client; the clients %.0f µs each); RSS %d MiB idle, %d MiB connected: %.1f KiB per client %s\n%s\n%s\n",
		n, rec.API, len(types), pin != nil, connectTook.Seconds(), rec.P50, rec.P99, rec.P999, acceptedMs, extra["firstP50"], extra["firstAll"], len(samples), countsText, extra["responsesPerClient"],
		cpuMs, extra["lbplaneCPUPerClientUs"], extra["readSyscallsPerClient"], extra["writeSyscallsPerClient"], extra["runnerCPUPerClientUs"], idle.RSSBytes>>20, connected.RSSBytes>>20, perClient, note, heapTop, cpuTop)
	return nil
}

func pinOwn(p *pinning) string {
	if p == nil {
		return ""
	}
	return p.own
}

func pinAll(p *pinning) string {
	if p == nil {
		return ""
	}
	return p.all
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// fanoutClient is one simulated Envoy on one delta ADS stream: it subscribes to every resource of each of
// types (as an Envoy's wildcard CDS and LDS, and here EDS and RDS too: one probe policy's worth), and
// acknowledges every response. got is called with the index in types of each response that carries
// resources or removals.
func fanoutClient(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, types []string, got func(typ int)) {
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return
	}
	for i, typ := range types {
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}}
		if i == 0 {
			req.Node = node
		}
		if err := stream.Send(req); err != nil {
			return
		}
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		if len(resp.GetResources()) > 0 || len(resp.GetRemovedResources()) > 0 {
			if i := slices.Index(types, resp.GetTypeUrl()); i >= 0 {
				got(i)
			}
		}
		if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
			return
		}
	}
}

// Settling after the clients connect: the change is pushed once lbplane has finished with the connects
// (their last responses, their garbage), read from its CPU time, not after a fixed pause.
const (
	fanoutSettleWindow = 500 * time.Millisecond
	fanoutSettleShare  = 0.10 // of one core, in each of fanoutSettleQuiet windows in a row
	fanoutSettleQuiet  = 2
	fanoutSettleLimit  = time.Minute
)

// waitSettled waits until every process of pids has used less than fanoutSettleShare of a core in each of
// fanoutSettleQuiet windows in a row, for at most fanoutSettleLimit; it returns how long that took and whether they
// settled.
func waitSettled(pids []int) (time.Duration, bool) {
	start := time.Now()
	quiet := 0
	prev := make([]float64, len(pids))
	for i, pid := range pids {
		prev[i] = treeUsage(pid).CPUSeconds
	}
	for time.Since(start) < fanoutSettleLimit {
		time.Sleep(fanoutSettleWindow)
		busy := false
		for i, pid := range pids {
			now := treeUsage(pid).CPUSeconds
			busy = busy || now-prev[i] >= fanoutSettleShare*fanoutSettleWindow.Seconds()
			prev[i] = now
		}
		if quiet++; busy {
			quiet = 0
		}
		if quiet >= fanoutSettleQuiet {
			return time.Since(start), true
		}
	}
	return time.Since(start), false
}

// pollFor calls f every interval until it returns true (true) or d has passed (false).
func pollFor(d, every time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// syscallCounts reads a process's read and write system calls so far (syscr, syscw of /proc/PID/io: every
// read- and write-like call, on sockets too); zeros when unreadable.
func syscallCounts(pid int) [2]int64 {
	var out [2]int64
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscr":
			out[0] = n
		case "syscw":
			out[1] = n
		}
	}
	return out
}

// ownFaults is this process's minor page faults so far (memory touched for the first time).
func ownFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// ownCPU is this process's user and system CPU time so far.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fanoutSwarm is simulated clients (h2Client, or fanoutClient with -fanout-grpc-clients), client i
// connected to addrs[i % len(addrs)] (one lbplane, or each of several replicas in turn; i is the row's
// index, swarmOptions.rows, in a child process's share of the clients) or, with
// swarmOptions.random, to one of them at random each time it connects. A connection lost before the first
// timed change is made again after a pause, as grpc-go's client (and an Envoy) would: on a loaded machine
// some of 10,000 connects fail; one the server ended (its maximum age) at once. One lost after the change
// counts (lostAfter) and ends the client, unless swarmOptions.rejoin.
type fanoutSwarm struct {
	addrs []string
	types []string
	opt   swarmOptions
	ctx   context.Context

	mu     sync.Mutex
	states []*clientState // every client made, in order (clients that left included)

	changeAt   atomic.Int64 // unix ns of the change being timed; 0 before the first
	readyCount atomic.Int64
	started    time.Time
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	conns      []*grpc.ClientConn
	// clientErrors: connections that failed (and were made again); reconnects: connections the server
	// ended (and were made again); lostAfter: either, after a change (without rejoin).
	clientErrors, reconnects, lostAfter atomic.Int64
	readyN                              int
}

// swarmOptions are what a row asks of its simulated clients beyond what the fan-out rows' have.
type swarmOptions struct {
	// sotw: state-of-the-world ADS (StreamAggregatedResources) instead of delta.
	sotw bool
	// random: each connection goes to one of addrs at random, as a client behind a Kubernetes Service's
	// address would, instead of always the same one.
	random bool
	// rejoin: a client never gives up, before the first timed change or after it: a connection the server
	// ended is made again at once, one that failed after a pause.
	rejoin bool
	// books, when set, are told every version each client acknowledges (fanout_versions.go): lbplane's
	// config version, or with clusters, book p the connect timeout of cluster clusters[p] (policyBooks).
	books    []*versionBook
	clusters []string
	// rows, when set, are the row's indexes of the swarm's clients (a child process's share of them,
	// fanout_procs.go): client i is the row's client rows[i], with that one's node ID and address.
	rows []int
}

// swarmAPI is the -…-api flags' value as options: delta or sotw.
func swarmAPI(api string) (bool, error) {
	switch api {
	case "delta":
		return false, nil
	case "sotw":
		return true, nil
	}
	return false, fmt.Errorf("xDS API %q: want delta or sotw", api)
}

func apiName(sotw bool) string {
	if sotw {
		return "sotw"
	}
	return "delta"
}

func startFanoutSwarm(ctx context.Context, addrs []string, n int, opt swarmOptions) (*fanoutSwarm, error) {
	if *fanoutGRPC && (opt.sotw || opt.random || opt.rejoin || opt.books != nil) {
		return nil, fmt.Errorf("-fanout-grpc-clients: the grpc-go clients are delta clients of the fan-out rows only")
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &fanoutSwarm{addrs: addrs, types: fanoutTypes(), opt: opt, ctx: sctx, started: time.Now(), cancel: cancel}
	for range n {
		if err := s.add(); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

// add starts one more client.
func (s *fanoutSwarm) add() error {
	cctx, cancel := context.WithCancel(s.ctx)
	st := &clientState{cancel: cancel}
	st.on.Store(-1)
	for _, b := range s.opt.books {
		st.tracks = append(st.tracks, b.newTrack())
	}
	s.mu.Lock()
	i := len(s.states)
	s.states = append(s.states, st)
	s.mu.Unlock()
	node := &corev3.Node{Id: fmt.Sprintf("sim-%d", s.row(i)), Cluster: "default"}
	types := s.types
	onResponse := func(typ int, version string, changed bool) {
		if s.opt.clusters == nil && version != "" {
			for _, t := range st.tracks {
				t.acked(version)
			}
		}
		if !changed {
			return
		}
		if at := s.changeAt.Load(); at != 0 {
			d := time.Now().UnixNano() - at
			st.first.CompareAndSwap(0, d)
			st.last.Store(d)
			st.count.Add(1)
			st.byType[typ].Add(1)
			return
		}
		if seen := st.seen.Or(1<<typ) | 1<<typ; seen == 1<<len(types)-1 && !st.ready.Swap(true) {
			st.readyAt.Store(time.Now().UnixNano())
			s.readyCount.Add(1)
		}
	}
	if *fanoutGRPC {
		// Static flow-control windows, as an Envoy has: grpc-go's default BDP estimation would send lbplane a
		// PING with every response it reads, which lbplane must answer, and no Envoy does that.
		conn, err := grpc.NewClient(s.addrs[s.row(i)%len(s.addrs)], grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStaticStreamWindowSize(1<<20), grpc.WithStaticConnWindowSize(1<<20))
		if err != nil {
			return err
		}
		s.conns = append(s.conns, conn)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			fanoutClient(cctx, conn, node, types, func(typ int) { onResponse(typ, "", true) })
		}()
		return nil
	}
	c := newH2Client(node, types, s.opt.sotw, onResponse)
	if clusters := s.opt.clusters; clusters != nil {
		c.cluster = func(name string, connectTimeout int64) {
			if p := slices.Index(clusters, name); p >= 0 && p < len(st.tracks) {
				st.tracks[p].acked(strconv.FormatInt(connectTimeout, 10))
			}
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			for _, t := range st.tracks {
				t.exited.Store(true)
			}
		}()
		for pause := 100 * time.Millisecond; ; {
			a := s.pick(i)
			st.on.Store(int32(a))
			err := c.run(cctx, s.addrs[a])
			st.on.Store(-1)
			if cctx.Err() != nil {
				return
			}
			ended := errors.Is(err, errServerEnded)
			if ended {
				s.reconnects.Add(1)
			} else if n := s.clientErrors.Add(1); n <= 3 {
				fmt.Fprintf(os.Stderr, "fan-out: simulated Envoy %s: %v\n", node.Id, err)
			}
			if !s.opt.rejoin && s.changeAt.Load() != 0 {
				s.lostAfter.Add(1)
				return
			}
			// A stream the server ended after serving it (its maximum age) is made again at once, as an Envoy
			// does; a connection that failed, or ended before its first response, after a pause.
			if ended && c.responses > 0 {
				pause = 100 * time.Millisecond
				continue
			}
			select {
			case <-cctx.Done():
				return
			case <-time.After(pause/2 + rand.N(pause/2)):
			}
			pause = min(2*pause, 5*time.Second)
		}
	}()
	return nil
}

// pick is the index in addrs of client i's next connection.
func (s *fanoutSwarm) pick(i int) int {
	if s.opt.random {
		return rand.IntN(len(s.addrs))
	}
	return s.row(i) % len(s.addrs)
}

// row is the row's index of client i: i itself, unless the swarm is a share of the row's clients
// (swarmOptions.rows).
func (s *fanoutSwarm) row(i int) int {
	if i < len(s.opt.rows) {
		return s.opt.rows[i]
	}
	return i
}

// all is every client made so far.
func (s *fanoutSwarm) all() []*clientState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.states
}

// leave ends a client, as an Envoy that goes away.
func (s *fanoutSwarm) leave(st *clientState) {
	st.gone.Store(true)
	for _, t := range st.tracks {
		t.left.Store(true)
	}
	st.cancel()
}

// connectedOn counts the clients connected to each of addrs now, as the clients see it.
func (s *fanoutSwarm) connectedOn() []int {
	out := make([]int, len(s.addrs))
	for _, st := range s.all() {
		if a := st.on.Load(); a >= 0 {
			out[a]++
		}
	}
	return out
}

// connectionsLost is every connection lost and made again, for whatever reason.
func (s *fanoutSwarm) connectionsLost() int64 { return s.clientErrors.Load() + s.reconnects.Load() }

func (s *fanoutSwarm) stop() {
	s.cancel()
	s.wg.Wait()
	for _, c := range s.conns {
		c.Close()
	}
}

// waitReady waits until every client made so far has its first config, for at most limit (a run with
// 10,000 on a loaded machine had some that never got one: they are counted and left out), and returns how
// many have it and how long after the clients were started the last of them had it (the limit when some
// never did).
func (s *fanoutSwarm) waitReady(limit time.Duration) (int, time.Duration) {
	want := int64(len(s.all()))
	deadline := time.Now().Add(limit)
	for s.readyCount.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	s.readyN = int(s.readyCount.Load())
	if int64(s.readyN) < want {
		return s.readyN, time.Since(s.started)
	}
	var last int64
	for _, st := range s.all() {
		last = max(last, st.readyAt.Load())
	}
	return s.readyN, time.Unix(0, last).Sub(s.started)
}

// startChange starts timing a change: what each client receives from now on counts toward it (and no
// longer toward an earlier one). Call it just before the push.
func (s *fanoutSwarm) startChange() {
	for _, st := range s.all() {
		st.first.Store(0)
		st.last.Store(0)
		st.count.Store(0)
		for t := range st.byType {
			st.byType[t].Store(0)
		}
	}
	s.changeAt.Store(time.Now().UnixNano())
}

// waitChange waits until the change is complete: every ready client has had a response for it and none
// came for quiet (make-before-break may send it in steps, each after the previous one is acknowledged),
// for at most 2 minutes.
func (s *fanoutSwarm) waitChange() {
	const quiet = 3 * time.Second
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		got, lastAny := 0, int64(0)
		for _, st := range s.all() {
			if st.ready.Load() && st.count.Load() > 0 {
				got++
			}
			lastAny = max(lastAny, st.last.Load())
		}
		if got >= s.readyN && time.Since(time.Unix(0, s.changeAt.Load()+lastAny)) >= quiet {
			return
		}
	}
}

// fanoutResult is what the ready clients of one change saw: when the change was complete at each (ms
// after the push was sent), when its first response came, how many clients had how many responses, and
// the responses by type.
type fanoutResult struct {
	samples, firsts []float64
	counts          map[int32]int
	perType         [4]int64
}

// result is the change's result over the clients of address index replica (all when -1).
// It is what a child process of the swarm reports (swarmChanged), read as the parent reads the children's.
func (s *fanoutSwarm) result(replica int) fanoutResult {
	return mergeSwarmResults([][]swarmClient{swarmChanged(s)}, s.changeAt.Load(), len(s.addrs), replica)
}
