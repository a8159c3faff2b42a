package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// hashResult is one peer's hash persistence: clients distinguished by their source address (every peer can
// hash on it; each client its own 127.10.x.y), each sending its requests over several connections.
type hashResult struct {
	Peer              string `json:"peer"`
	Algorithm         string `json:"algorithm"`
	Clients           int    `json:"clients"`
	RequestsPerClient int    `json:"requestsPerClient"`
	Backends          int    `json:"backends"`
	Requests          int64  `json:"requests"`
	Errors            int64  `json:"errors"`
	// Persistence is the share of requests that went to their client's usual backend; FullyPersistent the
	// clients whose every request went to one backend.
	Persistence     float64 `json:"persistence"`
	FullyPersistent int     `json:"fullyPersistentClients"`
	// ClientsPerBackend counts clients by their usual backend; SpreadCV is its coefficient of variation and
	// MaxOverIdeal the busiest backend's count over clients/backends.
	ClientsPerBackend map[string]int `json:"clientsPerBackend"`
	SpreadCV          float64        `json:"spreadCv"`
	MaxOverIdeal      float64        `json:"maxOverIdeal"`
	// When one backend leaves: the clients that were on it, the clients whose backend changed, and those
	// among them whose backend had not left (ideally none).
	Removed        string  `json:"removed"`
	OnRemoved      int     `json:"clientsOnRemoved"`
	Remapped       int     `json:"remapped"`
	RemappedOthers int     `json:"remappedOthers"`
	RemapShare     float64 `json:"remapShare"`
	IdealShare     float64 `json:"idealShare"` // 1/N
	Note           string  `json:"note,omitempty"`
}

// balancingPeers are the peers the hash and health scenarios run, each with a hash on the client address. The static
// Envoy is left out: it is the same binary with the same ring as lbplane's, which hashing cannot tell apart.
func balancingPeers(base int) []*peer {
	var out []*peer
	for _, p := range peers(base) {
		switch p.Name {
		case "lbplane-envoy", "lbplane-envoy-before17", "nginx", "haproxy", "traefik":
			out = append(out, p)
		}
	}
	return out
}

var hashAlgorithms = map[string]string{"RingHash": "RingHash, hashKeys sourceIP", "Maglev": "Maglev, hashKeys sourceIP",
	"nginx": "hash $remote_addr consistent", "haproxy": "balance source, hash-type consistent", "traefik": "strategy hrw (client IP)"}

func clientIP(i int) net.IP { return net.IPv4(127, 10, byte(i/250), byte(i%250+1)) }

// clientFor is an HTTP client whose connections come from ip.
func clientFor(ip net.IP) (*http.Client, *http.Transport) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 2 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 1, DisableCompression: true}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, tr
}

// get sends one request and returns the backend that answered (X-Backend), or an error.
func get(c *http.Client, url string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	return answeredBy(c, req)
}

// answeredBy sends req and returns the backend that answered (X-Backend); a status other than 200 is an
// error.
func answeredBy(c *http.Client, req *http.Request) (string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Backend"), nil
}

// sendAll has every client send perClient requests, a new connection every perConn; it returns each
// client's count per backend and the number of failed requests.
func sendAll(ctx context.Context, url string, clients, perClient, perConn int) ([]map[string]int, int64) {
	counts := make([]map[string]int, clients)
	var errs atomic.Int64
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= clients {
					return
				}
				c, tr := clientFor(clientIP(i))
				m := map[string]int{}
				for k := range perClient {
					if k > 0 && k%perConn == 0 {
						tr.CloseIdleConnections()
					}
					b, err := get(c, url)
					if err != nil {
						errs.Add(1)
						continue
					}
					m[b]++
				}
				tr.CloseIdleConnections()
				counts[i] = m
			}
		}()
	}
	wg.Wait()
	return counts, errs.Load()
}

func usual(m map[string]int) (string, int) {
	best, n := "", 0
	for _, k := range sortedKeys(m) {
		if m[k] > n {
			best, n = k, m[k]
		}
	}
	return best, n
}

// hashScenario measures persistence and spread with every backend, then which clients move when the
// third of them leaves.
func hashScenario(ctx context.Context, e *env, cfg config, rep *report) error {
	all := slices.Clone(e.backends)
	for _, p := range balancingPeers(28500) {
		if !cfg.runs(nil, p.Name) || p.optIn {
			continue
		}
		algos := []string{""}
		if p.Name == "lbplane-envoy" {
			algos = []string{"RingHash", "Maglev"}
		}
		for _, algo := range algos {
			if cfg.Quick && algo == "Maglev" {
				continue
			}
			e.backends = all
			p.vars = map[string]any{"Hash": cmp.Or(algo, "yes")}
			res, err := hashOne(ctx, e, cfg, p, all)
			p.stop()
			e.backends = all
			if err != nil {
				return fmt.Errorf("hash %s: %w", p.Name, err)
			}
			key := algo
			if key == "" {
				key = p.Name
			}
			res.Algorithm = hashAlgorithms[key]
			rep.Hash = append(rep.Hash, res)
			fmt.Fprintf(os.Stderr, "hash        %-14s %-9s persistence %.4f, spread cv %.3f, remapped %.3f (ideal %.3f, others moved %d) errors %d\n",
				p.Name, algo, res.Persistence, res.SpreadCV, res.RemapShare, res.IdealShare, res.RemappedOthers, res.Errors)
		}
	}
	return ctx.Err()
}

func hashOne(ctx context.Context, e *env, cfg config, p *peer, all []string) (hashResult, error) {
	res := hashResult{Peer: p.Name, Clients: cfg.HashClients, RequestsPerClient: cfg.HashRequests, Backends: len(all)}
	if p.Name == "lbplane-envoy" {
		res.Peer = "lbplane-envoy " + p.vars["Hash"].(string)
	}
	if err := p.start(e, p); err != nil {
		return res, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort)
	if err := waitServing(ctx, url, len(all)); err != nil {
		return res, err
	}
	counts, errs := sendAll(ctx, url, cfg.HashClients, cfg.HashRequests, 10)
	res.Errors = errs
	res.ClientsPerBackend = map[string]int{}
	before := make([]string, len(counts))
	var kept int64
	for i, m := range counts {
		b, n := usual(m)
		before[i] = b
		res.ClientsPerBackend[b]++
		kept += int64(n)
		for _, c := range m {
			res.Requests += int64(c)
		}
		if n == cfg.HashRequests {
			res.FullyPersistent++
		}
	}
	if res.Requests > 0 {
		res.Persistence = float64(kept) / float64(res.Requests)
	}
	ideal := float64(cfg.HashClients) / float64(len(all))
	var sum, sq, most float64
	for _, b := range all {
		n := float64(res.ClientsPerBackend[backendName(slices.Index(all, b))])
		sum += n
		sq += n * n
		most = max(most, n)
	}
	mean := sum / float64(len(all))
	res.SpreadCV = math.Sqrt(max(0, sq/float64(len(all))-mean*mean)) / mean
	res.MaxOverIdeal = most / ideal

	// One of N leaves: the peer gets the same configuration without it, as its users would change it.
	gone := all[2]
	res.Removed = backendName(slices.Index(all, gone))
	e.backends = slices.Delete(slices.Clone(all), 2, 3)
	if p.Name == "lbplane-envoy" {
		if err := pushBenchPolicies(e, p); err != nil {
			return res, err
		}
	} else {
		p.stop()
		if err := p.start(e, p); err != nil {
			return res, err
		}
	}
	if err := waitGone(ctx, url, res.Removed); err != nil {
		return res, err
	}
	after, errs := sendAll(ctx, url, cfg.HashClients, 10, 10)
	res.Errors += errs
	for i, m := range after {
		b, _ := usual(m)
		if before[i] == res.Removed {
			res.OnRemoved++
		}
		if b != before[i] {
			res.Remapped++
			if before[i] != res.Removed {
				res.RemappedOthers++
			}
		}
	}
	res.RemapShare = float64(res.Remapped) / float64(cfg.HashClients)
	res.IdealShare = float64(res.OnRemoved) / float64(cfg.HashClients)
	return res, nil
}

// waitServing waits until requests from many client addresses have reached n distinct backends.
func waitServing(ctx context.Context, url string, n int) error {
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		c, tr := clientFor(clientIP(5000 + i%1000))
		if b, err := get(c, url); err == nil {
			seen[b] = true
		}
		tr.CloseIdleConnections()
		if len(seen) >= n {
			return nil
		}
		if i%50 == 49 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return fmt.Errorf("%s reached %d of %d backends in 30s", url, len(seen), n)
}

// waitGone waits until 200 requests in a row from many client addresses avoid the removed backend.
func waitGone(ctx context.Context, url, removed string) error {
	deadline := time.Now().Add(30 * time.Second)
	clean := 0
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		c, tr := clientFor(clientIP(5000 + i%1000))
		b, err := get(c, url)
		tr.CloseIdleConnections()
		if err == nil && b != removed {
			clean++
		} else {
			clean = 0
		}
		if clean >= 200 {
			return nil
		}
	}
	return fmt.Errorf("%s still reaches %s after 30s", url, removed)
}
