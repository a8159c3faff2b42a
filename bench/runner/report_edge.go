package main

// memoryMarkdown is the memory-at-load table: each row a fresh peer process.
func (r *report) memoryMarkdown(w func(string, ...any)) {
	rows := r.rows("memory")
	if len(rows) == 0 {
		return
	}
	w("\n## Memory at each load (a fresh process per peer and connection count)\n\nEach peer is started anew for each connection count, answers one request, and its idle resident memory (whole process tree) is read a second later; then wrk holds that many keep-alive connections for %s while the RSS is sampled every 250 ms. *Per connection* is (peak − idle) / connections: what the load itself cost, nothing carried over from other runs.\n\n", r.Config.MemDuration)
	w("| peer | connections | idle RSS MiB | peak RSS at this load MiB | increase MiB | KiB per connection | requests/s | CPU µs/request | valid runs |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range rows {
		inc := s.RSS.Median - s.IdleRSS.Median
		w("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.1f | %d of %d |\n", s.Peer, s.Conns, s.IdleRSS.Median/(1<<20), s.RSS.Median/(1<<20), inc/(1<<20), inc/1024/float64(s.Conns), s.RPS.Median, s.CPU.Median, s.Runs-s.Invalid, s.Runs)
	}
}

// hardeningMarkdown sets lbplane's Envoy with its edge defaults beside the same with them relaxed, when the
// opt-in relaxed peer ran.
func (r *report) hardeningMarkdown(w func(string, ...any)) {
	var any bool
	for _, c := range r.Config.Concurrency {
		if _, ok := r.find("throughput", "lbplane-envoy-relaxed", c); ok {
			any = true
		}
	}
	if !any {
		return
	}
	w("\n## What the edge hardening costs\n\n`lbplane-envoy` is lbplane's default (32 KiB connection buffers, header and idle timeouts, header count and size limits, underscore rejection, path normalisation and slash merging, the overload manager with its heap monitor and actions); `lbplane-envoy-relaxed` is the same with all of that set back to Envoy's own defaults (1 MiB buffers, a request-headers timeout of 1 h (the API refuses 0, Envoy's \"none\"), no limit of requests per I/O cycle and 500 streams before a connection with many early resets is closed (through admin `runtime_modify`), headers with underscores allowed, no path normalisation, no heap monitor; the global connection limit stays, as in every peer). Same binary, interleaved runs.\n\n")
	w("| connections | hardened req/s | relaxed req/s | hardened CPU µs/req | relaxed CPU µs/req | CPU ratio hardened / relaxed | runs |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.Config.Concurrency {
		h, ok1 := r.find("throughput", "lbplane-envoy", c)
		x, ok2 := r.find("throughput", "lbplane-envoy-relaxed", c)
		if !ok1 || !ok2 || x.CPU.Median == 0 {
			continue
		}
		w("| %d | %s | %s | %s | %s | %.3f | %d and %d |\n", c, rng(h.RPS, "%.0f"), rng(x.RPS, "%.0f"), rng(h.CPU, "%.1f"), rng(x.CPU, "%.1f"), h.CPU.Median/x.CPU.Median, h.Runs-h.Invalid, x.Runs-x.Invalid)
	}
}

// accessLogMarkdown sets lbplane's Envoy without an access log (as every peer runs) beside the same with
// lbplane's default JSON access log, when the opt-in peer ran.
func (r *report) accessLogMarkdown(w func(string, ...any)) {
	var any bool
	for _, c := range r.Config.Concurrency {
		if _, ok := r.find("throughput", "lbplane-envoy-accesslog", c); ok {
			any = true
		}
	}
	if !any {
		return
	}
	w("\n## What the access log costs\n\n`lbplane-envoy` runs with `lbplane serve --access-log=off`, as nginx, HAProxy and Traefik run without theirs; `lbplane-envoy-accesslog` with lbplane's default, one JSON line per request on Envoy's standard output (a file here), naming the policy, route, backend and endpoint. Same binary, interleaved runs; `-only paired -peers lbplane-envoy,lbplane-envoy-accesslog` loads both at once.\n\n")
	w("| connections | without req/s | with req/s | without CPU µs/req | with CPU µs/req | CPU ratio with / without | runs |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.Config.Concurrency {
		off, ok1 := r.find("throughput", "lbplane-envoy", c)
		on, ok2 := r.find("throughput", "lbplane-envoy-accesslog", c)
		if !ok1 || !ok2 || off.CPU.Median == 0 {
			continue
		}
		w("| %d | %s | %s | %s | %s | %.3f | %d and %d |\n", c, rng(off.RPS, "%.0f"), rng(on.RPS, "%.0f"), rng(off.CPU, "%.1f"), rng(on.CPU, "%.1f"), on.CPU.Median/off.CPU.Median, off.Runs-off.Invalid, on.Runs-on.Invalid)
	}
}
