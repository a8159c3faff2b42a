package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// The cold-start row's ports move with -cp-port-offset as the control-plane rows' do (cpBase starts at
// 28400), so that runners of several sessions on one machine do not answer each other's probes.
var (
	coldListenerPort = 29331
	coldBase         = 29340 // xDS, API, metrics (pprof), Envoy admin
	coldBackendPort  = 29391
)

func moveColdPorts() {
	off := cpBase - 28400
	coldListenerPort, coldBase, coldBackendPort = coldListenerPort+off, coldBase+off, coldBackendPort+off
}

// coldGroups spreads the cold-start row's policies over proxy groups; its Envoy then belongs to one of them.
// One Envoy holding every policy is the row issue 16 asks for; this is the other way a fleet that large is
// run (each Envoy gets its group's policies only), reported beside it, never in its place.
var coldGroups = flag.Int("cold-groups", 1, "spread the cold-start row's policies round-robin over this many proxy groups (g-0, g-1, …) and time the Envoy of g-0 (1: one group, every policy on the one Envoy)")

// coldClusterStats is the Envoy's lbctl bootstrap --cluster-stats: "all" (the default) or "used", the
// inclusion list of the stats lbplane reads; the row's variant names it when not "all".
var coldClusterStats = flag.String("cold-cluster-stats", envoybootstrap.ClusterStatsAll, "the cold-start Envoy's bootstrap --cluster-stats: all or used")

// coldFillers renders policies [from, to) as the push rows' fillers are, on the cold-start row's port; with
// groups > 1, policy i goes to proxy group g-(i mod groups).
func coldFillers(from, to, groups int) []byte {
	return fillersOn("c", coldListenerPort, from, to, strconv.Itoa(coldBackendPort), func(i int) string {
		if groups <= 1 {
			return ""
		}
		return coldGroup(i, groups)
	})
}

func coldGroup(i, groups int) string { return fmt.Sprintf("g-%d", i%groups) }

// coldStarts starts lbplane anew with n policies in its --config-dir (files of 1,000), a fresh Envoy beside
// it, and times from lbplane's start until the push API shows that Envoy SYNCED after it serves the last
// policy (the listener's route table holds every host); lbplane's RSS and CPU then, and its heap profile.
// From 10,000 policies on, lbplane's first 30 seconds are profiled too.
func coldStarts(ctx context.Context, e *env, counts []int, out string, record func(runRecord)) error {
	groups := max(1, *coldGroups)
	moveColdPorts()
	if err := startBackends(e, 1, coldBackendPort); err != nil {
		return err
	}
	defer e.stopBackends()
	for _, n := range counts {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		dir := filepath.Join(e.dir, fmt.Sprintf("coldstart-%d", n))
		cfgDir := filepath.Join(dir, "policies")
		if err := os.MkdirAll(cfgDir, 0o755); err != nil {
			return err
		}
		for from := 0; from < n; from += 1000 {
			if err := os.WriteFile(filepath.Join(cfgDir, fmt.Sprintf("p-%06d.yaml", from)), coldFillers(from, min(n, from+1000), groups), 0o644); err != nil {
				return err
			}
		}
		xds, apiAddr := fmt.Sprintf("127.0.0.1:%d", coldBase), fmt.Sprintf("127.0.0.1:%d", coldBase+1)
		pprofPort, adminPort := coldBase+2, coldBase+3
		// No heap budget (MaxHeapBytes -1): Envoy holds 1.8 GB at 50,000 clusters, over the default 1 GiB,
		// whose overload actions would answer every request 503; this row times the config, not the budget.
		// The Envoy's group (g-0 when spread) holds policies 0, groups, 2×groups, …; the last of them is the
		// one it serves last.
		group, last, mine := "", n-1, n
		if groups > 1 {
			group, last, mine = coldGroup(0, groups), (n-1)/groups*groups, (n+groups-1)/groups
		}
		cfgPath, err := writeBootstrap(dir, envoybootstrap.Params{NodeID: "bench-cold", Group: group, XDS: xds, Delta: true, AdminPort: adminPort, InsecureAdminTCP: true, MaxConnections: 10000, MaxHeapBytes: -1, ClusterStats: *coldClusterStats})
		if err != nil {
			return err
		}
		args := append(serveArgs(filepath.Join(dir, "data"), xds, apiAddr, "--config-dir", cfgDir), pprofArgs(pprofPort)...)
		begin := time.Now()
		lb, err := start(dir, "lbplane", nil, filepath.Join(e.bin, "lbplane"), args...)
		if err != nil {
			return err
		}
		envoy, err := startEnvoyWith(e, dir, "envoy", cfgPath)
		if err != nil {
			lb.stop()
			return err
		}
		var profTop string
		profDone := make(chan struct{})
		if n >= 10000 {
			go func() {
				defer close(profDone)
				if waitPort(fmt.Sprintf("127.0.0.1:%d", pprofPort), 60*time.Second) == nil {
					profTop = profile(pprofPort, 30, out, fmt.Sprintf("coldstart-%d-cpu", n))
				}
			}()
		} else {
			close(profDone)
		}
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
		served := waitFor(15*time.Minute, func() bool {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", coldListenerPort), nil)
			req.Host = fmt.Sprintf("c-%d.bench.local", last)
			resp, err := client.Do(req)
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		tServed := time.Since(begin)
		c := &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: time.Minute}}
		var state string
		synced := served && waitFor(5*time.Minute, func() bool {
			ps, err := c.Proxies(ctx)
			if err != nil {
				return false
			}
			for _, p := range ps {
				if p.NodeID == "bench-cold" {
					state = p.State
					return p.State == apiwire.Synced
				}
			}
			return false
		})
		tSynced := time.Since(begin)
		u, eu := treeUsage(lb.cmd.Process.Pid), treeUsage(envoy.cmd.Process.Pid)
		// After the CPU and RSS are read: listing a million stats costs the Envoy seconds.
		nStats, nClusterStats := envoyStatCount(adminPort)
		heapTop := profile(pprofPort, 0, out, fmt.Sprintf("coldstart-%d-heap", n))
		<-profDone
		envoy.stop()
		lb.stop()
		timeouts := initialFetchTimeouts(filepath.Join(dir, "envoy.log"))
		variant := "config-dir"
		if groups > 1 {
			variant = fmt.Sprintf("config-dir, %d proxy groups, the Envoy of one (%d policies)", groups, mine)
		}
		if *coldClusterStats != envoybootstrap.ClusterStatsAll {
			variant += ", cluster stats " + *coldClusterStats
		}
		rec := runRecord{Scenario: "coldstart", Peer: "lbplane", API: "delta", Variant: variant, Policies: n, Valid: served && synced,
			P50: float64(tSynced.Milliseconds()), Samples: []float64{float64(tSynced.Milliseconds())}, LbplaneRSS: u.RSSBytes,
			Extra: map[string]float64{"servedMs": float64(tServed.Milliseconds()), "syncedMs": float64(tSynced.Milliseconds()), "lbplaneCPUSeconds": u.CPUSeconds,
				"groups": float64(groups), "envoyPolicies": float64(mine), "envoyCPUSeconds": eu.CPUSeconds, "envoyRSSBytes": float64(eu.RSSBytes),
				"envoyInitialFetchTimeouts": float64(timeouts), "envoyStats": float64(nStats), "envoyClusterStats": float64(nClusterStats)}}
		if !rec.Valid {
			rec.Note = fmt.Sprintf("served %v, synced %v (last state %q)", served, synced, state)
		}
		record(rec)
		fmt.Fprintf(os.Stderr, "cold start %d policies (%s): lbplane start → Envoy serves the last policy %.1f s, SYNCED %.1f s; lbplane RSS %d MiB, CPU %.1f s; Envoy RSS %d MiB, CPU %.1f s, %d initial fetch timeouts, %d stats (%d of clusters) %s\n%s\n%s\n",
			n, variant, tServed.Seconds(), tSynced.Seconds(), u.RSSBytes>>20, u.CPUSeconds, eu.RSSBytes>>20, eu.CPUSeconds, timeouts, nStats, nClusterStats, rec.Note, heapTop, profTop)
	}
	return nil
}

// initialFetchTimeouts counts the Envoy's "initial fetch timed out" warnings: each is a subscription (a
// cluster's endpoints, a route table) whose 15 s timer ran out before the Envoy applied what lbplane sent.
func initialFetchTimeouts(logPath string) int {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return -1
	}
	return bytes.Count(b, []byte("initial fetch timed out"))
}

// envoyStatCount counts the stats in the Envoy's admin /stats (one a line), and those of clusters (cluster.*):
// what --cluster-stats changes. -1 when admin did not answer.
func envoyStatCount(adminPort int) (all, clusters int) {
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/stats", adminPort))
	if err != nil {
		return -1, -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		all++
		if bytes.HasPrefix(sc.Bytes(), []byte("cluster.")) {
			clusters++
		}
	}
	if sc.Err() != nil {
		return -1, -1
	}
	return all, clusters
}
