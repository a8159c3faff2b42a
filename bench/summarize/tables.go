package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lbplane/lbplane/bench/internal/gatewaybench"
)

// renderers are the kinds of table a marker can ask for. Each reads the marker's src files and returns the
// markdown table, one line each, ending in a newline.
var renderers = map[string]func(spec) (string, error){
	"throughput":  throughputTable,
	"static":      staticTable,
	"propagation": propagationTable,
	"coldstart":   coldStartTable,
	"churn":       churnTable,
	// The same row as a storm: EDS responses per client and convergence, per --endpoint-update-interval.
	"churn-storm": churnStormTable,
	"fanout":      fanoutTable,
	// Proxyless grpc-go clients on one lbplane (runner -only grpc-fleet).
	"grpc-fleet": grpcFleetTable,
	// The fan-out across lbplane replicas on etcd (runner -fanout-replicas); option api=sotw for the
	// state-of-the-world clients' runs (default delta).
	"fanout-replicas": fanoutReplicasTable,
	// A replica killed and restarted among others with a maximum connection age (runner -fanout-rebalance).
	"fanout-rebalance": fanoutRebalanceTable,
	// Clients connecting and leaving under a stream of changes (runner -fanout-churn).
	"fanout-churn": fanoutChurnTable,
	"health":       healthTable,
	"hotkey":       hotKeyTable,
	"memory":       memoryTable,
	"websocket":    webSocketTable,
	"paired":       pairedTable,
	"wsmem":        wsmemTable,

	// Gateway API HTTPRoutes (runner -only gateway-routes): part=propagation, churn or memory.
	"gateway-routes": gatewayRoutesTable,
}

type md struct{ strings.Builder }

func (m *md) row(cells ...string) {
	m.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func (m *md) header(cells ...string) {
	m.row(cells...)
	m.WriteString("|" + strings.Repeat("---|", len(cells)) + "\n")
}

func f0(x float64) string  { return strconv.FormatFloat(x, 'f', 0, 64) }
func f1(x float64) string  { return strconv.FormatFloat(x, 'f', 1, 64) }
func f2(x float64) string  { return strconv.FormatFloat(x, 'f', 2, 64) }
func mib(b float64) string { return f0(b / (1 << 20)) }
func rng(s stat3, f func(float64) string) string {
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}

// intList parses an option such as conns=100,1000; empty means all.
func intList(sp spec, key string) ([]int, error) {
	v := sp.opts[key]
	if v == "" {
		return nil, nil
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", key, v, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func strList(sp spec, key string) []string {
	if v := sp.opts[key]; v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

func keep[T comparable](filter []T, x T) bool { return len(filter) == 0 || slices.Contains(filter, x) }

func noRows(sp spec) error { return fmt.Errorf("no rows in %s", strings.Join(sp.src, ", ")) }

// throughputTable: wrk through each peer (summary.json, scenario throughput); options conns=, peers=.
func throughputTable(sp spec) (string, error) {
	files, err := readSummaries(sp)
	if err != nil {
		return "", err
	}
	conns, err := intList(sp, "conns")
	if err != nil {
		return "", err
	}
	peers := strList(sp, "peers")
	var m md
	m.header("peer", "connections", "requests/s, median (min–max)", "p99 ms", "CPU µs/request", "errors", "valid runs")
	n := 0
	for _, f := range files {
		for _, s := range f.Summary {
			if s.Scenario != "throughput" || !keep(conns, s.Conns) || !keep(peers, s.Peer) {
				continue
			}
			n++
			m.row(s.Peer, strconv.Itoa(s.Conns), rng(s.RPS, f0), f2(s.P99.Median), f1(s.CPU.Median),
				strconv.FormatInt(s.Errors, 10), fmt.Sprintf("%d of %d", s.Runs-s.Invalid, s.Runs))
		}
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// staticTable: each lbplane peer's CPU per request against static-envoy's in the same run.
func staticTable(sp spec) (string, error) {
	files, err := readSummaries(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("connections", "peer", "CPU µs/request", "static-envoy CPU µs/request", "CPU ratio", "requests/s, median (min–max)")
	n := 0
	for _, f := range files {
		static := map[int]summaryRow{}
		for _, s := range f.Summary {
			if s.Scenario == "throughput" && s.Peer == "static-envoy" {
				static[s.Conns] = s
			}
		}
		for _, s := range f.Summary {
			st, ok := static[s.Conns]
			if s.Scenario != "throughput" || !ok || !strings.HasPrefix(s.Peer, "lbplane-envoy") || st.CPU.Median == 0 {
				continue
			}
			n++
			m.row(strconv.Itoa(s.Conns), s.Peer, f1(s.CPU.Median), f1(st.CPU.Median), f2(s.CPU.Median/st.CPU.Median), rng(s.RPS, f0))
		}
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// propagationTable: a policy change to the first 200 through a real Envoy (runs.jsonl, scenario
// propagation); option policies= keeps those sizes.
func propagationTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	sizes, err := intList(sp, "policies")
	if err != nil {
		return "", err
	}
	var m md
	m.header("run", "via", "policies", "policies on the timed Envoy", "changes", "push → 200 p50 / p99 ms", "accepted → 200 p50 / p99 ms", "lbplane CPU ms per change", "lbplane RSS MiB")
	n := 0
	for _, r := range runs {
		if r.Scenario != "propagation" || !keep(sizes, r.Policies) {
			continue
		}
		n++
		onEnvoy := strconv.Itoa(r.Policies)
		if e, ok := r.Extra["envoyPolicies"]; ok {
			onEnvoy = f0(e)
		}
		valid := ""
		if !r.Valid {
			valid = " (invalid)"
		}
		rss := mib(r.LbplaneRSS)
		if peak, ok := r.Extra["peakRSS"]; ok && peak > 0 {
			rss += " (peak " + mib(peak) + ")"
		}
		m.row(r.dir, r.Variant+valid, strconv.Itoa(r.Policies), onEnvoy, strconv.Itoa(len(r.Samples)),
			f1(percentile(r.PushSamples, 50))+" / "+f1(percentile(r.PushSamples, 99)),
			f1(r.P50)+" / "+f1(r.P99), f1(r.CPUPerChange), rss)
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// coldStartTable: lbplane started on a config dir of N policies beside a fresh Envoy (runs.jsonl,
// scenario coldstart).
func coldStartTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("run", "policies", "policies on the timed Envoy", "setup", "Envoy serves the last policy s", "SYNCED s", "lbplane CPU s", "lbplane RSS MiB", "Envoy CPU s", "Envoy RSS MiB", "Envoy initial fetch timeouts")
	n := 0
	for _, r := range runs {
		if r.Scenario != "coldstart" {
			continue
		}
		n++
		x := r.Extra
		onEnvoy := strconv.Itoa(r.Policies)
		if e, ok := x["envoyPolicies"]; ok {
			onEnvoy = f0(e)
		}
		valid := ""
		if !r.Valid {
			valid = " (invalid)"
		}
		m.row(r.dir, strconv.Itoa(r.Policies), onEnvoy, r.Variant+valid, f1(x["servedMs"]/1000), f1(x["syncedMs"]/1000),
			f1(x["lbplaneCPUSeconds"]), mib(r.LbplaneRSS), f1(x["envoyCPUSeconds"]), mib(x["envoyRSSBytes"]), f0(x["envoyInitialFetchTimeouts"]))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// churnTable: EndpointSlices written at a steady rate behind Service-backed policies (runs.jsonl, scenario
// churn).
func churnTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("run", "policies", "writes/s", "writes", "EDS client lag p50 / p99 ms", "Envoy lag p50 / p99 ms", "API server: a watch sees the write, p99 ms", "watch → EDS client p99 ms", "lbplane CPU ms per change", "lbplane share of a core", "status writes", "changes never seen")
	n := 0
	for _, r := range runs {
		if r.Scenario != "churn" {
			continue
		}
		n++
		x := r.Extra
		m.row(r.dir, strconv.Itoa(r.Policies), f1(x["achievedRate"]), f0(x["writes"]), f1(r.P50)+" / "+f1(r.P99),
			f1(x["envoyP50Ms"])+" / "+f1(x["envoyP99Ms"]), f1(x["watchP99Ms"]), f1(x["watchToEDSP99Ms"]),
			f2(r.CPUPerChange), f0(x["lbplaneCoreShare"]*100)+" %", f0(x["statusWrites"]), f0(x["missing"]))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// churnStormTable: the endpoint-churn row as a storm, one line per lbplane serve --endpoint-update-interval
// (runs.jsonl, scenario churn, with the storm's figures): the EDS responses one client got while the writes
// went on, and how long after the last write it, and the Envoy, held every change.
func churnStormTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("endpoint interval", "policies", "writes/s", "EDS responses to one client", "per second", "in its busiest second", "EDS client lag p50 / p99 ms",
		"lbplane CPU ms per change", "EDS client has every change, ms after the last write", "Envoy has every last address, ms after")
	n := 0
	for _, r := range runs {
		x := r.Extra
		if _, ok := x["edsResponses"]; r.Scenario != "churn" || !ok {
			continue
		}
		n++
		interval := "none"
		if ms := x["endpointIntervalMs"]; ms > 0 {
			interval = f0(ms) + " ms"
		}
		m.row(interval, strconv.Itoa(r.Policies), f1(x["achievedRate"]), f0(x["edsResponses"]), f1(x["edsResponsesPerSecond"]), f0(x["edsResponsesBusiestSecond"]),
			f1(r.P50)+" / "+f1(r.P99), f2(r.CPUPerChange), f0(x["convergedAfterMs"]), f0(x["envoyConvergedAfterMs"]))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// fanoutTable: one change to many simulated clients (runs.jsonl, scenario fanout); option api= (delta
// unless told).
func fanoutTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	api := apiOpt(sp)
	var m md
	m.header("run", "clients", "change complete p50 / p99 / all ms", "lbplane CPU for the change ms", "per client µs", "lbplane reads / writes per client", "lbplane RSS per client KiB")
	n := 0
	for _, r := range runs {
		if r.Scenario != "fanout" || apiOf(r) != api {
			continue
		}
		n++
		x := r.Extra
		all := 0.0
		if len(r.Samples) > 0 {
			all = slices.Max(r.Samples)
		}
		m.row(r.dir, strconv.Itoa(r.Conns), f1(r.P50)+" / "+f1(r.P99)+" / "+f1(all), f0(r.CPUPerChange),
			f0(x["lbplaneCPUPerClientUs"]), f2(x["readSyscallsPerClient"])+" / "+f2(x["writeSyscallsPerClient"]), f1(x["rssPerClientKiB"]))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// grpcFleetTable: changes to proxyless grpc-go xDS clients (runs.jsonl, scenario grpc-fleet), one row per
// client count.
func grpcFleetTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("run", "clients", "changes", "every client acknowledged p50 / max ms", "lbplane CPU per change ms", "clients' CPU per change ms", "lbplane RSS per client KiB", "clients' RSS per client KiB", "valid")
	n := 0
	for _, r := range runs {
		if r.Scenario != "grpc-fleet" {
			continue
		}
		n++
		x := r.Extra
		all := 0.0
		if len(r.Samples) > 0 {
			all = slices.Max(r.Samples)
		}
		m.row(r.dir, strconv.Itoa(r.Conns), strconv.Itoa(len(r.Samples)), f1(r.P50)+" / "+f1(all), f0(r.CPUPerChange),
			f0(x["clientsCPUPerChangeMs"]), f1(x["rssPerClientKiB"]), f1(x["fleetRSSPerClientKiB"]), strconv.FormatBool(r.Valid))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// gatewayRoutesTable: the Gateway API routes row (runs.jsonl, scenario gateway-routes), one part of it
// (option part=propagation, churn or memory), rendered as the runner renders it (bench/internal/gatewaybench).
func gatewayRoutesTable(sp spec) (string, error) {
	var runs []gatewaybench.Run
	for _, path := range sp.src {
		rs, err := readJSONLines[gatewaybench.Run](path)
		if err != nil {
			return "", err
		}
		for i := range rs {
			rs[i].Dir = runName(path)
		}
		runs = append(runs, rs...)
	}
	return gatewaybench.Table(sp.opts["part"], runs)
}

// fanoutReplicasTable: changes to simulated clients spread over lbplane replicas on etcd (runs.jsonl,
// scenario fanout-replicas), one row per change, with each replica's times and RSS per client; option api=
// (delta unless told: sotw for the state-of-the-world clients' runs).
func fanoutReplicasTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	api := apiOpt(sp)
	var m md
	m.header("run", "clients", "replicas", "change (through)", "complete p50 / p99 / all ms", "per replica p99 / all ms", "lbplane CPU for the change ms", "RSS per client KiB, per replica", "valid")
	n := 0
	for _, r := range runs {
		if r.Scenario != "fanout-replicas" || apiOf(r) != api {
			continue
		}
		n++
		x := r.Extra
		all := 0.0
		if len(r.Samples) > 0 {
			all = slices.Max(r.Samples)
		}
		var per, rss []string
		for i := range int(x["replicas"]) {
			p := fmt.Sprintf("r%d:", i)
			per = append(per, fmt.Sprintf("r%d %s / %s", i, f1(x[p+"p99"]), f1(x[p+"max"])))
			rss = append(rss, fmt.Sprintf("r%d %s", i, f1(x[p+"rssPerClientKiB"])))
		}
		m.row(r.dir, strconv.Itoa(r.Conns), f0(x["replicas"]), fmt.Sprintf("%s (r%s)", f0(x["change"]), f0(x["via"])), f1(r.P50)+" / "+f1(r.P99)+" / "+f1(all),
			strings.Join(per, "; "), f0(r.CPUPerChange), strings.Join(rss, "; "), strconv.FormatBool(r.Valid))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// apiOpt is a fan-out table's api= option: the simulated clients' xDS whose runs it shows (delta unless
// told; the runs before the state-of-the-world clients name none and are delta).
func apiOpt(sp spec) string {
	if a := sp.opts["api"]; a != "" {
		return a
	}
	return "delta"
}

func apiOf(r run) string {
	if r.API == "" {
		return "delta"
	}
	return r.API
}

// maxOf is the largest of xs (0 when none).
func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// seconds is a time in seconds, or "never" for the runner's -1.
func seconds(x float64) string {
	if x < 0 {
		return "never"
	}
	return f0(x)
}

// fanoutRebalanceTable: a replica killed and restarted among others whose connections end at a maximum age
// (runs.jsonl, scenario fanout-rebalance), one row per run: how soon the restarted replica had its share of
// the clients back, the spread at 60 s, how long each change took to reach every client, and whether a
// client ever acknowledged an older change than one it had (as the clients saw it, and as the replicas'
// ACK trackers did).
func fanoutRebalanceTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("run", "clients", "xDS", "replicas", "max age s", "others hold every client after s", "restarted replica at the target share after s", "its share at 60 s",
		"max / mean at 60 s", "changes", "each change everywhere p50 / p99 / all ms", "pushed after the restart p99 / all ms", "went back: clients' / trackers'", "changes not everywhere", "valid")
	n := 0
	for _, r := range runs {
		if r.Scenario != "fanout-rebalance" {
			continue
		}
		n++
		x := r.Extra
		moved, share := "never", "-"
		if x["movedSeconds"] >= 0 {
			moved = f1(x["movedSeconds"])
		}
		if x["shareAt60"] >= 0 {
			share = f1(x["shareAt60"]*100) + " %"
		}
		m.row(r.dir, strconv.Itoa(r.Conns), apiOf(r), f0(x["replicas"]), f0(x["maxAgeSeconds"]), moved,
			fmt.Sprintf("%s (%s %%)", seconds(x["toShareSeconds"]), f0(x["targetShare"]*100)), share, f2(x["maxOverMeanAt60"]), f0(x["changes"]),
			f0(r.P50)+" / "+f0(r.P99)+" / "+f0(maxOf(r.Samples)), f0(x["afterRestartP99Ms"])+" / "+f0(x["afterRestartMaxMs"]),
			f0(x["backwardsClient"])+" / "+f0(x["backwardsTrackerStreams"]), f0(x["changesNotEverywhere"]), strconv.FormatBool(r.Valid))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// fanoutChurnTable: clients connecting and leaving while changes are pushed (runs.jsonl, scenario
// fanout-churn), one row per run: the probe policies changed (pushed at once, each after its last), how
// long a push took to be answered, how long each change took to reach every client connected when it was
// pushed, the cluster responses sent per client and change (below 1 when a response carried several
// changes), lbplane's cores, and whether its heap (after a collection) held within ±10 % from the row's
// -fanout-churn-heap-from on. Runs from before the policies were counted changed one policy and say "-"
// for what they did not record.
func fanoutChurnTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("run", "clients", "xDS", "replicas", "joins / leaves a second", "policies", "changes a second", "push answered p50 / p99 ms", "minutes", "each change everywhere p50 / p99 / all ms", "changes not everywhere",
		"pushes per store write", "cluster responses per client and change", "went back", "lbplane cores", "heap after a collection MiB, from minute", "its largest move", "within ±10 %", "RSS at the end MiB", "valid")
	n := 0
	for _, r := range runs {
		if r.Scenario != "fanout-churn" {
			continue
		}
		n++
		x := r.Extra
		heap, drift, within := "-", "-", "-"
		if x["heapDrift"] >= 0 {
			heap = fmt.Sprintf("%s–%s, from %s", mib(x["heapMinWindow"]), mib(x["heapMaxWindow"]), f1(x["heapFromSeconds"]/60))
			drift, within = f1(x["heapDrift"]*100)+" %", map[bool]string{true: "yes", false: "no"}[x["heapWithin10"] == 1]
		}
		push, perWrite, responses := "-", "-", "-"
		if _, ok := x["pushMsP99"]; ok {
			push = f0(x["pushMsP50"]) + " / " + f0(x["pushMsP99"])
		}
		if v, ok := x["clusterResponsesPerMember"]; ok {
			responses = f2(v)
		}
		if v, ok := x["pushesPerWrite"]; ok {
			perWrite = f2(v)
		}
		m.row(r.dir, strconv.Itoa(r.Conns), apiOf(r), f0(x["replicas"]), f0(x["joinPerSecond"])+" / "+f0(x["leavePerSecond"]), f0(max(x["policies"], 1)), f1(x["changesPerSecond"]), push, f1(x["seconds"]/60),
			f0(r.P50)+" / "+f0(r.P99)+" / "+f0(maxOf(r.Samples)), f0(x["changesNotEverywhere"]), perWrite, responses, f0(x["backwardsClient"]), f2(x["lbplaneCores"]),
			heap, drift, within, mib(x["rssEnd"]), strconv.FormatBool(r.Valid))
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// healthTable: one of five backends killed under load (summary.json, health), default checks first.
func healthTable(sp spec) (string, error) {
	files, err := readSummaries(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("run", "checks", "peer", "failed requests", "p99 before ms", "p99 while dead ms", "p99 after ms", "while dead / before", "Envoy: connect failures, retries, ejections")
	n := 0
	for _, f := range files {
		hs := slices.Clone(f.Health)
		slices.SortStableFunc(hs, func(a, b health) int {
			return boolInt(a.Variant != "default") - boolInt(b.Variant != "default")
		})
		for _, h := range hs {
			n++
			env := "-"
			if s := h.EnvoyStats; len(s) > 0 {
				env = fmt.Sprintf("%s, %s, %s", f0(s["upstream_cx_connect_fail"]), f0(s["upstream_rq_retry"]), f0(s["outlier_detection.ejections_enforced_total"]))
			}
			ratio := "-"
			if h.P99Before > 0 {
				ratio = f1(h.P99Down / h.P99Before)
			}
			after := "-" // not recorded before the runner measured it
			if h.P99After > 0 {
				after = f1(h.P99After)
			}
			m.row(f.dir, h.Variant, h.Peer, fmt.Sprintf("%d of %d", h.Failed, h.Requests), f1(h.P99Before), f1(h.P99Down), after, ratio, env)
		}
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hotKeyTable: bounded-load hashing with one hot key (summary.json, hotKey): medians (min–max) over the
// repetitions of each peer, workload and factor; option workload= keeps one workload.
func hotKeyTable(sp spec) (string, error) {
	files, err := readSummaries(sp)
	if err != nil {
		return "", err
	}
	type key struct {
		peer, workload string
		factor         int
	}
	groups := map[key][]hotKey{}
	var order []key
	for _, f := range files {
		for _, h := range f.HotKey {
			if w := sp.opts["workload"]; w != "" && h.Workload != w {
				continue
			}
			k := key{h.Peer, h.Workload, h.Factor}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], h)
		}
	}
	if len(order) == 0 {
		return "", noRows(sp)
	}
	slices.SortStableFunc(order, func(a, b key) int { return boolInt(a.workload != "uniform") - boolInt(b.workload != "uniform") })
	var m md
	m.header("peer", "workload", "factor", "busiest / mean", "hot key at home %", "keys moved off the hot home %", "requests off home %", "runs", "errors")
	for _, k := range order {
		g := groups[k]
		pick := func(f func(hotKey) float64) stat3 {
			var xs []float64
			for _, h := range g {
				xs = append(xs, f(h))
			}
			return stats(xs)
		}
		var errs int64
		for _, h := range g {
			errs += h.Errors
		}
		factor := "none"
		if k.factor > 0 {
			factor = strconv.Itoa(k.factor)
		}
		hot := "-"
		if k.workload == "hot" {
			hot = rng(pick(func(h hotKey) float64 { return h.HotKeyHome * 100 }), f0)
		}
		m.row(k.peer, k.workload, factor, rng(pick(func(h hotKey) float64 { return h.MaxOverMean }), f2), hot,
			rng(pick(func(h hotKey) float64 { return h.KeysMovedOffHot * 100 }), f1),
			rng(pick(func(h hotKey) float64 { return h.RequestsMoved * 100 }), f1), strconv.Itoa(len(g)), strconv.FormatInt(errs, 10))
	}
	return m.String(), nil
}

// memoryTable: each peer started anew per connection count, idle then under wrk (summary.json, memory).
func memoryTable(sp spec) (string, error) {
	files, err := readSummaries(sp)
	if err != nil {
		return "", err
	}
	var m md
	m.header("peer", "connections", "idle RSS MiB", "peak RSS at this load MiB", "KiB per connection over idle")
	n := 0
	for _, f := range files {
		for _, s := range f.Summary {
			if s.Scenario != "memory" || s.Conns == 0 {
				continue
			}
			n++
			inc := s.RSS.Median - s.IdleRSS.Median
			m.row(s.Peer, strconv.Itoa(s.Conns), f1(s.IdleRSS.Median/(1<<20)), f1(s.RSS.Median/(1<<20)), f1(inc/1024/float64(s.Conns)))
		}
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// webSocketTable: connections held open through each peer, memory per connection as the slope over the
// steps (summary.json, webSocket).
func webSocketTable(sp spec) (string, error) {
	files, err := readSummaries(sp)
	if err != nil {
		return "", err
	}
	kinds := map[string]string{"http-idle": "idle keep-alive", "websocket": "WebSocket, HTTP listener", "websocket-l4": "WebSocket, TCP listener"}
	var m md
	m.header("run", "peer", "connections held", "held and answering", "errors", "RSS KiB per connection", "Envoy heap KiB per connection")
	n := 0
	for _, f := range files {
		for _, w := range f.WebSocket {
			n++
			kind := kinds[w.Kind]
			if kind == "" {
				kind = w.Kind
			}
			heap := "-"
			if w.HeapPerConn > 0 {
				heap = f1(w.HeapPerConn / 1024)
			}
			m.row(f.dir, w.Peer, kind, fmt.Sprintf("%d of %d", w.Alive, w.Target), strconv.FormatInt(w.Errors, 10), f1(w.BytesPerConn/1024), heap)
		}
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}

// pairedTable: two peers loaded at the same time, round by round (runs.jsonl, scenario paired-cpu): the
// ratio of their CPU per request in each round, the first peer of each run over the other. With more than
// one src of the same two peers, a last row pools their rounds.
func pairedTable(sp spec) (string, error) {
	runs, err := readRuns(sp)
	if err != nil {
		return "", err
	}
	type round map[string]run
	var m md
	m.header("run", "peers", "rounds", "CPU per request ratio, median", "quartiles", "min–max")
	var pooled []float64
	pair, samePair := "", true
	n := 0
	for _, path := range sp.src {
		name := runName(path)
		rounds := map[int]round{}
		var reps []int
		var peers []string
		for _, r := range runs {
			if r.dir != name || r.Scenario != "paired-cpu" {
				continue
			}
			if _, ok := rounds[r.Rep]; !ok {
				rounds[r.Rep] = round{}
				reps = append(reps, r.Rep)
			}
			rounds[r.Rep][r.Peer] = r
			if !slices.Contains(peers, r.Peer) {
				peers = append(peers, r.Peer)
			}
		}
		if len(peers) != 2 {
			return "", fmt.Errorf("%s: want two peers, have %v", path, peers)
		}
		var ratios []float64
		for _, rep := range reps {
			a, b := rounds[rep][peers[0]], rounds[rep][peers[1]]
			if a.Valid && b.Valid && b.CPUPerRequest > 0 {
				ratios = append(ratios, a.CPUPerRequest/b.CPUPerRequest)
			}
		}
		if len(ratios) == 0 {
			continue
		}
		n++
		p := peers[0] + " / " + peers[1]
		if pair != "" && pair != p {
			samePair = false
		}
		pair = p
		pooled = append(pooled, ratios...)
		m.row(append([]string{name, p}, ratioCells(ratios)...)...)
	}
	if n == 0 {
		return "", noRows(sp)
	}
	if n > 1 && samePair {
		m.row(append([]string{"all of the above", pair}, ratioCells(pooled)...)...)
	}
	return m.String(), nil
}

func ratioCells(xs []float64) []string {
	f3 := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	s := stats(xs)
	return []string{strconv.Itoa(len(xs)), f3(s.Median), f3(quantile(xs, 0.25)) + "–" + f3(quantile(xs, 0.75)), f3(s.Min) + "–" + f3(s.Max)}
}

// quantile interpolates linearly between the closest ranks of the sorted samples.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// wsmemTable: bench/wsmem's rows (a JSON line each, one Envoy setting changed at a time): memory per
// WebSocket as tcmalloc's allocated bytes, its heap and RSS.
func wsmemTable(sp spec) (string, error) {
	var m md
	m.header("setting", "held and echoing", "allocated KiB per WebSocket", "heap KiB per WebSocket", "RSS KiB per WebSocket")
	n := 0
	for _, path := range sp.src {
		rows, err := readJSONLines[wsmemRow](path)
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			n++
			m.row(r.Label, fmt.Sprintf("%d of %d", r.Alive, r.Conns), f1(r.AllocatedKiB), f1(r.HeapKiB), f1(r.RSSKiB))
		}
	}
	if n == 0 {
		return "", noRows(sp)
	}
	return m.String(), nil
}
