// Command runner runs lbplane's benchmarks: the data plane (lbplane's Envoy against direct, a hand-tuned
// static Envoy, nginx, HAProxy and Traefik, all on loopback with one worker each) and the control plane
// (propagation time and cost as the number of policies grows). It writes raw JSON per run, a summary, a
// REPORT.md and PNG plots into one results directory. make bench and make bench-quick run it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var repoRoot string

// config is one benchmark plan; quick is the reduced set.
type config struct {
	Quick       bool          `json:"quick"`
	Reps        int           `json:"reps"`
	Concurrency []int         `json:"concurrency"`
	WrkDuration time.Duration `json:"wrkDuration"`
	L4Conns     int           `json:"l4Connections"`
	K6Rate      int           `json:"k6Rate"`
	K6VUs       int           `json:"k6VUs"`
	K6Duration  time.Duration `json:"k6Duration"`
	// CrossConns is the closed loop at which wrk and k6 are set side by side.
	CrossConns    int           `json:"crossCheckConnections"`
	CrossDuration time.Duration `json:"crossCheckDuration"`
	PolicyCounts  []int         `json:"policyCounts"`
	// KubePolicyCounts are the sizes for policies written to a real kube-apiserver (none: not run);
	// KubeAPIs the xDS variants for them.
	KubePolicyCounts []int    `json:"kubePolicyCounts"`
	KubeAPIs         []string `json:"kubeApis"`
	// EtcdPolicyCounts are the sizes for the push rows with lbplane serve --store etcd (a one-member etcd
	// on loopback; none: not run, the default).
	EtcdPolicyCounts []int `json:"etcdPolicyCounts,omitempty"`
	Changes          int   `json:"changes"`
	// APIs are the xDS variants of the push runs; ColdStart restarts lbplane with the most policies pushed
	// and times an Envoy's first full config.
	APIs      []string `json:"apis,omitempty"`
	ColdStart bool     `json:"coldStart,omitempty"`
	Swarm     int      `json:"simulatedEnvoys"`
	// Incremental: the endpoint-churn, cold-start and fan-out rows of issue 16 (incremental.go).
	Incremental incrementalPlan `json:"incremental,omitzero"`
	// ProfileDir, when set, gets a CPU profile of lbplane (its --pprof endpoint) over each push row's
	// timed changes, so that a missed target can name what bounds it.
	ProfileDir string `json:"-"`
	// HTTPS: the suites, connections and length of each wrk run.
	TLSSuites     []tlsSuite    `json:"tlsSuites"`
	HTTPSConns    int           `json:"httpsConnections"`
	HTTPSDuration time.Duration `json:"httpsDuration"`
	HTTPSPeers    []string      `json:"httpsPeers,omitempty"` // all with an HTTPS listener when empty
	// Hash persistence: clients, and requests from each.
	HashClients  int `json:"hashClients"`
	HashRequests int `json:"hashRequestsPerClient"`
	// Health: variants, how long the backend stays dead in each, the load's rate, and the peers (all when
	// empty).
	HealthVariants []string                 `json:"healthVariants"`
	HealthDown     map[string]time.Duration `json:"healthDown"`
	HealthRate     int                      `json:"healthRate"`
	HealthPeers    []string                 `json:"healthPeers,omitempty"`
	// WebSockets: connections to hold open through each peer (at most the open-file limit allows), and the
	// peers (all when empty).
	WSConns int      `json:"webSocketConnections"`
	WSPeers []string `json:"webSocketPeers,omitempty"`
	// WSL4 adds the WebSockets through each peer's TCP listener (kind websocket-l4).
	WSL4 bool `json:"webSocketL4,omitempty"`
	// Memory at a load: the connection counts, each in a fresh peer process, and the length of each run.
	MemConcurrency []int         `json:"memoryConcurrency"`
	MemDuration    time.Duration `json:"memoryDuration"`
	MemPeers       []string      `json:"memoryPeers,omitempty"` // all when empty
	// Bounded-load hashing (hotkey): requests per run, closed-loop workers, keys, the hot key's share of the
	// requests, the backends' delay, the balance factors beside none, lbplane's algorithms and repetitions.
	HotKeyRequests   int           `json:"hotKeyRequests"`
	HotKeyWorkers    int           `json:"hotKeyWorkers"`
	HotKeyKeys       int           `json:"hotKeyKeys"`
	HotKeyShare      float64       `json:"hotKeyShare"`
	HotKeyDelay      time.Duration `json:"hotKeyBackendDelay"`
	HotKeyFactors    []int         `json:"hotKeyFactors"`
	HotKeyAlgorithms []string      `json:"hotKeyAlgorithms"`
	HotKeyReps       int           `json:"hotKeyReps"`
	// Peers, when set, limits the data plane runs to these peers.
	Peers []string `json:"peers,omitempty"`
}

// runs tells whether a scenario whose own peer list is scenarioPeers (all when empty) runs peer, given -peers.
func (c config) runs(scenarioPeers []string, peer string) bool {
	return (len(scenarioPeers) == 0 || slices.Contains(scenarioPeers, peer)) && (len(c.Peers) == 0 || slices.Contains(c.Peers, peer))
}

func plan(quick bool) config {
	if quick {
		return config{Quick: true, Reps: 2, Concurrency: []int{100, 1000}, WrkDuration: 2 * time.Second, L4Conns: 100,
			K6Rate: 2000, K6VUs: 100, K6Duration: 3 * time.Second, CrossConns: 1, CrossDuration: 2 * time.Second, PolicyCounts: []int{10, 1000}, Changes: 20, Swarm: 100,
			TLSSuites: tlsSuites[2:], HTTPSConns: 100, HTTPSDuration: 2 * time.Second, HTTPSPeers: []string{"lbplane-envoy", "static-envoy", "haproxy"},
			HashClients: 200, HashRequests: 20, KubePolicyCounts: []int{10}, KubeAPIs: []string{"delta"},
			HealthVariants: []string{"equal"}, HealthDown: map[string]time.Duration{"equal": 5 * time.Second}, HealthRate: 200,
			HealthPeers: []string{"lbplane-envoy", "haproxy"},
			WSConns:     2000, WSPeers: []string{"lbplane-envoy", "nginx"},
			MemConcurrency: []int{1000}, MemDuration: 3 * time.Second, MemPeers: []string{"lbplane-envoy", "nginx"},
			HotKeyRequests: 4000, HotKeyWorkers: 32, HotKeyKeys: 1000, HotKeyShare: 0.3, HotKeyDelay: 20 * time.Millisecond,
			HotKeyFactors: []int{150}, HotKeyAlgorithms: []string{"RingHash"}, HotKeyReps: 1}
	}
	// 9,000 rather than 10,000 connections at the top: through a proxy each is two descriptors (client and
	// upstream side), and these machines' hard open-file limit is 20,000, which lbplane cannot raise.
	return config{Reps: 3, Concurrency: []int{100, 500, 1000, 5000, 9000}, WrkDuration: 8 * time.Second, L4Conns: 100,
		K6Rate: 4000, K6VUs: 200, K6Duration: 15 * time.Second, CrossConns: 1, CrossDuration: 8 * time.Second, PolicyCounts: []int{10, 100, 1000, 10000}, Changes: 200, Swarm: 1000,
		TLSSuites: tlsSuites, HTTPSConns: 100, HTTPSDuration: 4 * time.Second,
		HashClients: 1000, HashRequests: 100, KubePolicyCounts: []int{10, 100, 1000, 10000}, KubeAPIs: []string{"delta", "sotw"},
		// Traefik checks every 30s by default: the backend stays dead long enough for every default to see it.
		HealthVariants: []string{"default", "equal"}, HealthDown: map[string]time.Duration{"default": 35 * time.Second, "equal": 8 * time.Second}, HealthRate: 200,
		// 50,000 is the aim; the open-file limit caps it (the runner says so in the report).
		WSConns:        50000,
		MemConcurrency: []int{100, 1000, 5000}, MemDuration: 5 * time.Second,
		// 30 % of the requests on one key among 1,000 others: without a bound its backend serves about 44 %
		// of them (2.2 times the mean of five).
		HotKeyRequests: 10000, HotKeyWorkers: 32, HotKeyKeys: 1000, HotKeyShare: 0.3, HotKeyDelay: 20 * time.Millisecond,
		HotKeyFactors: []int{125, 150}, HotKeyAlgorithms: []string{"RingHash", "Maglev"}, HotKeyReps: 2}
}

func main() {
	// A child process of the fan-out across replicas' simulated clients (fanout_procs.go) is that alone.
	if len(os.Args) > 1 && os.Args[1] == swarmChildArg {
		os.Exit(swarmChild(os.Args[2:]))
	}
	quick := flag.Bool("quick", false, "the reduced set (about 5 minutes)")
	out := flag.String("out", "", "results directory (default bench/results/<date>-<host>[-quick])")
	only := flag.String("only", "", "comma-separated scenarios to run: dataplane, https, k6, paired (two peers loaded at once, CPU per request), memory, hash, hotkey, health, websocket, controlplane (default all); opt-in: stats (does reading Envoy's stats hold back config: -stats-policies, -stats-changes), gateway-routes (Gateway API HTTPRoutes: a new route's first 200 among -gateway-routes N, requests while routes change, memory at -gateway-routes-memory M), rollout (a bad change through three Envoys with and without a staged rollout: -rollout-*), and the incremental rows")
	peerList := flag.String("peers", "", "comma-separated peers to run in every scenario (default all), for a focused comparison")
	reps := flag.Int("reps", 0, "repetitions (default 3)")
	conc := flag.String("concurrency", "", "comma-separated connection counts for the throughput runs")
	dur := flag.Duration("duration", 0, "length of each wrk run")
	again := flag.String("report", "", "write REPORT.md and the plots of this results directory again from its JSON, running nothing")
	keep := flag.Bool("keep", false, "keep the work directory (rendered configs, every process's log) and print its path")
	flag.IntVar(&portOffset, "port-offset", 0, "added to the fixed ports of the peers and backends (not the control-plane rows'), to run beside another runner on the same machine")
	wsL4 := flag.Bool("ws-l4", false, "also hold the WebSockets through each peer's TCP (L4) listener, where it has one")
	wsConns := flag.Int("ws-conns", 0, "connections to hold open per peer in the WebSocket and idle keep-alive runs (default 50,000, capped by the open-file limit; 2,000 with -quick)")
	envoyRuntime := flag.String("envoy-runtime", "", "comma-separated key=value runtime settings applied to lbplane's Envoys through admin after start (experiments)")
	envoyArgs := flag.String("envoy-args", "", "space-separated extra command-line arguments for lbplane's Envoys (experiments)")
	envoyEnv := flag.String("envoy-env", "", "comma-separated KEY=VALUE environment for lbplane's Envoys (experiments, e.g. tcmalloc settings)")
	heapDumps := flag.String("envoy-heap-dumps", "", "directory for the Envoys' heap profiles (admin /heap_dump) with every WebSocket or idle connection open")
	memConc := flag.String("mem-concurrency", "", "comma-separated connection counts for the memory-at-load runs, each in a fresh peer process")
	policyCounts := flag.String("policies", "", "comma-separated policy counts of the push propagation runs")
	kubeCounts := flag.String("kube-policies", "", "comma-separated policy counts of the Kubernetes propagation runs (\"none\": not run)")
	etcdCounts := flag.String("etcd-policies", "", "comma-separated policy counts of the push propagation runs with the etcd store (lbplane serve --store etcd, a one-member etcd on loopback; opt-in: not run by default), delta xDS, beside the bbolt rows")
	apis := flag.String("apis", "", "comma-separated xDS variants of the push propagation runs (delta, sotw)")
	kubeAPIs := flag.String("kube-apis", "", "comma-separated xDS variants of the Kubernetes propagation runs")
	swarmN := flag.Int("swarm", 0, "simulated Envoys of the fan-out run")
	changes := flag.Int("changes", 0, "timed changes per propagation row")
	hotKeyReps := flag.Int("hotkey-reps", 0, "repetitions of the bounded-load (hotkey) runs (default 2; 1 with -quick)")
	hotKeyFactors := flag.String("hotkey-factors", "", "comma-separated balance factors (percent) of the hotkey runs, each beside none (default 125,150)")
	hotKeyRequests := flag.Int("hotkey-requests", 0, "requests per hotkey run (default 10,000)")
	hotKeyWorkers := flag.Int("hotkey-workers", 0, "closed-loop workers of the hotkey runs, so requests in flight (default 32)")
	hotKeyDelay := flag.Duration("hotkey-delay", 0, "the hotkey backends' delay before each response (default 20ms)")
	cpOffset := flag.Int("cp-port-offset", 0, "added to every port of the control-plane rows (another runner uses the defaults)")
	profileDir := flag.String("cpu-profile-dir", "", "write a CPU profile of lbplane over each push row's timed changes (ProfileSeconds) to this directory, and for the stats row its allocations too")
	coldStart := flag.Bool("cold-start", false, "after the push runs, restart lbplane with the most policies and time an Envoy's first full config")
	churnFlags := churnFlagSet()
	flag.Parse()
	if *again != "" {
		wd, _ := os.Getwd()
		repoRoot = wd
		if err := rerender(*again); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	cfg := plan(*quick)
	churnFlags.apply(&cfg)
	applyFanoutReplicas(&cfg, *only)
	applyRebalance(&cfg, *only)
	applyFanoutChurn(&cfg, *only)
	if *reps > 0 {
		cfg.Reps = *reps
	}
	if *dur > 0 {
		cfg.WrkDuration = *dur
	}
	if *conc != "" {
		cfg.Concurrency = nil
		for _, c := range strings.Split(*conc, ",") {
			n, err := strconv.Atoi(c)
			if err != nil {
				fmt.Fprintln(os.Stderr, "error: -concurrency:", err)
				os.Exit(2)
			}
			cfg.Concurrency = append(cfg.Concurrency, n)
		}
	}
	if *peerList != "" {
		cfg.Peers = strings.Split(*peerList, ",")
		// A focused comparison names its peers: the scenarios' own peer lists give way.
		cfg.WSPeers, cfg.HTTPSPeers, cfg.HealthPeers, cfg.MemPeers = nil, nil, nil, nil
	}
	cfg.WSL4 = *wsL4
	if *wsConns > 0 {
		cfg.WSConns = *wsConns
	}
	if *memConc != "" {
		ns, err := intList(*memConc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error: -mem-concurrency:", err)
			os.Exit(2)
		}
		cfg.MemConcurrency = ns
	}
	var ex experiment
	if *envoyRuntime != "" {
		ex.runtime = map[string]string{}
		for _, kv := range strings.Split(*envoyRuntime, ",") {
			k, v, _ := strings.Cut(kv, "=")
			ex.runtime[k] = v
		}
	}
	ex.args = strings.Fields(*envoyArgs)
	ex.heapDumps = *heapDumps
	if *envoyEnv != "" {
		ex.env = strings.Split(*envoyEnv, ",")
	}
	ints := func(name, s string) []int {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				fmt.Fprintf(os.Stderr, "error: -%s: %v\n", name, err)
				os.Exit(2)
			}
			out = append(out, n)
		}
		return out
	}
	switch {
	case *kubeCounts == "none":
		cfg.KubePolicyCounts = nil
	case *kubeCounts != "":
		cfg.KubePolicyCounts = ints("kube-policies", *kubeCounts)
	}
	if *policyCounts != "" {
		cfg.PolicyCounts = ints("policies", *policyCounts)
	}
	if *etcdCounts != "" {
		cfg.EtcdPolicyCounts = ints("etcd-policies", *etcdCounts)
	}
	if *apis != "" {
		cfg.APIs = strings.Split(*apis, ",")
	}
	if *kubeAPIs != "" {
		cfg.KubeAPIs = strings.Split(*kubeAPIs, ",")
	}
	if *swarmN > 0 {
		cfg.Swarm = *swarmN
	}
	if *changes > 0 {
		cfg.Changes = *changes
	}
	cfg.ColdStart = *coldStart
	if *hotKeyReps > 0 {
		cfg.HotKeyReps = *hotKeyReps
	}
	if *hotKeyFactors != "" {
		cfg.HotKeyFactors = ints("hotkey-factors", *hotKeyFactors)
	}
	if *hotKeyRequests > 0 {
		cfg.HotKeyRequests = *hotKeyRequests
	}
	if *hotKeyWorkers > 0 {
		cfg.HotKeyWorkers = *hotKeyWorkers
	}
	if *hotKeyDelay > 0 {
		cfg.HotKeyDelay = *hotKeyDelay
	}
	cfg.ProfileDir = *profileDir
	cpListenerPort, cpBase, cpBackendBase = cpListenerPort+*cpOffset, cpBase+*cpOffset, cpBackendBase+*cpOffset
	if err := run(cfg, *out, *only, *keep, ex); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// experiment is what -envoy-runtime, -envoy-args and -envoy-env change in lbplane's Envoys.
type experiment struct {
	runtime   map[string]string
	args      []string
	env       []string
	heapDumps string
}

// portOffset moves every peer's and backend's port (-port-offset).
var portOffset int

func run(cfg config, out, only string, keep bool, ex experiment) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	repoRoot = wd
	if _, err := os.Stat(filepath.Join(repoRoot, "bench", "peers")); err != nil {
		return fmt.Errorf("run from the repository root (make bench): %w", err)
	}
	host, _ := os.Hostname()
	if out == "" {
		name := time.Now().UTC().Format("2006-01-02") + "-" + host
		if cfg.Quick {
			name += "-quick"
		}
		out = filepath.Join(repoRoot, "bench", "results", name)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "lbplane-bench-")
	if err != nil {
		return err
	}
	if keep {
		defer fmt.Fprintf(os.Stderr, "work directory kept: %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	want := func(s string) bool { return only == "" || strings.Contains(","+only+",", ","+s+",") }
	e := &env{dir: work, tools: map[string]string{}, envoyRuntime: ex.runtime, envoyArgs: ex.args, envoyEnv: ex.env, heapDumps: ex.heapDumps}
	tools := []string{"envoy", "wrk", "nginx", "haproxy", "traefik", "k6"}
	if only == "controlplane" || only == "stats" || only == "rollout" || incrementalOnly(only) {
		tools = tools[:1] // the control-plane rows need Envoy only
	}
	for _, t := range tools {
		b, err := exec.Command(filepath.Join(repoRoot, "hack", "tools.sh"), "path-"+t).Output()
		if err != nil {
			return err
		}
		e.tools[t] = strings.TrimSpace(string(b))
		if _, err := os.Stat(e.tools[t]); err != nil && (t != "k6" || want("k6")) {
			return fmt.Errorf("%s is missing: run hack/tools.sh bench (make bench does)", t)
		}
	}
	e.noFile = raiseNoFile()
	if e.cert, err = makeCert(work); err != nil {
		return err
	}
	// Every peer gets the same limit of client connections, below the open-file limit: each client can
	// need an upstream connection too (HAProxy refuses to start otherwise).
	e.maxConn = min(50000, (e.noFile-1000)/2)
	if most := slices.Max(cfg.Concurrency); e.maxConn < most {
		return fmt.Errorf("the open-file limit (%d) allows %d client connections per peer, fewer than %d (raise ulimit -n, or -concurrency)", e.noFile, e.maxConn, most)
	}
	e.bin = filepath.Join(work, "bin")
	build := exec.Command("go", "build", "-o", e.bin+"/", "./cmd/lbplane", "./cmd/lbplane-backend", "./internal/grpcfleet/fleet")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building lbplane: %w", err)
	}
	machine := describeMachine(e)
	rep := &report{Config: cfg, Machine: machine, Command: strings.TrimSpace("go run ./bench/runner " + strings.Join(os.Args[1:], " ")), Started: time.Now().UTC()}
	runs, err := os.Create(filepath.Join(out, "runs.jsonl"))
	if err != nil {
		return err
	}
	defer runs.Close()
	record := func(r runRecord) {
		b, _ := json.Marshal(r)
		runs.Write(append(b, '\n'))
		rep.Runs = append(rep.Runs, r)
	}

	if want("dataplane") || want("https") || want("k6") || want("paired") {
		if err := dataPlane(ctx, e, cfg, rep, record, want); err != nil {
			return err
		}
	}
	if want("memory") {
		if err := memoryAtLoad(ctx, e, cfg, rep, record); err != nil {
			return err
		}
	}
	if want("hash") || want("health") || want("websocket") {
		if err := balancing(ctx, e, cfg, rep, want); err != nil {
			return err
		}
	}
	if want("hotkey") {
		if err := hotKeyScenario(ctx, e, cfg, rep); err != nil {
			return err
		}
	}
	if want("controlplane") {
		if err := controlPlane(ctx, e, cfg, rep, record); err != nil {
			return err
		}
	}
	if strings.Contains(","+only+",", ",stats,") { // opt-in, as the incremental rows
		if err := statsRow(ctx, e, cfg, record); err != nil {
			return err
		}
	}
	if strings.Contains(","+only+",", ",rollout,") { // opt-in too
		if err := rolloutRow(ctx, e, out, rep); err != nil {
			return err
		}
	}
	if err := incrementalRows(ctx, e, cfg, out, only, record); err != nil {
		return err
	}
	if gatewayRoutesNamed(only) { // opt-in, as the incremental rows
		if err := gatewayRoutesRow(ctx, e, out, rep, record); err != nil {
			return fmt.Errorf("gateway routes: %w", err)
		}
	}
	rep.Finished = time.Now().UTC()
	return rep.write(out)
}

// raiseNoFile lifts the open-file limit: 10,000 client connections are 20,000 descriptors in a proxy
// (client and upstream side). Root may raise the hard limit too; others get the hard limit.
func raiseNoFile() int {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 1024
	}
	want := uint64(200000)
	if l.Max < want {
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}) == nil {
			return int(want)
		}
	}
	l.Cur = l.Max
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return int(min(l.Cur, 1<<20))
}

func describeMachine(e *env) map[string]string {
	m := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m["cpu"] = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m["memory"] = strings.TrimSpace(strings.SplitN(strings.Split(string(b), "\n")[0], ":", 2)[1])
	}
	if b, err := exec.Command("uname", "-r").Output(); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	for _, t := range []struct{ name, flag string }{{"envoy", "--version"}, {"nginx", "-v"}, {"haproxy", "-v"}, {"traefik", "version"}, {"k6", "version"}, {"wrk", "-v"}} {
		b, _ := exec.Command(e.tools[t.name], t.flag).CombinedOutput()
		line := strings.TrimSpace(string(b))
		line = strings.TrimSpace(strings.Split(line, "\n")[0])
		if t.name == "traefik" {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "Version:") {
					line = strings.TrimSpace(strings.TrimPrefix(l, "Version:"))
				}
			}
		}
		m[t.name] = line
	}
	m["noFile"] = fmt.Sprint(e.noFile)
	return m
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// balancing runs the scenarios on five backends: hash persistence, health, WebSockets.
func balancing(ctx context.Context, e *env, cfg config, rep *report, want func(string) bool) error {
	if err := startBackends(e, 5, 28201); err != nil {
		return err
	}
	defer e.stopBackends()
	if want("hash") {
		if err := hashScenario(ctx, e, cfg, rep); err != nil {
			return err
		}
	}
	if want("health") {
		if err := healthScenario(ctx, e, cfg, rep); err != nil {
			return err
		}
	}
	if want("websocket") {
		if err := wsScenario(ctx, e, cfg, rep); err != nil {
			return err
		}
	}
	return nil
}
