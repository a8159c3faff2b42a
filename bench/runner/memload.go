package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// memoryAtLoad measures each peer's memory at each connection count in a process that has served nothing
// else: a fresh peer per count, its idle RSS after one request, then wrk at that count with the RSS sampled.
// A peer that served earlier, larger runs keeps what it allocated for them (allocators rarely give memory
// back), so the throughput runs' RSS is a high-water mark over the whole run, not the memory at that load.
func memoryAtLoad(ctx context.Context, e *env, cfg config, rep *report, record func(runRecord)) error {
	if err := startBackends(e, 3, 28301); err != nil {
		return err
	}
	defer e.stopBackends()
	for _, c := range cfg.MemConcurrency {
		if c > e.maxConn {
			return fmt.Errorf("memory at %d connections: the open-file limit allows %d per peer", c, e.maxConn)
		}
	}
	epoch := time.Now()
	for _, p := range peers(28400) {
		if p.Name == "direct" || !cfg.runs(cfg.MemPeers, p.Name) || (len(cfg.Peers) == 0 && (p.optIn || p.Name == "lbplane-envoy-lean")) {
			continue
		}
		for _, c := range cfg.MemConcurrency {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rec, err := memoryOne(ctx, e, cfg, p, c, epoch)
			p.stop()
			if err != nil {
				return fmt.Errorf("memory %s c=%d: %w", p.Name, c, err)
			}
			record(rec)
			fmt.Fprintf(os.Stderr, "memory      %-14s c=%-5d idle %6.1f MiB  at load %6.1f MiB  +%.1f KiB/connection  %8.0f req/s  errors %d %s\n",
				p.Name, c, float64(rec.IdleRSSBytes)/(1<<20), float64(rec.PeakRSSBytes)/(1<<20),
				float64(rec.PeakRSSBytes-rec.IdleRSSBytes)/1024/float64(c), rec.RPS, rec.Errors, rec.Note)
		}
	}
	return nil
}

func memoryOne(ctx context.Context, e *env, cfg config, p *peer, conns int, epoch time.Time) (runRecord, error) {
	rec := runRecord{Scenario: "memory", Peer: p.Name, Conns: conns, Protocol: "http"}
	if err := p.start(e, p); err != nil {
		return rec, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort)
	// The path works (Traefik answers 404 until it has loaded its routes) and what is allocated once is.
	if !waitFor(20*time.Second, func() bool { return get200(url) }) {
		return rec, fmt.Errorf("no 200 from %s", url)
	}
	time.Sleep(time.Second)
	rec.IdleRSSBytes = treeUsage(p.pid()).RSSBytes
	s := sample(ctx, p.pid(), 250*time.Millisecond, epoch)
	before := treeUsage(p.pid())
	res, gen, err := runWrk(ctx, e, url, conns, cfg.MemDuration)
	after := treeUsage(p.pid())
	rec.PeakRSSBytes, _ = s.stop()
	if err != nil {
		rec.Note = err.Error()
		return rec, nil
	}
	rec.RPS, rec.Requests, rec.Errors = res.rps(), res.Requests, res.errors()
	rec.P50, rec.P99 = res.LatencyUS.P50/1000, res.LatencyUS.P99/1000
	if res.Requests > 0 {
		rec.CPUMicrosPerRequest = (after.CPUSeconds - before.CPUSeconds) * 1e6 / float64(res.Requests)
	}
	rec.LoadGenCoreShare = gen.CPUSeconds / cfg.MemDuration.Seconds()
	rec.Valid = res.Requests > 0 && rec.Errors*100 < res.Requests
	if !rec.Valid {
		rec.Note = fmt.Sprintf("%d of %d requests failed", rec.Errors, res.Requests)
	}
	return rec, nil
}

// get200 tells whether one GET of url answers 200; a failure waits a little before the caller tries again.
func get200(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
	}
	time.Sleep(100 * time.Millisecond)
	return false
}

// envoyAllocated is what Envoy's allocator says the process has in use (admin /memory "allocated"): the
// part of its RSS that is live objects, without what tcmalloc keeps cached or unreturned. 0 when adminPort
// is not an Envoy admin.
func envoyAllocated(adminPort int) int64 {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/memory", adminPort))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var m struct {
		Allocated string `json:"allocated"`
	}
	if json.NewDecoder(resp.Body).Decode(&m) != nil {
		return 0
	}
	n, _ := strconv.ParseInt(m.Allocated, 10, 64)
	return n
}

// setEnvoyRuntime sets runtime keys through Envoy's admin (its admin layer overrides the bootstrap's static
// one): how the relaxed peer undoes lbplane's runtime hardening, and how -envoy-runtime tries a key.
func setEnvoyRuntime(adminPort int, kv map[string]string) error {
	if len(kv) == 0 {
		return nil
	}
	q := url.Values{}
	for k, v := range kv {
		q.Set(k, v)
	}
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/runtime_modify?%s", adminPort, q.Encode()), "text/plain", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("runtime_modify: %s: %s", resp.Status, b)
	}
	return nil
}

// saveHeapDump writes Envoy's tcmalloc heap profile (admin /heap_dump, pprof format) to path: with every
// connection of a step open, the sizes of the objects they hold.
func saveHeapDump(adminPort int, path string) error {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/heap_dump", adminPort))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
