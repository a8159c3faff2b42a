package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// hotKeyResult is one run of the bounded-load scenario: a closed loop of requests, each carrying a key in a
// header the peer hashes on; with a hot key, a share of every request carries the same key.
type hotKeyResult struct {
	Peer      string `json:"peer"`
	Algorithm string `json:"algorithm"`
	// Factor is the balance factor in percent of the mean (0: none).
	Factor int `json:"factor"`
	// Workload is "uniform" (every key alike) or "hot" (HotShare of the requests on one key).
	Workload string  `json:"workload"`
	HotShare float64 `json:"hotShare"`
	Rep      int     `json:"rep"`
	Keys     int     `json:"keys"`
	Backends int     `json:"backends"`
	Workers  int     `json:"workers"`
	DelayMs  float64 `json:"backendDelayMs"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	RPS      float64 `json:"rps"`
	// PerBackend counts the requests each backend served.
	PerBackend map[string]int64 `json:"perBackend"`
	// MaxOverMean is the busiest backend's share over the mean share (1/backends).
	MaxOverMean float64 `json:"maxOverMean"`
	// HotHome is where the hot key lands with nothing loaded; HotHomeShare the share of all requests that
	// backend served, HotKeyHome the share of the hot key's own requests it served.
	HotHome      string  `json:"hotHome"`
	HotHomeShare float64 `json:"hotHomeShare"`
	HotKeyHome   float64 `json:"hotKeyOnHome"`
	// The other keys against the baseline (uniform load, no factor, the same peer and algorithm): the share
	// whose usual backend changed, the same among the keys whose home is not the hot key's backend (those
	// the bound should leave alone), and the share of their requests served elsewhere than home.
	KeysMoved       float64 `json:"keysMoved"`
	KeysMovedOffHot float64 `json:"keysMovedOffHotHome"`
	RequestsMoved   float64 `json:"requestsOffHome"`
}

const hotKeyHeader = "x-key"

// hotKeyPeers are the peers with a consistent hash that can be bounded: lbplane (RingHash and Maglev, Envoy's
// hash_balance_factor) and HAProxy (hash-type consistent, hash-balance-factor). nginx and Traefik have no
// bound.
func hotKeyPeers() []*peer {
	var out []*peer
	for _, p := range peers(28700) {
		if p.Name == "lbplane-envoy" || p.Name == "haproxy" {
			out = append(out, p)
		}
	}
	return out
}

// hotKeyScenario runs, for each peer and algorithm and balance factor, a uniform and a hot-key workload,
// repeated and interleaved. The backends answer after a delay, so that requests pile up in flight: both
// bounds count requests (Envoy) or sessions (HAProxy) in flight, not requests served.
func hotKeyScenario(ctx context.Context, e *env, cfg config, rep *report) error {
	const n, base = 5, 28301
	for i := range n {
		addr := fmt.Sprintf("127.0.0.1:%d", base+i)
		pr, err := start(e.dir, backendName(i), nil, filepath.Join(e.bin, "lbplane-backend"), "--listen", addr,
			"--name", backendName(i), "--size", "1024", "--delay", cfg.HotKeyDelay.String())
		if err != nil {
			return err
		}
		e.backendProcs = append(e.backendProcs, pr)
		e.backends = append(e.backends, addr)
		if err := waitPort(addr, 10*time.Second); err != nil {
			return err
		}
	}
	defer e.stopBackends()
	// The baseline of each peer and algorithm: every key's backend under uniform load without a factor.
	homes := map[string]map[string]string{}
	factors := append([]int{0}, cfg.HotKeyFactors...)
	for r := range cfg.HotKeyReps {
		for _, p := range hotKeyPeers() {
			if !cfg.runs(nil, p.Name) {
				continue
			}
			algos := []string{""}
			if p.Name == "lbplane-envoy" {
				algos = cfg.HotKeyAlgorithms
			}
			for _, algo := range algos {
				name := p.Name
				if algo != "" {
					name += " " + algo
				}
				for _, f := range factors {
					p.vars = map[string]any{"Hash": "yes", "HashHeader": hotKeyHeader, "BalanceFactor": f}
					if algo != "" {
						p.vars["Hash"] = algo
					}
					rs, err := hotKeyOne(ctx, e, cfg, p, name, f, r, homes)
					p.stop()
					if err != nil {
						return fmt.Errorf("bounded load %s factor %d: %w", name, f, err)
					}
					for _, res := range rs {
						res.Algorithm = hotKeyAlgorithm(p.Name, algo, f)
						rep.HotKey = append(rep.HotKey, res)
						fmt.Fprintf(os.Stderr, "hotkey      %-22s factor %3d %-7s rep %d: busiest/mean %.2f, hot home %s %.1f %%, hot key on home %.1f %%, keys moved %.1f %% (off the hot home %.1f %%), %.0f req/s, errors %d\n",
							name, f, res.Workload, r, res.MaxOverMean, res.HotHome, res.HotHomeShare*100, res.HotKeyHome*100, res.KeysMoved*100, res.KeysMovedOffHot*100, res.RPS, res.Errors)
					}
				}
			}
		}
	}
	return ctx.Err()
}

func hotKeyAlgorithm(peer, algo string, factor int) string {
	s := "hash-type consistent, balance hdr(" + hotKeyHeader + ")"
	if peer == "lbplane-envoy" {
		s = algo + ", hashKeys header " + hotKeyHeader
	}
	if factor > 0 {
		if peer == "lbplane-envoy" {
			return s + ", hashBalanceFactor " + strconv.Itoa(factor)
		}
		return s + ", hash-balance-factor " + strconv.Itoa(factor)
	}
	return s
}

// hotKeyOne starts p, finds the hot key's home with nothing loaded, and runs the uniform then the hot
// workload. homes holds each peer's baseline, set by its first uniform run without a factor.
func hotKeyOne(ctx context.Context, e *env, cfg config, p *peer, name string, factor, r int, homes map[string]map[string]string) ([]hotKeyResult, error) {
	if err := p.start(e, p); err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort)
	if err := waitServing(ctx, url, len(e.backends)); err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.HotKeyWorkers, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// One request at a time: nothing in flight, so no bound applies and the key goes home.
	hotHome, err := keyed(client, url, "hot")
	if err != nil {
		return nil, err
	}
	var out []hotKeyResult
	for _, hot := range []float64{0, cfg.HotKeyShare} {
		res := hotKeyResult{Peer: name, Factor: factor, Workload: "uniform", Rep: r, Keys: cfg.HotKeyKeys, Backends: len(e.backends),
			Workers: cfg.HotKeyWorkers, DelayMs: float64(cfg.HotKeyDelay) / 1e6, HotHome: hotHome}
		if hot > 0 {
			res.Workload, res.HotShare = "hot", hot
		}
		perKey, took, errs := keyedLoad(ctx, client, url, cfg.HotKeyWorkers, cfg.HotKeyRequests, cfg.HotKeyKeys, hot, uint64(r))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.Errors = errs
		if homes[name] == nil && factor == 0 && hot == 0 {
			homes[name] = map[string]string{}
			for k, m := range perKey {
				homes[name][k], _ = usual(m)
			}
		}
		summarizeHotKey(&res, perKey, homes[name], e.backends)
		res.RPS = float64(res.Requests) / took.Seconds()
		out = append(out, res)
	}
	return out, nil
}

// summarizeHotKey fills res's spread and movements from each key's requests per backend; home is the
// baseline (nil: the movements are not counted).
func summarizeHotKey(res *hotKeyResult, perKey map[string]map[string]int, home map[string]string, backends []string) {
	res.PerBackend = map[string]int64{}
	var hotOnHome, hotAll int64
	var moved, movedOff, keys, keysOff, reqOff, reqAll int
	for k, m := range perKey {
		for b, c := range m {
			res.PerBackend[b] += int64(c)
			res.Requests += int64(c)
		}
		if k == "hot" {
			for b, c := range m {
				hotAll += int64(c)
				if b == res.HotHome {
					hotOnHome += int64(c)
				}
			}
			continue
		}
		h, ok := home[k]
		if !ok {
			continue
		}
		now, _ := usual(m)
		keys++
		if now != h {
			moved++
		}
		if h != res.HotHome {
			keysOff++
			if now != h {
				movedOff++
			}
		}
		for b, c := range m {
			reqAll += c
			if b != h {
				reqOff += c
			}
		}
	}
	if res.Requests == 0 {
		return
	}
	var most int64
	for i := range backends {
		most = max(most, res.PerBackend[backendName(i)])
	}
	res.MaxOverMean = float64(most) / (float64(res.Requests) / float64(len(backends)))
	res.HotHomeShare = float64(res.PerBackend[res.HotHome]) / float64(res.Requests)
	if hotAll > 0 {
		res.HotKeyHome = float64(hotOnHome) / float64(hotAll)
	}
	if keys > 0 {
		res.KeysMoved = float64(moved) / float64(keys)
	}
	if keysOff > 0 {
		res.KeysMovedOffHot = float64(movedOff) / float64(keysOff)
	}
	if reqAll > 0 {
		res.RequestsMoved = float64(reqOff) / float64(reqAll)
	}
}

// keyed sends one request with key in the hashed header and returns the backend that answered.
func keyed(c *http.Client, url, key string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set(hotKeyHeader, key)
	return answeredBy(c, req)
}

// keyedLoad has workers send total requests in a closed loop, each request's key "hot" with probability hot
// and otherwise one of keys, uniformly (seeded: every run draws the same sequence per worker); it returns
// each key's requests per backend, the time taken and the failed requests.
func keyedLoad(ctx context.Context, c *http.Client, url string, workers, total, keys int, hot float64, seed uint64) (map[string]map[string]int, time.Duration, int64) {
	var next, errs atomic.Int64
	parts := make([]map[string]map[string]int, workers)
	var wg sync.WaitGroup
	began := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			draw := rand.New(rand.NewPCG(seed, uint64(w)))
			m := map[string]map[string]int{}
			for ctx.Err() == nil && next.Add(1) <= int64(total) {
				key := "hot"
				if draw.Float64() >= hot {
					key = "k" + strconv.Itoa(draw.IntN(keys))
				}
				b, err := keyed(c, url, key)
				if err != nil {
					errs.Add(1)
					continue
				}
				if m[key] == nil {
					m[key] = map[string]int{}
				}
				m[key][b]++
			}
			parts[w] = m
		}()
	}
	wg.Wait()
	took := time.Since(began)
	out := map[string]map[string]int{}
	for _, m := range parts {
		for k, bs := range m {
			if out[k] == nil {
				out[k] = map[string]int{}
			}
			for b, n := range bs {
				out[k][b] += n
			}
		}
	}
	return out, took, errs.Load()
}

// hotKeyRow is the runs of one peer, algorithm, factor and workload: medians with min and max.
type hotKeyRow struct {
	Peer, Algorithm, Workload         string
	Factor, Runs                      int
	MaxOverMean, HotHomeShare, HotKey stat3
	KeysMoved, KeysMovedOffHot        stat3
	RequestsMoved, RPS                stat3
	Errors                            int64
}

func hotKeyRows(rs []hotKeyResult) []hotKeyRow {
	type key struct {
		peer, workload string
		factor         int
	}
	groups := map[key][]hotKeyResult{}
	var order []key
	for _, r := range rs {
		k := key{r.Peer, r.Workload, r.Factor}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	// The uniform rows first, then the hot ones, each peer's factors together.
	slices.SortStableFunc(order, func(a, b key) int {
		if a.workload != b.workload {
			if a.workload == "uniform" {
				return -1
			}
			return 1
		}
		return 0
	})
	var out []hotKeyRow
	for _, k := range order {
		g := groups[k]
		row := hotKeyRow{Peer: k.peer, Algorithm: g[0].Algorithm, Workload: k.workload, Factor: k.factor, Runs: len(g)}
		pick := func(f func(hotKeyResult) float64) stat3 {
			var xs []float64
			for _, r := range g {
				xs = append(xs, f(r))
			}
			return stats(xs)
		}
		row.MaxOverMean = pick(func(r hotKeyResult) float64 { return r.MaxOverMean })
		row.HotHomeShare = pick(func(r hotKeyResult) float64 { return r.HotHomeShare * 100 })
		row.HotKey = pick(func(r hotKeyResult) float64 { return r.HotKeyHome * 100 })
		row.KeysMoved = pick(func(r hotKeyResult) float64 { return r.KeysMoved * 100 })
		row.KeysMovedOffHot = pick(func(r hotKeyResult) float64 { return r.KeysMovedOffHot * 100 })
		row.RequestsMoved = pick(func(r hotKeyResult) float64 { return r.RequestsMoved * 100 })
		row.RPS = pick(func(r hotKeyResult) float64 { return r.RPS })
		for _, r := range g {
			row.Errors += r.Errors
		}
		out = append(out, row)
	}
	return out
}

func (r *report) hotKeyMarkdown(w func(string, ...any)) {
	if len(r.HotKey) == 0 {
		return
	}
	h := r.HotKey[0]
	var hot float64
	for _, x := range r.HotKey {
		hot = max(hot, x.HotShare)
	}
	w("\n## Bounded-load hashing: one hot key\n\n%d workers send %d requests in a closed loop through a consistent hash on the header `%s`, to %d backends that answer after %.0f ms (so that requests pile up in flight, which is what both bounds count); *uniform*: each request's key is one of %d, uniformly; *hot*: %.0f %% of the requests carry one key, `hot`, the rest are uniform over the %d. Each setting runs %d times, interleaved (a fresh peer process per factor); medians with (min–max). *Busiest / mean*: the busiest backend's share of the requests over the mean share (1/%d); the goal of a factor f is at most f/100. *Hot home*: the backend the hot key lands on when nothing is in flight, and its share of all requests; *hot key at home*: the share of the hot key's own requests it served. *Keys moved*: the other keys whose usual backend differs from the baseline (the same peer's uniform run without a factor); *off the hot home*: the same among the keys whose home is not the hot key's backend (the bound should leave those alone); *requests off home*: the other keys' requests served elsewhere than home.\n\n",
		h.Workers, r.Config.HotKeyRequests, hotKeyHeader, h.Backends, h.DelayMs, h.Keys, hot*100, h.Keys, r.Config.HotKeyReps, h.Backends)
	w("| peer | workload | factor | busiest / mean | hot home's share %% | hot key at home %% | keys moved %% | off the hot home %% | requests off home %% | requests/s | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range hotKeyRows(r.HotKey) {
		f := "none"
		if x.Factor > 0 {
			f = strconv.Itoa(x.Factor)
		}
		hk := "-"
		if x.Workload == "hot" {
			hk = rng(x.HotKey, "%.0f")
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %d |\n", x.Peer, x.Workload, f, rng(x.MaxOverMean, "%.2f"), rng(x.HotHomeShare, "%.1f"), hk,
			rng(x.KeysMoved, "%.1f"), rng(x.KeysMovedOffHot, "%.1f"), rng(x.RequestsMoved, "%.1f"), x.RPS.Median, x.Errors)
	}
	w("\n![bounded load](hotkey.png)\n")
}
