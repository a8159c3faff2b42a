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
	r.pairMarkdown(w, "lbplane-envoy", "lbplane-envoy-relaxed", "What the edge hardening costs", "`lbplane-envoy` is lbplane's default (32 KiB connection buffers, header and idle timeouts, header count and size limits, underscore rejection, path normalisation and slash merging, the overload manager with its heap monitor and actions); `lbplane-envoy-relaxed` is the same with all of that set back to Envoy's own defaults (1 MiB buffers, a request-headers timeout of 1 h (the API refuses 0, Envoy's \"none\"), no limit of requests per I/O cycle and 500 streams before a connection with many early resets is closed (through admin `runtime_modify`), headers with underscores allowed, no path normalisation, no heap monitor; the global connection limit stays, as in every peer). Same binary, interleaved runs.",
		"hardened", "relaxed")
}

// accessLogMarkdown sets lbplane's Envoy without an access log (as every peer runs) beside the same with
// lbplane's default JSON access log, when the opt-in peer ran.
func (r *report) accessLogMarkdown(w func(string, ...any)) {
	r.pairMarkdown(w, "lbplane-envoy-accesslog", "lbplane-envoy", "What the access log costs", "`lbplane-envoy` runs with `lbplane serve --access-log=off`, as nginx, HAProxy and Traefik run without theirs; `lbplane-envoy-accesslog` with lbplane's default, one JSON line per request on Envoy's standard output (a file here), naming the policy, route, backend and endpoint. Same binary, interleaved runs; `-only paired -peers lbplane-envoy,lbplane-envoy-accesslog` loads both at once.",
		"with", "without")
}

// pairMarkdown sets peer a beside peer b (throughput and CPU per request at each concurrency, and the CPU
// ratio a / b) under a section title, when both ran (one of them is an opt-in peer).
func (r *report) pairMarkdown(w func(string, ...any), a, b, title, intro, nameA, nameB string) {
	var any bool
	for _, c := range r.Config.Concurrency {
		_, okA := r.find("throughput", a, c)
		_, okB := r.find("throughput", b, c)
		if okA && okB {
			any = true
		}
	}
	if !any {
		return
	}
	w("\n## %s\n\n%s\n\n", title, intro)
	w("| connections | %s req/s | %s req/s | %s CPU µs/req | %s CPU µs/req | CPU ratio %s / %s | runs |\n|---|---|---|---|---|---|---|\n", nameA, nameB, nameA, nameB, nameA, nameB)
	for _, c := range r.Config.Concurrency {
		x, ok1 := r.find("throughput", a, c)
		y, ok2 := r.find("throughput", b, c)
		if !ok1 || !ok2 || y.CPU.Median == 0 {
			continue
		}
		w("| %d | %s | %s | %s | %s | %.3f | %d and %d |\n", c, rng(x.RPS, "%.0f"), rng(y.RPS, "%.0f"), rng(x.CPU, "%.1f"), rng(y.CPU, "%.1f"), x.CPU.Median/y.CPU.Median, x.Runs-x.Invalid, y.Runs-y.Invalid)
	}
}
