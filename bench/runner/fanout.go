package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lbplane/lbplane/controlplane/pushapi"
)

const fanoutBase = 29360 // xDS, API, metrics (pprof)

// fanOut is the fan-out row on its own: for each client count a fresh lbplane with only the probe policy,
// its RSS with no client, then n simulated delta clients (simDelta, as the swarm row's, each its own gRPC
// connection), its RSS with all of them connected and acknowledged, and one cluster change timed from the
// push sent until every client has it. lbplane's heap is profiled with every client connected, and its
// CPU while the change spreads.
func fanOut(ctx context.Context, e *env, counts []int, out string, record func(runRecord)) error {
	for _, n := range counts {
		if err := fanOutOnce(ctx, e, n, out, record); err != nil {
			return err
		}
	}
	return nil
}

func fanOutOnce(ctx context.Context, e *env, n int, out string, record func(runRecord)) error {
	dir := filepath.Join(e.dir, fmt.Sprintf("fanout-%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	xds, apiAddr := fmt.Sprintf("127.0.0.1:%d", fanoutBase), fmt.Sprintf("127.0.0.1:%d", fanoutBase+1)
	pprofPort := fanoutBase + 2
	args := append(serveArgs(dir, xds, apiAddr, "--xds-max-connections", "-1"), pprofArgs(pprofPort)...)
	lb, err := serveLbplane(e, dir, apiAddr, 60*time.Second, args)
	if err != nil {
		return err
	}
	defer lb.stop()
	c := &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: time.Minute}}
	if _, err := c.Apply(ctx, probe("28091", 1), false); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the first publish settles; idle is lbplane with its config and no client
	idle := treeUsage(lb.cmd.Process.Pid)

	var mu sync.Mutex
	var changeAt time.Time
	arrivals := make(chan time.Duration, n)
	ready := make(chan struct{}, n)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	conns := make([]*grpc.ClientConn, 0, n)
	defer func() {
		cancel()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	connectStart := time.Now()
	for i := range n {
		conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		conns = append(conns, conn)
		node := &corev3.Node{Id: fmt.Sprintf("sim-%d", i), Cluster: "default"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			simDelta(sctx, conn, node, arrival(ready, &mu, &changeAt, arrivals))
		}()
	}
	// Clients that have no first config after 5 minutes are counted and left out (a run with 10,000 on a
	// loaded machine had some that never got one); the push API tells how many streams lbplane holds.
	readyN := 0
	readyBy := time.After(5 * time.Minute)
connecting:
	for readyN < n {
		select {
		case <-ready:
			readyN++
		case <-readyBy:
			break connecting
		}
	}
	connectTook := time.Since(connectStart)
	streams := -1
	if ps, err := c.Proxies(ctx); err == nil {
		streams = len(ps)
	}
	note := ""
	if readyN < n {
		note = fmt.Sprintf("%d of %d simulated Envoys got a first config within 5 minutes (lbplane holds %d streams); the change is timed to those", readyN, n, streams)
		fmt.Fprintln(os.Stderr, "fan-out: "+note)
	}
	time.Sleep(2 * time.Second)
	connected := treeUsage(lb.cmd.Process.Pid)
	heapTop := profile(pprofPort, 0, out, fmt.Sprintf("fanout-%d-heap", n))
	var cpuTop string
	profDone := make(chan struct{})
	go func() { defer close(profDone); cpuTop = profile(pprofPort, 15, out, fmt.Sprintf("fanout-%d-cpu", n)) }()
	time.Sleep(500 * time.Millisecond) // the CPU profile has started
	before := treeUsage(lb.cmd.Process.Pid)
	mu.Lock()
	changeAt = time.Now()
	mu.Unlock()
	if _, err := c.Apply(ctx, probe("28091", 7), false); err != nil {
		return err
	}
	samples := collectArrivals(arrivals, readyN, 2*time.Minute)
	if len(samples) < readyN {
		note += fmt.Sprintf("; only %d of %d simulated Envoys got the change within 2 minutes", len(samples), readyN)
	}
	after := treeUsage(lb.cmd.Process.Pid)
	<-profDone
	perClient := float64(connected.RSSBytes-idle.RSSBytes) / float64(n) / 1024
	rec := runRecord{Scenario: "fanout", Peer: "lbplane", API: "delta", Conns: n, Samples: samples, Valid: note == "", Note: note,
		P50: percentile(samples, 50), P99: percentile(samples, 99), P999: percentile(samples, 100), LbplaneRSS: connected.RSSBytes,
		LbplaneCPUPerChangeMs: (after.CPUSeconds - before.CPUSeconds) * 1000,
		Extra: map[string]float64{"idleRSS": float64(idle.RSSBytes), "rssPerClientKiB": perClient, "connectSeconds": connectTook.Seconds(),
			"got": float64(len(samples)), "ready": float64(readyN), "streams": float64(streams), "runnerGoroutines": float64(runtime.NumGoroutine())}}
	record(rec)
	fmt.Fprintf(os.Stderr, "fan-out %d simulated delta Envoys (connected in %.1f s): change reaches p50 %.1f ms, p99 %.1f ms, all %.1f ms (%d got it); lbplane %.0f ms CPU for the change; RSS %d MiB idle, %d MiB connected: %.1f KiB per client %s\n%s\n%s\n",
		n, connectTook.Seconds(), rec.P50, rec.P99, rec.P999, len(samples), rec.LbplaneCPUPerChangeMs, idle.RSSBytes>>20, connected.RSSBytes>>20, perClient, note, heapTop, cpuTop)
	return nil
}
