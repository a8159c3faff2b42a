package main

import (
	"github.com/lbplane/lbplane/bench/internal/benchstat"

	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// The control-plane rows' ports; -cp-port-offset moves them all, so that two runners on one machine do not
// push to each other's lbplane.
var (
	cpListenerPort = 28300
	cpBase         = 28400 // xDS, API, Envoy admin and stats
	cpBackendBase  = 28091
)

var cpLargeChanges = flag.Int("cp-large-changes", 50, "at most this many timed changes in the push, etcd and Kubernetes rows of 10,000 policies and more")

var cpGCHeadroom = flag.String("cp-gc-headroom-mib", "", "comma-separated values of lbplane serve --gc-headroom-mib: each push, etcd and Kubernetes row runs once per value, side by side (0: Go's own pace; empty: lbplane's default only)")

// gcHeadrooms are -cp-gc-headroom-mib's values; -1 is lbplane's default (the flag not given).
func gcHeadrooms() ([]int, error) {
	if *cpGCHeadroom == "" {
		return []int{-1}, nil
	}
	return intList(*cpGCHeadroom)
}

// cpGroups spreads the push and Kubernetes rows' fillers over proxy groups. A fleet of 100,000 policies is
// served by several Envoys, each holding its group's share; one Envoy holding all of them spends minutes on
// each large update (REPORT 5.11), which times the Envoy, not lbplane. The probe and the row's Envoy stay in
// the default group, which holds every groups-th filler.
var cpGroups = flag.Int("cp-groups", 1, "spread the push and Kubernetes rows' fillers round-robin over this many proxy groups (default, g-1, …, g-(N-1)); the probe, the timed Envoy and the simulated Envoys are in the default group, with every N-th filler (1: every filler on the one Envoy)")

// fillers renders policies [from, to): each its own hostname on one shared port, as many tenants behind
// one Envoy listener are; with -cp-groups N > 1, filler i goes to proxy group g-(i mod N), and to the default
// group when i mod N is 0.
func fillers(from, to int, backend string) []byte {
	groups := max(1, *cpGroups)
	return fillersOn("f", cpListenerPort, from, to, backend, func(i int) string {
		if i%groups == 0 {
			return ""
		}
		return fmt.Sprintf("g-%d", i%groups)
	})
}

// lastServed is the newest filler of n that the row's Envoy (the default group) serves.
func lastServed(n int) int {
	groups := max(1, *cpGroups)
	return (n - 1) / groups * groups
}

// fillersOn renders policies prefix-from to prefix-(to-1), each its own hostname on listener port, all
// on one endpoint at backend's port, each in proxy group groupOf(i) ("": the default group).
func fillersOn(prefix string, port, from, to int, backend string, groupOf func(i int) string) []byte {
	var b strings.Builder
	for i := from; i < to; i++ {
		group := ""
		if g := groupOf(i); g != "" {
			group = "  proxyGroup: " + g + "\n"
		}
		fmt.Fprintf(&b, "---\napiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: %s-%d}\nspec:\n%s"+
			"  listener: {address: 127.0.0.1, port: %d, protocol: HTTP, hostnames: [%s-%d.bench.local]}\n"+
			"  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: %s}]}]\n", prefix, i, group, port, prefix, i, backend)
	}
	return []byte(b.String())
}

// probe is the policy every change edits: its endpoint moves between two backends, and its connect
// timeout changes so that the cluster (not only its endpoints) changes too.
func probe(backendPort string, timeout int) []byte {
	return probeNamed("probe", backendPort, timeout)
}

// probeNamed is the probe policy under another name, for the host name <name>.bench.local on the same
// listener: its cluster is default/<name>/app. The client-churn row changes several at once.
func probeNamed(name, backendPort string, timeout int) []byte {
	return []byte(fmt.Sprintf("apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: %s}\nspec:\n"+
		"  listener: {address: 127.0.0.1, port: %d, protocol: HTTP, hostnames: [%s.bench.local]}\n"+
		"  backends: [{name: app, connectTimeout: %ds, endpoints: [{address: 127.0.0.1, port: %s}]}]\n", name, cpListenerPort, name, timeout, backendPort))
}

func controlPlane(ctx context.Context, e *env, cfg config, rep *report, record func(runRecord)) error {
	if err := startBackends(e, 2, cpBackendBase); err != nil {
		return err
	}
	defer e.stopBackends()
	ports := e.backendPorts()
	apis := cfg.APIs
	if len(apis) == 0 {
		apis = []string{"delta", "sotw"}
	}
	headrooms, err := gcHeadrooms()
	if err != nil {
		return fmt.Errorf("-cp-gc-headroom-mib: %w", err)
	}
	for _, api := range apis {
		for _, h := range headrooms {
			if err := propagation(ctx, e, cfg, api, "push", h, ports, record); err != nil {
				return fmt.Errorf("propagation (%s): %w", api, err)
			}
		}
	}
	if cfg.EtcdPolicyCounts != nil {
		for _, h := range headrooms {
			if err := propagation(ctx, e, cfg, "delta", "etcd", h, ports, record); err != nil {
				return fmt.Errorf("propagation (etcd, delta): %w", err)
			}
		}
	}
	if cfg.KubePolicyCounts != nil {
		for _, api := range cfg.KubeAPIs {
			for _, h := range headrooms {
				if err := propagation(ctx, e, cfg, api, "kubernetes", h, ports, record); err != nil {
					return fmt.Errorf("propagation (kubernetes, %s): %w", api, err)
				}
			}
		}
	}
	return nil
}

// applier is how policies reach lbplane: its push API, or the Kubernetes API it watches.
type applier func(ctx context.Context, docs []byte) error

// propagation is one push, etcd or Kubernetes row; headroom is lbplane's --gc-headroom-mib (-1: its default).
func propagation(ctx context.Context, e *env, cfg config, api, via string, headroom int, ports []string, record func(runRecord)) error {
	dir := filepath.Join(e.dir, "controlplane-"+via+"-"+api)
	variant, suffix := via, ""
	if headroom >= 0 {
		suffix = fmt.Sprintf("-gc%d", headroom)
		variant = fmt.Sprintf("%s, --gc-headroom-mib %d", via, headroom)
	}
	dir += suffix
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	xds, apiAddr := fmt.Sprintf("127.0.0.1:%d", cpBase), fmt.Sprintf("127.0.0.1:%d", cpBase+1)
	args := serveArgs(dir, xds, apiAddr, "--metrics-address", "",
		// The fan-out row's simulated Envoys and the real one: more than the default cap (half the open-file
		// limit, 10,000 on these machines).
		"--xds-max-connections", "-1")
	if headroom >= 0 {
		args = append(args, "--gc-headroom-mib", strconv.Itoa(headroom))
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", cpBase+3)
	if cfg.ProfileDir != "" {
		args = append(args, "--metrics-address", pprofAddr, "--pprof")
	}
	c := &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: 10 * time.Minute}}
	apply := applier(func(ctx context.Context, docs []byte) error { _, err := c.Apply(ctx, docs, false); return err })
	counts := cfg.PolicyCounts
	// Status writes counted by the API server (kubestatus.go), once they have settled with at least atLeast.
	statusCount := func(atLeast int64) int64 { return 0 }
	if via == "kubernetes" {
		cluster, stopCluster, err := startCluster(dir)
		if err != nil {
			return err
		}
		defer stopCluster()
		// The fillers name endpoint addresses, which Kubernetes mode allows only where the operator says.
		args = append(args, "--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--address-backends-namespaces", "default")
		apply = kubeApplier(cluster)
		counts = cfg.KubePolicyCounts
		statusCount = func(atLeast int64) int64 { return settledStatusWrites(ctx, cluster.Config, atLeast) }
	}
	if via == "etcd" {
		etcdArgs, stopEtcd, err := startEtcdStore(dir)
		if err != nil {
			return err
		}
		defer stopEtcd()
		args = append(args, etcdArgs...)
		counts = cfg.EtcdPolicyCounts
	}
	if *cpTrace != "" {
		args = append(args, "--log-level", "debug", "--log-format", "json")
	}
	lb, err := serveLbplane(e, dir, apiAddr, 20*time.Second, args)
	if err != nil {
		return err
	}
	defer lb.stop()
	if err := apply(ctx, probe(ports[0], 1)); err != nil {
		return err
	}
	cfgPath, err := writeBootstrap(dir, envoybootstrap.Params{NodeID: "bench-cp", XDS: xds, Delta: api == "delta", AdminPort: cpBase + 2, InsecureAdminTCP: true, MaxConnections: 10000})
	if err != nil {
		return err
	}
	envoy, err := startEnvoyWith(e, dir, "envoy", cfgPath)
	if err != nil {
		return err
	}
	defer envoy.stop()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	serves := probeServes(client)
	if !waitFor(30*time.Second, func() bool { return serves(backendName(0)) }) {
		return fmt.Errorf("the Envoy never served the probe policy")
	}

	// The fan-out first, with only the probe present, so that it measures distribution, not translation.
	if via == "push" {
		if err := swarm(ctx, cfg, api, xds, c, ports, lb.cmd.Process.Pid, record); err != nil {
			return err
		}
		if !waitFor(30*time.Second, func() bool { return serves(backendName(0)) }) {
			return fmt.Errorf("the Envoy lost the probe policy after the simulated Envoys left")
		}
	}
	have, timeout := 0, 1
	for _, n := range counts {
		// Every filler created gets a first status; the timed changes start once those are written.
		firstStatuses := statusCount(0) + int64(max(n-have, 0))
		// Add fillers up to n, a thousand per push (the push API takes 8 MiB at most).
		for have < n {
			next := min(n, have+1000)
			if err := apply(ctx, fillers(have, next, ports[0])); err != nil {
				return fmt.Errorf("pushing %d policies: %w", next, err)
			}
			have = next
		}
		// The last filler is served before any change is timed.
		last := fmt.Sprintf("f-%d.bench.local", lastServed(n))
		if !servesHost(client, last) {
			return fmt.Errorf("the Envoy never served %d policies", n)
		}
		// Serving the last filler is not the end of the fill for the Envoy: it may still be applying (and has
		// not acknowledged) a large response, and a delta stream gets nothing new until it has. The first timed
		// change waited 777 ms for that at 10,000 policies (bench/results/2026-11-23-vm-incremental 6.4).
		if !proxiesSynced(ctx, c, 10*time.Minute) {
			return fmt.Errorf("the Envoy never acknowledged the config of %d policies", n)
		}
		statusBefore := statusCount(firstStatuses)
		if cfg.ProfileDir != "" {
			if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
				return err
			}
			go profileCPU(ctx, pprofAddr, filepath.Join(cfg.ProfileDir, fmt.Sprintf("%s-%s-%d%s.pprof", via, api, n, suffix)))
		}
		before := treeUsage(lb.cmd.Process.Pid)
		var samples, fromPush []float64
		var traced []changeTimes
		changes := cfg.Changes
		if n >= 10000 && !cfg.Quick {
			// Each change rebuilds 10,000 policies' resources; 50 are enough for a p99 of their own. The CPU
			// of a change at 100,000 includes its share of a garbage collection of the whole heap, one every
			// hundred-odd changes: more changes (-cp-large-changes) give that share its due.
			changes = min(changes, *cpLargeChanges)
		}
		for i := range changes {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			target := (i + 1) % 2
			timeout = timeout%5 + 1
			if via == "kubernetes" {
				// lbplane spaces its resyncs from Kubernetes by up to 100 ms (a burst of changes is gathered):
				// a lone change, as a user applies one, is what is timed.
				time.Sleep(150 * time.Millisecond)
			}
			// Two clocks: from the push sent, and from the push API's answer (the policy accepted; lbplane has
			// translated and started publishing by then) to the first 200 from the new backend.
			sent := time.Now()
			if err := apply(ctx, probe(ports[target], timeout)); err != nil {
				return err
			}
			accepted := time.Now()
			probes := 0
			if !waitFor(30*time.Second, func() bool { probes++; return serves(backendName(target)) }) {
				return fmt.Errorf("change %d with %d policies did not reach Envoy in 30s", i, n)
			}
			traced = append(traced, changeTimes{Sent: sent, Accepted: accepted, Served: time.Now(), Probes: probes})
			samples = append(samples, float64(time.Since(accepted).Microseconds())/1000)
			fromPush = append(fromPush, float64(time.Since(sent).Microseconds())/1000)
		}
		after := treeUsage(lb.cmd.Process.Pid)
		if *cpTrace != "" {
			var gcs []int64
			if cfg.ProfileDir != "" {
				gcs = gcEnds(ctx, pprofAddr)
			}
			if err := writePushTrace(filepath.Join(dir, "lbplane.log"), fmt.Sprintf("%s-%s-%d%s", via, api, n, suffix), traced, gcs); err != nil {
				return fmt.Errorf("-cp-trace: %w", err)
			}
		}
		rec := runRecord{Scenario: "propagation", Peer: "lbplane", Variant: variant, API: api, Policies: n, Samples: samples, Valid: true,
			LbplaneRSS: after.RSSBytes, LbplaneCPUPerChangeMs: (after.CPUSeconds - before.CPUSeconds) * 1000 / float64(len(samples))}
		rec.P50, rec.P99 = percentile(samples, 50), percentile(samples, 99)
		rec.PushSamples = fromPush
		rec.Extra = map[string]float64{"groups": float64(max(1, *cpGroups)), "envoyPolicies": float64(lastServed(n)/max(1, *cpGroups) + 1),
			"peakRSS": float64(peakRSS(lb.cmd.Process.Pid))}
		if via == "kubernetes" {
			rec.Extra["statusWritesPerChange"] = float64(statusCount(0)-statusBefore) / float64(len(samples))
		}
		record(rec)
		fmt.Fprintf(os.Stderr, "propagation %-10s %-5s %5d policies (%d groups, the Envoy's %d): accepted→200 p50 %.1f ms p99 %.1f ms; push→200 p50 %.1f ms p99 %.1f ms; lbplane %.1f ms CPU/change, RSS %d MiB (peak %d)\n",
			variant, api, n, max(1, *cpGroups), lastServed(n)/max(1, *cpGroups)+1, rec.P50, rec.P99, percentile(fromPush, 50), percentile(fromPush, 99), rec.LbplaneCPUPerChangeMs, rec.LbplaneRSS>>20, int64(rec.Extra["peakRSS"])>>20)
	}
	if via == "push" && cfg.ColdStart && len(counts) > 0 {
		envoy.stop()
		lb.stop()
		return coldStart(dir, e, args, cfgPath, apiAddr, counts[len(counts)-1], api, record)
	}
	return nil
}

// coldStart starts lbplane again on the data directory the push runs filled, then a fresh Envoy, and times
// from lbplane's start until that Envoy serves the newest policy (its config is complete: the listener's
// route table holds every host), with lbplane's RSS then.
func coldStart(dir string, e *env, args []string, cfgPath, apiAddr string, n int, api string, record func(runRecord)) error {
	begin := time.Now()
	lb, err := start(dir, "lbplane-cold", nil, filepath.Join(e.bin, "lbplane"), args...)
	if err != nil {
		return err
	}
	defer lb.stop()
	envoy, err := startEnvoyWith(e, dir, "envoy-cold", cfgPath)
	if err != nil {
		return err
	}
	defer envoy.stop()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	last := fmt.Sprintf("f-%d.bench.local", n-1)
	if !servesHost(client, last) {
		return fmt.Errorf("cold start: the Envoy never served %d policies", n)
	}
	took := time.Since(begin)
	u := treeUsage(lb.cmd.Process.Pid)
	rec := runRecord{Scenario: "coldstart", Peer: "lbplane", API: api, Policies: n, Samples: []float64{float64(took.Milliseconds())}, Valid: true,
		P50: float64(took.Milliseconds()), LbplaneRSS: u.RSSBytes}
	record(rec)
	fmt.Fprintf(os.Stderr, "cold start  %-5s %d policies: lbplane start → Envoy serves the newest policy %.1f s; lbplane RSS %d MiB, CPU %.1f s\n",
		api, n, took.Seconds(), u.RSSBytes>>20, u.CPUSeconds)
	return nil
}

func waitFor(d time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// swarm connects cfg.Swarm ADS clients (one process, one gRPC connection each) that subscribe to clusters
// and acknowledge what they get, then times a cluster change until every client has it.
func swarm(ctx context.Context, cfg config, api, xds string, c *pushapi.Client, ports []string, lbPid int, record func(runRecord)) error {
	n := cfg.Swarm
	idle := treeUsage(lbPid)
	arrivals := make(chan time.Duration, n*4)
	var changeAt time.Time
	var mu sync.Mutex
	ready := make(chan struct{}, n)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		node := &corev3.Node{Id: fmt.Sprintf("sim-%d", i), Cluster: "default"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			onUpdate := arrival(ready, &mu, &changeAt, arrivals)
			if api == "delta" {
				simDelta(sctx, conn, node, onUpdate)
			} else {
				simSotw(sctx, conn, node, onUpdate)
			}
		}()
	}
	for range n {
		select {
		case <-ready:
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("not all %d simulated Envoys got their first config", n)
		}
	}
	connected := treeUsage(lbPid)
	mu.Lock()
	changeAt = time.Now()
	mu.Unlock()
	if _, err := c.Apply(ctx, probe(ports[0], 7), false); err != nil {
		return err
	}
	samples := collectArrivals(arrivals, n, 2*time.Minute)
	note := ""
	if len(samples) < n {
		// Recorded, not fatal: the rows after this one still run, and the report says how many got it.
		note = fmt.Sprintf("only %d of %d simulated Envoys got the change within 2 minutes", len(samples), n)
		fmt.Fprintln(os.Stderr, "swarm: "+note)
	}
	cancel()
	wg.Wait()
	rec := runRecord{Scenario: "swarm", Peer: "lbplane", API: api, Conns: n, Samples: samples, Valid: note == "", Note: note,
		P50: percentile(samples, 50), P99: percentile(samples, 99), P999: percentile(samples, 100), LbplaneRSS: connected.RSSBytes}
	record(rec)
	perClient := float64(connected.RSSBytes-idle.RSSBytes) / float64(n) / 1024
	fmt.Fprintf(os.Stderr, "swarm       %-5s %d simulated Envoys: p50 %.1f ms, p99 %.1f ms, all %.1f ms; lbplane RSS %d MiB idle, %d MiB connected: %.1f KiB per client\n",
		api, n, rec.P50, rec.P99, rec.P999, idle.RSSBytes>>20, connected.RSSBytes>>20, perClient)
	return nil
}

// arrival is one simulated Envoy's onUpdate: its first config signals ready; the first update after
// *changeAt is set (under mu) sends the time since then to arrivals. A change may come in several
// responses (make-before-break); each client counts once.
func arrival(ready chan<- struct{}, mu *sync.Mutex, changeAt *time.Time, arrivals chan<- time.Duration) func(first bool) {
	reported := false
	return func(first bool) {
		if first {
			ready <- struct{}{}
			return
		}
		mu.Lock()
		at := *changeAt
		mu.Unlock()
		if !at.IsZero() && !reported {
			reported = true
			arrivals <- time.Since(at)
		}
	}
}

// collectArrivals takes up to want arrivals, in milliseconds, for at most within; fewer if time ran out.
func collectArrivals(arrivals <-chan time.Duration, want int, within time.Duration) []float64 {
	var samples []float64
	deadline := time.After(within)
	for len(samples) < want {
		select {
		case d := <-arrivals:
			samples = append(samples, float64(d.Microseconds())/1000)
		case <-deadline:
			return samples
		}
	}
	return samples
}

// simSotw is a state-of-the-world client of the cluster type: it reports each response with a new version.
func simSotw(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, onUpdate func(first bool)) {
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return
	}
	req := &discovery.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}
	first := true
	for {
		if err := stream.Send(req); err != nil {
			return
		}
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		if resp.GetVersionInfo() != req.GetVersionInfo() {
			onUpdate(first)
			first = false
		}
		req = &discovery.DiscoveryRequest{TypeUrl: resource.ClusterType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
	}
}

// simDelta is the same over incremental xDS, subscribed to every cluster.
func simDelta(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, onUpdate func(first bool)) {
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return
	}
	req := &discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}}
	first := true
	for {
		if err := stream.Send(req); err != nil {
			return
		}
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		if len(resp.GetResources()) > 0 || len(resp.GetRemovedResources()) > 0 {
			onUpdate(first)
			first = false
		}
		req = &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: resp.GetNonce()}
	}
}

// servesHost waits, up to ten minutes, until the control-plane rows' Envoy answers 200 for host: the last
// filler policy served means all of them are.
func servesHost(client *http.Client, host string) bool {
	return waitFor(10*time.Minute, func() bool {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cpListenerPort), nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// ProfileSeconds is how long a push row's CPU profile runs from its first timed change.
const ProfileSeconds = 20

// profileCPU saves lbplane's CPU profile over the next ProfileSeconds; a failure only loses the profile.
func profileCPU(ctx context.Context, addr, path string) {
	profileCPUFor(ctx, addr, ProfileSeconds, path)
}

// profileCPUFor saves lbplane's CPU profile over the next seconds; a failure only loses the profile.
func profileCPUFor(ctx context.Context, addr string, seconds int, path string) {
	profileURL(ctx, addr, fmt.Sprintf("profile?seconds=%d", seconds), path)
}

// profileURL writes lbplane's /debug/pprof/<what> to path; a failure only loses the profile.
func profileURL(ctx context.Context, addr, what, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/%s", addr, what), nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer bench") // lbplane's pprof needs the admin token (serveArgs' --token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile", what+":", err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode == http.StatusOK {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "profile", what+":", resp.Status, err)
	}
}

// writeBootstrap renders params into dir/envoy.yaml and returns its path.
func writeBootstrap(dir string, params envoybootstrap.Params) (string, error) {
	b, err := envoybootstrap.Render(params)
	if err != nil {
		return "", err
	}
	cfgPath := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return "", err
	}
	return cfgPath, nil
}

// startEnvoyWith starts a control-plane row's Envoy (one worker, warnings only; its log is dir/name.log) on
// the bootstrap at cfgPath.
func startEnvoyWith(e *env, dir, name, cfgPath string) (*proc, error) {
	return start(dir, name, nil, e.tools["envoy"], "-c", cfgPath, "--concurrency", "1", "--use-dynamic-base-id", "-l", "warn")
}

// startEnvoy writes the bootstrap for params and starts the control-plane rows' Envoy on it.
func startEnvoy(e *env, dir string, params envoybootstrap.Params) (*proc, error) {
	cfgPath, err := writeBootstrap(dir, params)
	if err != nil {
		return nil, err
	}
	return startEnvoyWith(e, dir, "envoy", cfgPath)
}

// serveArgs is the command line of the control-plane rows' lbplane: no API rate limit, no proxy stats
// polling, no wait in the push API's answer, and extra after. Plaintext xDS on loopback, as the benchmark's Envoy and simulated Envoys connect
// without certificates (xDS over mTLS is the default since lbplane runs its own CA). The backends run on
// loopback, which lbplane refuses unless allowed.
func serveArgs(dataDir, xds, apiAddr string, extra ...string) []string {
	return serveArgsMTLS(dataDir, xds, apiAddr, append([]string{"--xds-insecure"}, extra...)...)
}

// serveArgsMTLS is serveArgs with xDS over mTLS, lbplane's default: for clients that get their certificates
// from lbplane (the gRPC fleet row).
func serveArgsMTLS(dataDir, xds, apiAddr string, extra ...string) []string {
	return append([]string{"serve", "--data-dir", dataDir, "--xds-address", xds, "--api-address", apiAddr,
		"--token", "bench", "--api-rate-limit", "0", "--proxy-stats-interval", "0",
		// The push API answers at once, as the rows time from its answer (accepted→200): by default it waits
		// for the Envoys to acknowledge the change first.
		"--push-wait", "0",
		"--allow-backend-cidrs", "127.0.0.0/8"}, extra...)
}

// serveLbplane starts lbplane with args and waits up to wait for its API at apiAddr.
func serveLbplane(e *env, dir, apiAddr string, wait time.Duration, args []string) (*proc, error) {
	lb, err := start(dir, "lbplane", nil, filepath.Join(e.bin, "lbplane"), args...)
	if err != nil {
		return nil, err
	}
	if err := waitPort(apiAddr, wait); err != nil {
		lb.stop()
		return nil, err
	}
	return lb, nil
}

// proxiesSynced waits until every proxy connected to lbplane has acknowledged the current config.
func proxiesSynced(ctx context.Context, c *pushapi.Client, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ps, err := c.Proxies(ctx)
		synced := err == nil && len(ps) > 0
		for _, p := range ps {
			synced = synced && p.State == apiwire.Synced
		}
		if synced {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// probeServes returns a check, through client, that the probe policy on cpListenerPort answers 200 from the
// named backend.
func probeServes(client *http.Client) func(backend string) bool {
	return func(backend string) bool {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", cpListenerPort), nil)
		req.Host = "probe.bench.local"
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200 && resp.Header.Get("X-Backend") == backend
	}
}

func percentile(xs []float64, p float64) float64 { return benchstat.Percentile(xs, p) }

// backendPorts are the ports of the running backends, in order.
func (e *env) backendPorts() []string {
	var ports []string
	for _, b := range e.backends {
		_, port, _ := net.SplitHostPort(b)
		ports = append(ports, port)
	}
	return ports
}
