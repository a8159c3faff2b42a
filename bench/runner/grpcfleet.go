package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/internal/grpcfleet"
)

// The gRPC fleet row (-only grpc-fleet): proxyless grpc-go clients, state of the world, on one lbplane.
const (
	grpcFleetChanges = 10
	grpcFleetPort    = 28095 // the policy's listener port: the clients' xds:///fleet.grpc.test:28095
	// grpcFleetProfileSeconds is the length of lbplane's CPU profile, started with the first change.
	grpcFleetProfileSeconds = 15
)

// grpcFleetBase is the row's first port (xDS, API); it moves with -cp-port-offset.
func grpcFleetBase() int { return cpBase + 970 }

// grpcFleet runs the row for each count: a fresh lbplane as it ships (mTLS xDS) holding one gRPC policy over
// three backends, its RSS with no client, then n grpc-go xDS clients in a process of their own
// (internal/grpcfleet/fleet, each client its own node and certificate, as lbctl bootstrap --grpc sets one
// up), lbplane's RSS once every client answered a call and is SYNCED, and grpcFleetChanges changes of the
// policy's endpoints, each timed from the push sent until the last client acknowledged it: the latest
// acknowledgement time lbplane recorded (ackedAt), read once every client is SYNCED on the new config, so
// that reading the proxies' list does not weigh on what it times.
func grpcFleet(ctx context.Context, e *env, counts []int, out string, record func(runRecord)) error {
	for _, n := range counts {
		if err := grpcFleetOnce(ctx, e, n, out, record); err != nil {
			return err
		}
	}
	return nil
}

func grpcFleetOnce(ctx context.Context, e *env, n int, out string, record func(runRecord)) error {
	dir := filepath.Join(e.dir, fmt.Sprintf("grpc-fleet-%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := grpcFleetBase()
	xds, apiAddr := fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1)
	pprofPort := base + 2
	clientsPprof := fmt.Sprintf("127.0.0.1:%d", base+3)
	args := append(serveArgsMTLS(filepath.Join(dir, "data"), xds, apiAddr, "--xds-max-connections", "-1"), pprofArgs(pprofPort)...)
	lb, err := serveLbplane(e, dir, apiAddr, time.Minute, args)
	if err != nil {
		return err
	}
	defer lb.stop()
	c := &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: time.Minute}}

	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "fleet"), "-clients", fmt.Sprint(n), "-api", c.BaseURL, "-xds", xds,
		"-target", fmt.Sprintf("fleet.grpc.test:%d", grpcFleetPort), "-dir", filepath.Join(dir, "clients"), "-ready-timeout", "5m", "-pprof", clientsPprof)
	// One process holds every client's heap (~450 KiB each), which each garbage collection marks whole; a
	// client of its own holds well under 1 MiB. GOGC=400 spares the shared cores most of that marking.
	cmd.Env = append(os.Environ(), "LBPLANE_TOKEN=bench", "GOGC=400")
	logf, err := os.Create(filepath.Join(dir, "fleet.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stderr = logf
	fleet, err := grpcfleet.Start(cmd)
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, logf.Name())
	}
	defer fleet.Close(time.Minute)
	policy := func(keep int) []byte {
		var eps []string
		for _, b := range fleet.Backends[:keep] {
			eps = append(eps, fmt.Sprintf("        - {address: 127.0.0.1, port: %d}", b.Port))
		}
		return fmt.Appendf(nil, `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: fleet}
spec:
  listener: {address: 127.0.0.1, port: %d, protocol: HTTP, hostnames: [fleet.grpc.test]}
  backends:
    - name: app
      endpoints:
%s
`, grpcFleetPort, strings.Join(eps, "\n"))
	}
	if _, err := c.Apply(ctx, policy(3), false); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the first publish settles; idle is lbplane with its config and no client
	idle := treeUsage(lb.cmd.Process.Pid)
	var ready grpcfleet.Ready
	if err := fleet.Do("connect", &ready); err != nil {
		return fmt.Errorf("%w (see %s)", err, logf.Name())
	}
	version, _, ok := grpcFleetSynced(ctx, c, n, "", 2*time.Minute)
	if !ok {
		return fmt.Errorf("the %d gRPC clients were not all SYNCED within 2 minutes of answering", n)
	}
	settleTook, _ := waitSettled([]int{lb.cmd.Process.Pid})
	connected := treeUsage(lb.cmd.Process.Pid)
	fleetUsage := treeUsage(fleet.Cmd.Process.Pid)
	var samples []float64
	cpu, clientsCPU := 0.0, 0.0
	note := ""
	// lbplane's CPU profile over the changes (grpc-fleet-n-cpu.top.txt beside the results): where a change's
	// fan-out to n streams spends its time; and the clients' (grpc-fleet-n-clients-cpu.top.txt): where theirs
	// goes, on the same cores.
	profiled := make(chan string, 1)
	go func() {
		profiled <- profile(pprofPort, grpcFleetProfileSeconds, out, fmt.Sprintf("grpc-fleet-%d-cpu", n))
	}()
	clientsProfiled := make(chan string, 1)
	go func() {
		clientsProfiled <- profileAt(clientsPprof, grpcFleetProfileSeconds, out, fmt.Sprintf("grpc-fleet-%d-clients-cpu", n))
	}()
	for i := range grpcFleetChanges {
		u0, f0 := treeUsage(lb.cmd.Process.Pid), treeUsage(fleet.Cmd.Process.Pid)
		sent := time.Now()
		if _, err := c.Apply(ctx, policy(2+i%2), false); err != nil {
			return err
		}
		next, last, ok := grpcFleetSynced(ctx, c, n, version, time.Minute)
		if !ok {
			note = fmt.Sprintf("change %d: not every client acknowledged it within a minute", i+1)
			break
		}
		version = next
		samples = append(samples, float64(last.Sub(sent).Microseconds())/1000)
		cpu += treeUsage(lb.cmd.Process.Pid).CPUSeconds - u0.CPUSeconds
		clientsCPU += treeUsage(fleet.Cmd.Process.Pid).CPUSeconds - f0.CPUSeconds
		if _, settled := waitSettled([]int{lb.cmd.Process.Pid, fleet.Cmd.Process.Pid}); !settled {
			note = "lbplane or the clients were still busy a minute after a change"
		}
	}
	fmt.Fprintln(os.Stderr, <-profiled)
	fmt.Fprintln(os.Stderr, <-clientsProfiled)
	perClient := float64(connected.RSSBytes-idle.RSSBytes) / float64(n) / 1024
	rec := runRecord{Scenario: "grpc-fleet", Peer: "lbplane", API: "sotw", Conns: n, Samples: samples, Valid: note == "", Note: note,
		P50: percentile(samples, 50), P99: percentile(samples, 99), P999: percentile(samples, 100), LbplaneRSS: connected.RSSBytes,
		LbplaneCPUPerChangeMs: cpu * 1000 / float64(max(len(samples), 1)),
		Extra: map[string]float64{"idleRSS": float64(idle.RSSBytes), "rssPerClientKiB": perClient, "connectSeconds": ready.Seconds,
			"settleSeconds": settleTook.Seconds(), "fleetRSSPerClientKiB": float64(fleetUsage.RSSBytes) / float64(n) / 1024,
			"clientsCPUPerChangeMs": clientsCPU * 1000 / float64(max(len(samples), 1))}}
	record(rec)
	fmt.Fprintf(os.Stderr, "gRPC fleet of %d grpc-go xDS clients (connected in %.1f s): %d changes, every client acknowledged each within p50 %.1f ms, max %.1f ms; lbplane %.0f ms CPU per change, the clients' process %.0f ms; RSS %d MiB idle, %d MiB connected: %.1f KiB per client (the clients' process: %.1f KiB each) %s\n",
		n, ready.Seconds, len(samples), rec.P50, rec.P999, rec.LbplaneCPUPerChangeMs, rec.Extra["clientsCPUPerChangeMs"], idle.RSSBytes>>20, connected.RSSBytes>>20, perClient, rec.Extra["fleetRSSPerClientKiB"], note)
	return nil
}

// grpcFleetSynced waits until n gRPC clients are SYNCED on a config other than previous, and returns that
// config's version and the latest time one of them acknowledged a response. It reads lbplane's proxies once a
// second, the first a second after the push: the times are lbplane's own records, so reading them later does
// not change them, and a read of 1,000 proxies during the fan-out takes CPU from what it times.
func grpcFleetSynced(ctx context.Context, c *pushapi.Client, n int, previous string, within time.Duration) (string, time.Time, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Second)
		ps, err := c.Proxies(ctx)
		if err == nil && len(ps) == n {
			var last time.Time
			all := true
			for _, p := range ps {
				if p.State != "SYNCED" || p.Version == previous || p.Version != p.Current {
					all = false
					break
				}
				if p.AckedAt.After(last) {
					last = p.AckedAt
				}
			}
			if all {
				return ps[0].Version, last, true
			}
		}
	}
	return "", time.Time{}, false
}
