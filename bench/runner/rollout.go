package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1alpha1 "github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// The rollout row (issue 33; only with -only rollout): a bad change, route weights moved to a backend that
// answers 500 to every request, reaches three real Envoys of one proxy group under a steady load, once
// pushed at once and held until a fix is pushed, once staged (two of the three Envoys, then all) until lbplane rolls it
// back by itself; then, unless -rollout-good=false, a good change staged through every stage. Each Envoy has
// its own client, timed from outside lbplane: every request's outcome lands in 100 ms buckets per Envoy,
// beside the push, the fix, and the rollout's phases and stages as the push API's rollout endpoint (what
// lbctl rollout status reads) showed them.
var (
	rolloutRate          = flag.Int("rollout-rate", 100, "the rollout row (-only rollout): requests a second through each of its three Envoys")
	rolloutBake          = flag.Duration("rollout-bake", 10*time.Second, "the rollout row: the staged rollouts' bake time (spec.rollout.bakeTime), the analysis window (lbplane's default is 60s)")
	rolloutWindow        = flag.Duration("rollout-window", 30*time.Second, "the rollout row: how long after the bad change the fix is pushed, in both cases: the window their failed requests are counted over")
	rolloutStatsInterval = flag.Duration("rollout-stats-interval", 2*time.Second, "the rollout row: lbplane's --proxy-stats-interval, how often the analysis's numbers are read (lbplane's default)")
	rolloutGood          = flag.Bool("rollout-good", true, "the rollout row: also roll a good change out, staged, through every stage")
)

// The rollout row's ports (moved by -port-offset): xDS, API, the policy's listener, the backends (stable,
// broken, fresh), then each Envoy's admin and stats ports.
const (
	roBase        = 28950
	roBucket      = 0.1 // seconds
	roBefore      = 3.0 // seconds of load before the change is pushed
	roAfter       = 3.0 // seconds of load after the fix, or after a good change succeeded
	roName        = "shop"
	roBrokenShare = 0.75 // the bad change's weights: stable 1, broken 3
)

var roEnvoys = []string{"envoy-a", "envoy-b", "envoy-c"}

// rolloutRun is the row's result: its settings and each case.
type rolloutRun struct {
	RatePerEnvoy  int     `json:"ratePerEnvoy"`
	BakeSeconds   float64 `json:"bakeSeconds"`
	WindowSeconds float64 `json:"windowSeconds"`
	StatsInterval string  `json:"statsInterval"`
	Stages        string  `json:"stages"`
	Envoys        int     `json:"envoys"`
	// FirstStageEnvoys are the Envoys the first stage reaches.
	FirstStageEnvoys int           `json:"firstStageEnvoys"`
	LoadBefore       string        `json:"loadAverageBefore"` // the 1-minute load average
	LoadAfter        string        `json:"loadAverageAfter"`
	Cases            []rolloutCase `json:"cases"`
}

// rolloutCase is one change through the three Envoys. Times are seconds since the case's load began.
type rolloutCase struct {
	Name   string `json:"name"`   // immediate, staged, staged-good
	Change string `json:"change"` // bad or good
	Mode   string `json:"mode"`   // the push's rollout mode
	// Raw is the file (relative to the results directory) with the buckets and every status read.
	Raw         string  `json:"raw"`
	PushAt      float64 `json:"pushAt"`
	PushAnswer  float64 `json:"pushAnsweredAt"`
	FixAt       float64 `json:"fixAt"`        // the fix pushed (at once); -1: none (a good change)
	RolledBack  float64 `json:"rolledBackAt"` // the rollout's phase first read as RolledBack; -1: never
	SucceededAt float64 `json:"succeededAt"`  // ... as Succeeded; -1: never
	End         float64 `json:"end"`
	// From the push to the fix (to the end for a good change): requests and failures of all clients, the
	// Envoys that had failures, and the last failed request's send time after the push (-1: none).
	Requests    int64    `json:"requests"`
	Failed      int64    `json:"failed"`
	FailedOn    []string `json:"failedOn,omitempty"`
	LastFailure float64  `json:"lastFailureAfterPush"`
	// BadEnvoys are the Envoys that served the broken backend (X-Backend) after the push.
	BadEnvoys []string       `json:"envoysWithTheChange,omitempty"`
	PerEnvoy  []rolloutEnvoy `json:"perEnvoy"`
	// Events are the rollout's phase, stage and canary changes, as read every 100 ms.
	Events []rolloutEvent `json:"events,omitempty"`
	// Final is the rollout's status at the end of the window (with the numbers that decided).
	Final *v1alpha1.RolloutStatus `json:"final,omitempty"`
	Note  string                  `json:"note,omitempty"`
}

type rolloutEnvoy struct {
	Node     string `json:"node"`
	Requests int64  `json:"requests"` // from the push to the fix
	Failed   int64  `json:"failed"`
	// Buckets of roBucket seconds from the case's start: requests sent and how many failed.
	BucketRequests []int `json:"bucketRequests,omitempty"`
	BucketFailed   []int `json:"bucketFailed,omitempty"`
}

type rolloutEvent struct {
	T        float64  `json:"t"`
	Phase    string   `json:"phase"`
	Stage    int32    `json:"stage"`
	Stages   int32    `json:"stages"`
	Canaries []string `json:"canaries,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// rolloutPolicy is the row's policy: route "all" to stable, and to extra (weight 3) when set. Every
// generation asks for the same stages; a push's mode says whether they apply.
func rolloutPolicy(listener int, stable, extra string, extraPort int, bake time.Duration, minRequests int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: %s}\nspec:\n"+
		"  listener: {address: 127.0.0.1, port: %d, protocol: HTTP}\n"+
		"  rollout:\n    stages: [{envoys: 1}, {percent: 100}]\n    bakeTime: %s\n    analysis: {minRequests: %d}\n"+
		"  routes:\n    - name: all\n      backends:\n        - {name: stable, weight: 1}\n", roName, listener, bake, minRequests)
	if extra != "" {
		fmt.Fprintf(&b, "        - {name: %s, weight: 3}\n", extra)
	}
	fmt.Fprintf(&b, "  backends:\n    - name: stable\n      endpoints: [{address: 127.0.0.1, port: %s}]\n", stable)
	if extra != "" {
		fmt.Fprintf(&b, "    - name: %s\n      endpoints: [{address: 127.0.0.1, port: %d}]\n", extra, extraPort)
	}
	return []byte(b.String())
}

func rolloutRow(ctx context.Context, e *env, out string, rep *report) error {
	base := roBase + portOffset
	rate, bake, window := max(*rolloutRate, 1), *rolloutBake, *rolloutWindow
	// Half of what a canary serves in one bake, at most the default 100: a stage is judged after one bake.
	minRequests := min(100, max(1, rate*int(bake.Seconds())/2))
	run := &rolloutRun{RatePerEnvoy: rate, BakeSeconds: bake.Seconds(), WindowSeconds: window.Seconds(), StatsInterval: rolloutStatsInterval.String(),
		Stages: "[{envoys: 1}, {percent: 100}]", Envoys: len(roEnvoys), LoadBefore: loadAverage(),
		// Two of three: a stage before the last has two canaries once the group has three Envoys.
		FirstStageEnvoys: v1alpha1.StageCount([]v1alpha1.RolloutStage{{Envoys: 1}, {Percent: 100}}, 0, len(roEnvoys))}
	rep.Rollout = run
	dir := filepath.Join(e.dir, "rollout")
	if err := os.MkdirAll(filepath.Join(out, "rollout"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	xds, apiAddr, listener := fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1), base+2
	ports := map[string]int{"stable": base + 5, "broken": base + 6, "fresh": base + 7}
	for _, name := range []string{"stable", "broken", "fresh"} {
		args := []string{"--listen", fmt.Sprintf("127.0.0.1:%d", ports[name]), "--name", name, "--size", "1024"}
		if name == "broken" {
			args = append(args, "--fail-with", "500")
		}
		p, err := start(dir, name, nil, filepath.Join(e.bin, "lbplane-backend"), args...)
		if err != nil {
			return err
		}
		defer p.stop()
		if err := waitPort(fmt.Sprintf("127.0.0.1:%d", ports[name]), 10*time.Second); err != nil {
			return err
		}
	}
	lb, err := serveLbplane(e, dir, apiAddr, 20*time.Second, serveArgs(dir, xds, apiAddr, "--metrics-address", "", "--proxy-stats-interval", rolloutStatsInterval.String(),
		// The Envoys start with the row: canaries are drawn among those connected this long.
		"--rollout-canary-min-age", "2s"))
	if err != nil {
		return err
	}
	defer lb.stop()
	c := &pushapi.Client{BaseURL: "http://" + apiAddr, Token: "bench", HTTP: &http.Client{Timeout: 30 * time.Second}}
	stable := strconv.Itoa(ports["stable"])
	good := rolloutPolicy(listener, stable, "", 0, bake, minRequests)
	// The first generation reaches every Envoy at once: there is nothing to compare it with.
	if _, err := c.ApplyRollout(ctx, good, false, "immediate"); err != nil {
		return err
	}
	var pids []int
	for i, node := range roEnvoys {
		edir := filepath.Join(dir, node)
		if err := os.MkdirAll(edir, 0o755); err != nil {
			return err
		}
		cfgPath, err := writeBootstrap(edir, envoybootstrap.Params{NodeID: node, XDS: xds, Delta: true, AdminPort: base + 10 + i,
			InsecureAdminTCP: true, StatsPort: base + 20 + i, MaxConnections: 10000})
		if err != nil {
			return err
		}
		p, err := startEnvoyWith(e, dir, node, cfgPath)
		if err != nil {
			return err
		}
		defer p.stop()
		pids = append(pids, p.cmd.Process.Pid)
	}
	if err := waitEnvoysSynced(ctx, c, len(roEnvoys), 60*time.Second); err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", listener)
	var clients []*http.Client
	for i := range roEnvoys {
		tr := &http.Transport{DialContext: pinnedDial(pids[i], listener), MaxIdleConnsPerHost: 64, DisableCompression: true}
		defer tr.CloseIdleConnections()
		clients = append(clients, &http.Client{Transport: tr, Timeout: 2 * time.Second})
		if !waitFor(30*time.Second, func() bool { b, err := get(clients[i], url); return err == nil && b == "stable" }) {
			return fmt.Errorf("%s never served the policy", roEnvoys[i])
		}
	}
	bad := rolloutPolicy(listener, stable, "broken", ports["broken"], bake, minRequests)
	fresh := rolloutPolicy(listener, stable, "fresh", ports["fresh"], bake, minRequests)
	type change struct {
		name, change, mode string
		doc                []byte
	}
	cases := []change{{"immediate", "bad", "immediate", bad}, {"staged", "bad", "staged", bad}}
	if *rolloutGood {
		cases = append(cases, change{"staged-good", "good", "staged", fresh})
	}
	for _, k := range cases {
		// Every case starts from the good generation on every Envoy.
		if _, err := c.ApplyRollout(ctx, good, false, "immediate"); err != nil {
			return err
		}
		if err := waitEnvoysSynced(ctx, c, len(roEnvoys), 60*time.Second); err != nil {
			return err
		}
		// A bad change is fixed by pushing the good generation again, at once; a good change is not undone.
		fix := good
		if k.change == "good" {
			fix = nil
		}
		rc, raw, err := rolloutCaseRun(ctx, c, clients, url, k.name, k.change, k.mode, k.doc, fix, window, bake)
		if err != nil {
			return fmt.Errorf("rollout row, %s: %w", k.name, err)
		}
		rc.Raw = filepath.Join("rollout", k.name+".json")
		b, err := json.MarshalIndent(raw, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, rc.Raw), b, 0o644); err != nil {
			return err
		}
		run.Cases = append(run.Cases, rc)
		fmt.Fprintf(os.Stderr, "rollout     %-11s %d of %d requests failed (%.1f %%) after the push; rolled back %s; succeeded %s; Envoys that served the change %v\n",
			k.name, rc.Failed, rc.Requests, 100*share(rc.Failed, rc.Requests), secondsAfter(rc.RolledBack, rc.PushAt), secondsAfter(rc.SucceededAt, rc.PushAt), rc.BadEnvoys)
	}
	run.LoadAfter = loadAverage()
	return nil
}

// rolloutRaw is a case's raw file: the case with its buckets, and every rollout status read.
type rolloutRaw struct {
	rolloutCase
	Reads []rolloutRead `json:"reads"`
}

type rolloutRead struct {
	T       float64                 `json:"t"`
	Rollout *v1alpha1.RolloutStatus `json:"rollout,omitempty"`
	Error   string                  `json:"error,omitempty"`
}

// rolloutCaseRun loads every Envoy, pushes change with mode after roBefore seconds, reads the rollout every
// 100 ms, and pushes fix at once window later (a bad change), or waits for the rollout to end (a good one).
func rolloutCaseRun(ctx context.Context, c *pushapi.Client, clients []*http.Client, url, name, change, mode string, doc, fix []byte, window, bake time.Duration) (rolloutCase, rolloutRaw, error) {
	rc := rolloutCase{Name: name, Change: change, Mode: mode, FixAt: -1, RolledBack: -1, SucceededAt: -1, LastFailure: -1}
	var raw rolloutRaw
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	began := time.Now()
	since := func() float64 { return time.Since(began).Seconds() }
	outs := make([][]outcome, len(clients))
	errs := make([]error, len(clients))
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Ended by stop: an hour is only a bound.
			outs[i], errs[i] = openLoop(lctx, began, 3600, max(*rolloutRate, 1), nil, func() (string, error) { return get(clients[i], url) })
		}()
	}
	sleepUntil := func(t float64) {
		select {
		case <-time.After(time.Duration((t - since()) * float64(time.Second))):
		case <-ctx.Done():
		}
	}
	sleepUntil(roBefore)
	rc.PushAt = since()
	res, err := c.ApplyRollout(ctx, doc, false, mode)
	if err != nil {
		return rc, raw, err
	}
	rc.PushAnswer = since()
	gen := int64(0)
	if len(res.Policies) > 0 {
		gen = res.Policies[0].Generation
	}
	// A good change: until it succeeded or was rolled back, bounded by every stage's bake several times over.
	end := rc.PushAt + window.Seconds() + roAfter
	if change == "good" {
		end = rc.PushAt + 2*4*bake.Seconds() + 60
	}
	var last rolloutEvent
	for ctx.Err() == nil && since() < end {
		t := since()
		if fix != nil && rc.FixAt < 0 && t >= rc.PushAt+window.Seconds() {
			rc.FixAt = t
			if _, err := c.ApplyRollout(ctx, fix, false, "immediate"); err != nil {
				return rc, raw, err
			}
		}
		r, err := c.Rollout(ctx, "default", roName)
		read := rolloutRead{T: t}
		switch {
		case err != nil:
			read.Error = err.Error()
		case r.Rollout.CandidateGeneration == gen && gen > 0:
			ro := r.Rollout
			read.Rollout = &ro
			ev := rolloutEvent{T: t, Phase: ro.Phase, Stage: ro.Stage, Stages: ro.Stages, Canaries: ro.Canaries, Message: ro.Message}
			if ev.Phase != last.Phase || ev.Stage != last.Stage || !slices.Equal(ev.Canaries, last.Canaries) {
				rc.Events = append(rc.Events, ev)
				last = ev
			}
			if rc.FixAt < 0 {
				rc.Final = &ro
			}
			if ro.Phase == v1alpha1.RolloutRolledBack && rc.RolledBack < 0 {
				rc.RolledBack = t
			}
			if ro.Phase == v1alpha1.RolloutSucceeded && rc.SucceededAt < 0 {
				rc.SucceededAt = t
			}
		}
		raw.Reads = append(raw.Reads, read)
		if change == "good" && (rc.SucceededAt >= 0 || rc.RolledBack >= 0) && end > t+roAfter {
			end = t + roAfter
		}
		sleepUntil(t + roBucket)
	}
	stop()
	wg.Wait()
	rc.End = since()
	if err := ctx.Err(); err != nil {
		return rc, raw, err
	}
	for _, err := range errs {
		if err != nil {
			return rc, raw, err
		}
	}
	if change == "good" && rc.SucceededAt < 0 {
		rc.Note = "the good change did not succeed"
	}
	if change == "bad" && mode == "staged" && rc.RolledBack < 0 {
		rc.Note = "not rolled back before the fix"
	}
	countUntil := rc.FixAt
	if countUntil < 0 {
		countUntil = rc.End
	}
	buckets := int(rc.End/roBucket) + 1
	bad := map[string]bool{}
	for i, got := range outs {
		pe := rolloutEnvoy{Node: roEnvoys[i]}
		for _, o := range got {
			if o.sent >= rc.PushAt && (o.failed || o.backend == "broken" || o.backend == "fresh") {
				bad[pe.Node] = true
			}
			if o.sent < rc.PushAt || o.sent >= countUntil {
				continue
			}
			pe.Requests++
			if o.failed {
				pe.Failed++
				rc.LastFailure = max(rc.LastFailure, o.sent-rc.PushAt)
			}
		}
		rc.Requests += pe.Requests
		rc.Failed += pe.Failed
		if pe.Failed > 0 {
			rc.FailedOn = append(rc.FailedOn, pe.Node)
		}
		rc.PerEnvoy = append(rc.PerEnvoy, pe)
	}
	for _, n := range roEnvoys {
		if bad[n] {
			rc.BadEnvoys = append(rc.BadEnvoys, n)
		}
	}
	raw.rolloutCase = rc
	raw.PerEnvoy = nil
	for i, pe := range rc.PerEnvoy {
		pe.BucketRequests, pe.BucketFailed = bucketsOf(outs[i], buckets)
		raw.PerEnvoy = append(raw.PerEnvoy, pe)
	}
	return rc, raw, nil
}

// bucketsOf counts requests sent, and failed, in each roBucket of the case.
func bucketsOf(outs []outcome, n int) (reqs, failed []int) {
	reqs, failed = make([]int, n), make([]int, n)
	for _, o := range outs {
		b := min(int(o.sent/roBucket), n-1)
		reqs[b]++
		if o.failed {
			failed[b]++
		}
	}
	return reqs, failed
}

// waitEnvoysSynced waits until n Envoys are connected and every one has acknowledged the current config.
func waitEnvoysSynced(ctx context.Context, c *pushapi.Client, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ps, err := c.Proxies(ctx)
		synced := err == nil && len(ps) == n
		for _, p := range ps {
			synced = synced && p.State == apiwire.Synced
		}
		if synced {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%d Envoys connected and synced: not within %s", n, within)
}

// pinnedDial dials until the connection is accepted by the Envoy process pid: the Envoys of the group bind
// the policy's listener port together (SO_REUSEPORT) and the kernel picks one for each connection, so a
// client of one Envoy keeps only connections that Envoy accepted (looked up in /proc: the accepted socket's
// inode among the Envoy's file descriptors).
func pinnedDial(pid, port int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		for range 100 {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			local := conn.LocalAddr().(*net.TCPAddr).Port
			owner := acceptedBy(ctx, port, local, pid)
			if owner == pid {
				return conn, nil
			}
			conn.Close()
		}
		return nil, fmt.Errorf("100 connections to %s, none accepted by the Envoy with pid %d", addr, pid)
	}
}

// acceptedBy tells whether process pid accepted the loopback connection from clientPort to port: pid when
// it did (within a second), 0 when another process did or nobody did in time.
func acceptedBy(ctx context.Context, port, clientPort, pid int) int {
	want := fmt.Sprintf(":%04X", port)
	peer := fmt.Sprintf(":%04X", clientPort)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		inode := ""
		if f, err := os.Open("/proc/net/tcp"); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				fs := strings.Fields(sc.Text())
				if len(fs) > 9 && strings.HasSuffix(fs[1], want) && strings.HasSuffix(fs[2], peer) && fs[9] != "0" {
					inode = fs[9]
					break
				}
			}
			f.Close()
		}
		if inode != "" {
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
			for _, fd := range fds {
				if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == "socket:["+inode+"]" {
					return pid
				}
			}
			return 0 // accepted, by another Envoy
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0
}

func secondsAfter(t, from float64) string {
	if t < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s after the push", t-from)
}

// rolloutOnly tells whether the report holds the rollout row alone: it is then a report of its own.
func (r *report) rolloutOnly() bool {
	return r.Rollout != nil && len(r.Runs) == 0 && len(r.Hash)+len(r.HotKey)+len(r.Health)+len(r.WebSocket) == 0
}

const rolloutQuestion = "A bad change (route weights moved to a backend that answers 500 to every request) pushed to every Envoy of a proxy group at once: what share of all requests fails until a second push? Pushed staged (two of the three Envoys, then all), does it reach only the first stage's Envoys, is it rolled back by lbplane itself within two analysis windows, and do the fleet's failed requests fall by at least the first stage's share (to at most that share of those without stages)?"

// rolloutReport is REPORT.md when the rollout row ran alone: the question, the machine, the command, the
// result.
func (r *report) rolloutReport() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	ro := r.Rollout
	w("# A bad change through three Envoys, with and without a staged rollout\n\n")
	w("**Question.** %s (issue 33)\n\n", rolloutQuestion)
	m := r.Machine
	w("**Machine.** %s, %s CPUs, %s memory, Linux %s, Envoy %s, %s; 1-minute load average %s before the row, %s after.\n\n",
		m["cpu"], m["cpus"], memoryGiB(m["memory"]), m["kernel"], envoyVersion(m["envoy"]), m["go"], ro.LoadBefore, ro.LoadAfter)
	w("**Command** (%s UTC, %s):\n\n```sh\n%s\n```\n\n", r.Started.Format("2006-01-02 15:04"), r.Finished.Sub(r.Started).Round(time.Second), r.Command)
	verdict, _ := ro.verdict()
	w("## Result: %s\n\n", verdict)
	ro.markdown(w)
	return b.String()
}

// rolloutMarkdown is the row's section of the whole report.
func (r *report) rolloutMarkdown(w func(string, ...any)) {
	if r.Rollout == nil {
		return
	}
	w("\n## A bad change with and without a staged rollout\n\n%s\n\n", rolloutQuestion)
	verdict, _ := r.Rollout.verdict()
	w("Result: %s.\n\n", verdict)
	r.Rollout.markdown(w)
}

func (ro *rolloutRun) find(name string) *rolloutCase {
	for i := range ro.Cases {
		if ro.Cases[i].Name == name {
			return &ro.Cases[i]
		}
	}
	return nil
}

func share(failed, requests int64) float64 { return float64(failed) / float64(max(requests, 1)) }

// rolloutCheck is one claim of issue 33, and whether this run bears it out.
type rolloutCheck struct {
	claim, detail string
	held          bool
}

func (ro *rolloutRun) checks() []rolloutCheck {
	at, st := ro.find("immediate"), ro.find("staged")
	if at == nil || st == nil {
		return []rolloutCheck{{claim: "both cases ran", detail: "the row did not finish both cases"}}
	}
	stage := float64(ro.FirstStageEnvoys) / float64(ro.Envoys)
	out := []rolloutCheck{{claim: "staged, the bad change reaches only the first stage's Envoys",
		held:   len(st.BadEnvoys) <= ro.FirstStageEnvoys,
		detail: fmt.Sprintf("%d of %d Envoys served it (%s); the first stage has %d", len(st.BadEnvoys), ro.Envoys, strings.Join(st.BadEnvoys, ", "), ro.FirstStageEnvoys)}}
	rb := rolloutCheck{claim: fmt.Sprintf("it is rolled back by itself within two analysis windows (2 × bake %gs)", ro.BakeSeconds), detail: "not rolled back before the fix"}
	if st.RolledBack >= 0 {
		took := st.RolledBack - st.PushAt
		rb.held, rb.detail = took <= 2*ro.BakeSeconds, fmt.Sprintf("RolledBack read %.1f s after the push; the last failed request was sent %.1f s after it", took, st.LastFailure)
	}
	out = append(out, rb, rolloutCheck{claim: fmt.Sprintf("fleet-wide failed requests fall by at least the first stage's share: staged, at most %.0f %% of those without", 100*stage),
		held:   at.Failed > 0 && float64(st.Failed) <= stage*float64(at.Failed),
		detail: fmt.Sprintf("%d against %d: %.1f %%", st.Failed, at.Failed, 100*float64(st.Failed)/float64(max(at.Failed, 1)))})
	if g := ro.find("staged-good"); g != nil {
		c := rolloutCheck{claim: "a good change passes every stage and ends on every Envoy", held: g.SucceededAt >= 0 && len(g.BadEnvoys) == ro.Envoys,
			detail: fmt.Sprintf("%d of %d Envoys served it; %d of %d requests failed", len(g.BadEnvoys), ro.Envoys, g.Failed, g.Requests)}
		if g.SucceededAt >= 0 {
			c.detail = fmt.Sprintf("Succeeded read %.1f s after the push; ", g.SucceededAt-g.PushAt) + c.detail
		}
		out = append(out, c)
	}
	return out
}

// verdict is the result in one line, and whether every claim held.
func (ro *rolloutRun) verdict() (string, bool) {
	at, st := ro.find("immediate"), ro.find("staged")
	if at == nil || st == nil {
		return "the row did not finish both cases", false
	}
	line := fmt.Sprintf("%.1f %% of all requests failed without stages, %.1f %% staged", 100*share(at.Failed, at.Requests), 100*share(st.Failed, st.Requests))
	if st.RolledBack >= 0 {
		line += fmt.Sprintf(", rolled back %.1f s after the push", st.RolledBack-st.PushAt)
	}
	held := 0
	cs := ro.checks()
	for _, c := range cs {
		if c.held {
			held++
		}
	}
	return line + fmt.Sprintf("; %d of %d claims hold", held, len(cs)), held == len(cs)
}

func (ro *rolloutRun) markdown(w func(string, ...any)) {
	w("Three Envoys (one worker each) of one proxy group, `lbplane serve` (standalone, `--proxy-stats-interval %s`) and three backends (`lbplane-backend`: stable, broken with `--fail-with 500`, fresh) on loopback. "+
		"Each Envoy has its own client: %d requests a second, open-loop (a request is sent on time whatever the answers before it), on keep-alive connections that Envoy accepted (the Envoys share the listener's port; the client keeps only connections the kernel gave to its Envoy). "+
		"Every request's outcome, timed from outside lbplane, is counted in %.0f ms buckets per Envoy; the rollout's phase, stage and canaries are read from the push API's rollout endpoint (what `lbctl rollout status` reads) every 100 ms. "+
		"The policy routes everything to stable; the bad change adds broken with weight 3 (%.0f %% of an Envoy's requests fail once it has it). "+
		"Without a rollout it is pushed with `--rollout immediate` and the fix (the previous spec) %gs later; staged (`--rollout staged`; `spec.rollout.stages: %s`, `bakeTime: %gs`, the default thresholds but `minRequests` at half a canary's requests in one bake, at most the default 100) the same fix is pushed at the same time, whatever the rollout did. "+
		"Failed requests are counted from the push to the fix in both cases. Raw files: `rollout/<case>.json` (the buckets and every status read); `summary.json` (`rollout`).\n\n",
		ro.StatsInterval, ro.RatePerEnvoy, roBucket*1000, 100*roBrokenShare, ro.WindowSeconds, ro.Stages, ro.BakeSeconds)
	w("| case | Envoys that served the change | requests, push → fix (good change: → end) | failed | failed share | rollout | last failed request after the push |\n|---|---|---:|---:|---:|---|---:|\n")
	for _, c := range ro.Cases {
		what := map[string]string{"immediate": "bad change, at once", "staged": "bad change, staged", "staged-good": "good change (to fresh, weight 3), staged"}[c.Name]
		outcome := "none (at once)"
		switch {
		case c.RolledBack >= 0:
			outcome = fmt.Sprintf("RolledBack %.1f s after the push", c.RolledBack-c.PushAt)
		case c.SucceededAt >= 0:
			outcome = fmt.Sprintf("Succeeded %.1f s after the push", c.SucceededAt-c.PushAt)
		case c.Mode == "staged":
			outcome = "did not end: " + c.Note
		}
		last := "none"
		if c.LastFailure >= 0 {
			last = fmt.Sprintf("%.1f s", c.LastFailure)
		}
		w("| %s | %d of %d (%s) | %d | %d | %.1f %% | %s | %s |\n", what, len(c.BadEnvoys), ro.Envoys, strings.Join(c.BadEnvoys, ", "), c.Requests, c.Failed, 100*share(c.Failed, c.Requests), outcome, last)
	}
	w("\n")
	for _, c := range ro.checks() {
		yes := "**yes**"
		if !c.held {
			yes = "**no**"
		}
		w("- %s: %s (%s).\n", c.claim, yes, c.detail)
	}
	w("\nPer Envoy, failed of requests from the push to the fix:\n\n| case |")
	for _, n := range roEnvoys {
		w(" %s |", n)
	}
	w("\n|---|%s\n", strings.Repeat("---:|", len(roEnvoys)))
	for _, c := range ro.Cases {
		w("| %s |", c.Name)
		for _, pe := range c.PerEnvoy {
			w(" %d of %d |", pe.Failed, pe.Requests)
		}
		w("\n")
	}
	for _, c := range ro.Cases {
		if len(c.Events) == 0 {
			continue
		}
		w("\nThe rollout of `%s`, as read (seconds after the push):\n\n| s | phase | stage | canaries | message |\n|---:|---|---|---|---|\n", c.Name)
		for _, ev := range c.Events {
			w("| %.1f | %s | %d of %d | %s | %s |\n", ev.T-c.PushAt, ev.Phase, ev.Stage, ev.Stages, strings.Join(ev.Canaries, ", "), strings.ReplaceAll(ev.Message, "|", "\\|"))
		}
	}
	w("\n![rollout](rollout.png)\n\nFailed requests per %.0f ms per Envoy, each case from the start of its load; marked: the push of the change, the stage changes and the rollback as read, and the fix.\n", roBucket*1000)
}

// envoyVersion is the version in `envoy --version`'s line ("envoy  version: <hash>/1.40.0/Clean/RELEASE/…").
func envoyVersion(line string) string {
	if _, rest, ok := strings.Cut(line, "version: "); ok {
		if parts := strings.Split(rest, "/"); len(parts) > 1 {
			return parts[1]
		}
	}
	return line
}

// memoryGiB is /proc/meminfo's "24684096 kB" in GiB.
func memoryGiB(s string) string {
	if kb, err := strconv.ParseFloat(strings.TrimSuffix(s, " kB"), 64); err == nil {
		return fmt.Sprintf("%.0f GiB", kb/(1<<20))
	}
	return s
}
