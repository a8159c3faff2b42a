package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The fan-out across replicas can spread its simulated clients over child processes of the runner
// (-fanout-replica-swarm-procs K): every client is a socket of its own, and one process holds no more than
// the hard open-file limit (20,000 on the benchmark machines, which an unprivileged process cannot raise),
// so 50,000 clients need three processes or more. A child is this binary run again with swarmChildArg
// first; it holds a contiguous share of the row's clients (swarmShares), each on the replica of its row
// index, as in one process. The parent sends it requests, one JSON line each on its stdin, and it answers
// each in order with one JSON line on its stdout; its stderr is the runner's, so that its errors show in
// the run's log. It exits when its stdin closes: the parent is done with it, or died.

// swarmChildArg, first on a command line, makes the runner a child of the simulated clients. It is no
// flag of the runner's, so that -help does not list it.
const swarmChildArg = "-swarm-child"

// replicaSwarm is the simulated clients of the fan-out across replicas: in the runner's process
// (fanoutSwarm) or spread over child processes of it (procSwarm).
type replicaSwarm interface {
	// waitReady, startChange, waitChange, result, connectionsLost and stop are fanoutSwarm's.
	waitReady(limit time.Duration) (int, time.Duration)
	startChange()
	waitChange()
	result(replica int) fanoutResult
	connectionsLost() int64
	stop()
	// changeStart is when the change being timed started (unix ns; startChange's).
	changeStart() int64
	// lostAfterChange is fanoutSwarm.lostAfter: connections lost after the first change started.
	lostAfterChange() int64
	// usage is the CPU time and minor page faults so far of the runner and the clients' other processes.
	usage() swarmUsage
	// failed is why a child process failed (its requests are answered with nothing since), nil when none
	// did; always nil in one process.
	failed() error
	// procs is how many processes the clients are in.
	procs() int
}

// swarmUsage is what the simulated clients' processes used so far: CPU time and minor page faults of the
// runner and its children, and the children's resident memory.
type swarmUsage struct {
	cpu      time.Duration
	faults   int64
	childRSS int64
}

func (s *fanoutSwarm) changeStart() int64     { return s.changeAt.Load() }
func (s *fanoutSwarm) lostAfterChange() int64 { return s.lostAfter.Load() }
func (s *fanoutSwarm) usage() swarmUsage      { return swarmUsage{cpu: ownCPU(), faults: ownFaults()} }
func (s *fanoutSwarm) failed() error          { return nil }
func (s *fanoutSwarm) procs() int             { return 1 }

// startReplicaSwarm starts n simulated clients on addrs, client i on addrs[i mod len(addrs)]: in this
// process, or spread over procs child processes when that is more than one (and there are as many clients).
func startReplicaSwarm(ctx context.Context, addrs []string, n, procs int, sotw bool) (replicaSwarm, error) {
	// A nil *procSwarm or *fanoutSwarm is no nil replicaSwarm: on an error the answer is nil itself.
	if procs = min(procs, n); procs > 1 {
		ps, err := startProcSwarm(ctx, addrs, n, procs, sotw)
		if err != nil {
			return nil, err
		}
		return ps, nil
	}
	fs, err := startFanoutSwarm(ctx, addrs, n, swarmOptions{sotw: sotw})
	if err != nil {
		return nil, err
	}
	return fs, nil
}

// swarmShares splits the row's clients 0…n-1 over k processes: process c gets a contiguous run of row
// indexes, the runs' lengths differing by one at most, so that each process starts clients of every
// replica in turn (client i is on replica i mod R), as one process starts them all.
func swarmShares(n, k int) [][]int {
	out := make([][]int, k)
	for c := range k {
		for i := c * n / k; i < (c+1)*n/k; i++ {
			out[c] = append(out[c], i)
		}
	}
	return out
}

// swarmRequest is one line from the parent to a child.
type swarmRequest struct {
	// Op: start (start the clients: Rows on Addrs, state of the world when SOTW), ready (wait for their
	// first configs, at most Limit), change (start timing a change), wait (until the change is complete),
	// stats (the counters alone).
	Op    string        `json:"op"`
	Addrs []string      `json:"addrs,omitempty"`
	Rows  []int         `json:"rows,omitempty"`
	SOTW  bool          `json:"sotw,omitempty"`
	Limit time.Duration `json:"limit,omitempty"`
}

// swarmReply is a child's answer to one request, in the order asked; every answer has the counters.
type swarmReply struct {
	Op  string `json:"op"`
	Err string `json:"err,omitempty"`
	// ready: the clients with a first config, and when the last of them had it (unix ns; 0 unless all did).
	Ready     int   `json:"ready,omitempty"`
	LastReady int64 `json:"lastReady,omitempty"`
	// change: when the child started timing the change (unix ns).
	ChangeAt int64 `json:"changeAt,omitempty"`
	// wait: every ready client that had a response after the change started.
	Got []swarmClient `json:"got,omitempty"`
	// fanoutSwarm's counters: connections lost after the first change (lostAfter), and every connection
	// lost and made again (connectionsLost).
	LostAfter int64 `json:"lostAfter"`
	Lost      int64 `json:"lost"`
}

// swarmClient is what one client had of a change: its row index, its first and last response after the
// change started (unix ns), how many responses, and how many of each type.
type swarmClient struct {
	Row    int      `json:"i"`
	First  int64    `json:"f"`
	Last   int64    `json:"l"`
	Count  int32    `json:"n"`
	ByType [4]int32 `json:"t"`
}

// swarmChanged is what each ready client of sw had of the change being timed (those with a response
// after it started), in sw's order; times are absolute, so that the parent measures them from its own
// start of the change.
func swarmChanged(sw *fanoutSwarm) []swarmClient {
	at := sw.changeAt.Load()
	var out []swarmClient
	for i, st := range sw.all() {
		if !st.ready.Load() || st.count.Load() == 0 {
			continue
		}
		c := swarmClient{Row: sw.row(i), First: at + st.first.Load(), Last: at + st.last.Load(), Count: st.count.Load()}
		for t := range c.ByType {
			c.ByType[t] = st.byType[t].Load()
		}
		out = append(out, c)
	}
	return out
}

// mergeSwarmResults is the result of a change over the reports of the processes that hold the clients (one
// report in one process, fanoutSwarm.result): the clients of replica (all when -1) of replicas, in the
// order of their row indexes, their times in ms after changeAt (unix ns).
func mergeSwarmResults(parts [][]swarmClient, changeAt int64, replicas, replica int) fanoutResult {
	var all []swarmClient
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(a, b swarmClient) int { return cmp.Compare(a.Row, b.Row) })
	r := fanoutResult{counts: map[int32]int{}}
	for _, c := range all {
		if replica >= 0 && c.Row%replicas != replica {
			continue
		}
		r.samples = append(r.samples, float64(c.Last-changeAt)/1e6)
		r.firsts = append(r.firsts, float64(c.First-changeAt)/1e6)
		r.counts[c.Count]++
		for t := range r.perType {
			r.perType[t] += int64(c.ByType[t])
		}
	}
	return r
}

// procSwarm is the simulated clients spread over child processes, seen from the parent: it asks every
// child the same and adds up their answers.
type procSwarm struct {
	addrs    []string
	n        int
	children []*swarmProc
	// started: when the first child was started; changeAt: unix ns of the change being timed; readyN: the
	// clients waitReady found ready; got: each child's report of the last change.
	started  time.Time
	changeAt int64
	readyN   int
	got      [][]swarmClient
}

// swarmProc is one child: its process, its ends of the pipes, its share of the row's clients, and why it
// failed (nil while it has not).
type swarmProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	enc  *json.Encoder
	dec  *json.Decoder
	rows []int
	err  error
}

// startProcSwarm starts k children, each with its share of n clients on addrs, and returns once every
// child has started its clients.
func startProcSwarm(ctx context.Context, addrs []string, n, k int, sotw bool) (*procSwarm, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s := &procSwarm{addrs: addrs, n: n, started: time.Now()}
	for _, rows := range swarmShares(n, k) {
		// The flags that shape a client go along; the child's CPUs are the runner's (pinned off lbplane's).
		cmd := exec.CommandContext(ctx, exe, swarmChildArg, "-fanout-all-types="+strconv.FormatBool(*fanoutAll),
			"-fanout-grpc-clients="+strconv.FormatBool(*fanoutGRPC))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			s.stop()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			s.stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			s.stop()
			return nil, fmt.Errorf("simulated clients' process: %w", err)
		}
		s.children = append(s.children, &swarmProc{cmd: cmd, in: in, enc: json.NewEncoder(in), dec: json.NewDecoder(out), rows: rows})
	}
	s.askEach(func(c *swarmProc) swarmRequest {
		return swarmRequest{Op: "start", Addrs: addrs, Rows: c.rows, SOTW: sotw}
	})
	if err := s.failed(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// ask sends req to every child that has not failed, then reads each one's answer: the children work on it
// together. A child that fails answers nothing (a zero reply) from then on.
func (s *procSwarm) ask(req swarmRequest) []swarmReply {
	return s.askEach(func(*swarmProc) swarmRequest { return req })
}

func (s *procSwarm) askEach(req func(*swarmProc) swarmRequest) []swarmReply {
	out := make([]swarmReply, len(s.children))
	ops := make([]string, len(s.children))
	for i, c := range s.children {
		if c.err == nil {
			r := req(c)
			ops[i] = r.Op
			if err := c.enc.Encode(r); err != nil {
				c.err = fmt.Errorf("simulated clients' process %d: %s: %w", c.cmd.Process.Pid, r.Op, err)
				fmt.Fprintln(os.Stderr, "fan-out:", c.err)
			}
		}
	}
	for i, c := range s.children {
		if c.err != nil {
			continue
		}
		var r swarmReply
		err := c.dec.Decode(&r)
		switch {
		case err != nil:
		case r.Err != "":
			err = errors.New(r.Err)
		case r.Op != ops[i]:
			err = fmt.Errorf("answered %q", r.Op)
		}
		if err != nil {
			c.err = fmt.Errorf("simulated clients' process %d: %s: %w", c.cmd.Process.Pid, ops[i], err)
			fmt.Fprintln(os.Stderr, "fan-out:", c.err)
			continue
		}
		out[i] = r
	}
	return out
}

func (s *procSwarm) failed() error {
	for _, c := range s.children {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

func (s *procSwarm) procs() int { return len(s.children) }

// waitReady is fanoutSwarm.waitReady over every child: how many clients have a first config, and how long
// after the first child was started the last of them had it (the time until every child answered when
// some never did).
func (s *procSwarm) waitReady(limit time.Duration) (int, time.Duration) {
	s.readyN = 0
	var last int64
	all := true
	for _, r := range s.ask(swarmRequest{Op: "ready", Limit: limit}) {
		s.readyN += r.Ready
		last = max(last, r.LastReady)
		all = all && r.LastReady != 0
	}
	if !all || s.readyN < s.n {
		return s.readyN, time.Since(s.started)
	}
	return s.readyN, time.Unix(0, last).Sub(s.started)
}

// startChange has every child start timing a change, then starts it here: the children count every
// response from their own start on, all of them before the push, and report its times absolute, which
// are measured from this one.
func (s *procSwarm) startChange() {
	s.ask(swarmRequest{Op: "change"})
	s.changeAt = time.Now().UnixNano()
}

func (s *procSwarm) changeStart() int64 { return s.changeAt }

// waitChange waits until every child has waited for the change (fanoutSwarm.waitChange: every ready
// client has had a response for it and none came for a while since), and keeps their reports.
func (s *procSwarm) waitChange() {
	s.got = s.got[:0]
	for _, r := range s.ask(swarmRequest{Op: "wait"}) {
		s.got = append(s.got, r.Got)
	}
}

func (s *procSwarm) result(replica int) fanoutResult {
	return mergeSwarmResults(s.got, s.changeAt, len(s.addrs), replica)
}

// stats is the children's counters added up: connections lost after the first change, and all lost.
func (s *procSwarm) stats() (lostAfter, lost int64) {
	for _, r := range s.ask(swarmRequest{Op: "stats"}) {
		lostAfter += r.LostAfter
		lost += r.Lost
	}
	return lostAfter, lost
}

func (s *procSwarm) lostAfterChange() int64 {
	lostAfter, _ := s.stats()
	return lostAfter
}

func (s *procSwarm) connectionsLost() int64 {
	_, lost := s.stats()
	return lost
}

// usage adds the children's CPU time and page faults (their /proc/PID/stat) to the runner's own.
func (s *procSwarm) usage() swarmUsage {
	u := swarmUsage{cpu: ownCPU(), faults: ownFaults()}
	for _, c := range s.children {
		cpu, faults, rss := procStat(c.cmd.Process.Pid)
		u.cpu += cpu
		u.faults += faults
		u.childRSS += rss
	}
	return u
}

// stop closes every child's stdin, on which it exits (its clients' connections close with it), and waits
// for it; one that has not exited within 10 s is killed.
func (s *procSwarm) stop() {
	for _, c := range s.children {
		c.in.Close()
	}
	for _, c := range s.children {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.cmd.Wait()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
	}
}

// procStat is a process's user and system CPU time, minor page faults and resident memory so far (its
// /proc/PID/stat); zeros when unreadable.
func procStat(pid int) (time.Duration, int64, int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0
	}
	// The command name may hold spaces; fields start after its closing parenthesis, with the state
	// (field 3): minflt is field 10, utime and stime 14 and 15, rss (pages) 24.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 22 {
		return 0, 0, 0
	}
	minflt, _ := strconv.ParseInt(f[7], 10, 64)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks, minflt, rss * int64(os.Getpagesize())
}

// swarmChild is the runner as a child of the simulated clients (args: the flags after swarmChildArg): it
// raises its open-file limit to the hard one and serves the parent's requests on stdin and stdout until
// stdin closes. It returns the process's exit status.
func swarmChild(args []string) int {
	if err := flag.CommandLine.Parse(args); err != nil {
		return 2
	}
	raiseNoFile()
	// The parent closed its end (it is done with the clients) or died: the clients go with the process,
	// at once, whatever it was waiting for.
	gone := func() { os.Exit(0) }
	if err := serveSwarmChild(context.Background(), os.Stdin, os.Stdout, gone); err != nil {
		fmt.Fprintln(os.Stderr, "fan-out: simulated clients' process:", err)
		return 1
	}
	return 0
}

// serveSwarmChild answers the requests read from in, each with one line on out, in order. gone is called
// when in ends (while a request may still be served); then it stops the clients and returns.
func serveSwarmChild(ctx context.Context, in io.Reader, out io.Writer, gone func()) error {
	reqs := make(chan swarmRequest)
	readErr := make(chan error, 1)
	go func() {
		defer close(reqs)
		dec := json.NewDecoder(in)
		for {
			var r swarmRequest
			if err := dec.Decode(&r); err != nil {
				if errors.Is(err, io.EOF) {
					gone()
				} else {
					readErr <- err
				}
				return
			}
			reqs <- r
		}
	}()
	enc := json.NewEncoder(out)
	var sw *fanoutSwarm
	var writeErr error
	for r := range reqs {
		rep := serveSwarmRequest(ctx, &sw, r)
		if writeErr == nil {
			writeErr = enc.Encode(rep)
		}
	}
	if sw != nil {
		sw.stop()
	}
	select {
	case err := <-readErr:
		return err
	default:
		return writeErr
	}
}

// serveSwarmRequest serves one request with the child's clients *sw (started by the first request).
func serveSwarmRequest(ctx context.Context, sw **fanoutSwarm, r swarmRequest) swarmReply {
	rep := swarmReply{Op: r.Op}
	s := *sw
	switch {
	case r.Op == "start" && s != nil:
		rep.Err = "the clients were started already"
	case r.Op == "start":
		var err error
		if s, err = startFanoutSwarm(ctx, r.Addrs, len(r.Rows), swarmOptions{sotw: r.SOTW, rows: r.Rows}); err != nil {
			rep.Err = err.Error()
			return rep
		}
		*sw = s
	case s == nil:
		rep.Err = fmt.Sprintf("%s before start", r.Op)
		return rep
	case r.Op == "ready":
		ready, took := s.waitReady(r.Limit)
		rep.Ready = ready
		if ready == len(s.all()) {
			rep.LastReady = s.started.Add(took).UnixNano()
		}
	case r.Op == "change":
		s.startChange()
		rep.ChangeAt = s.changeAt.Load()
	case r.Op == "wait":
		s.waitChange()
		rep.Got = swarmChanged(s)
	case r.Op == "stats":
	default:
		rep.Err = fmt.Sprintf("unknown request %q", r.Op)
	}
	if s != nil {
		rep.LostAfter, rep.Lost = s.lostAfter.Load(), s.connectionsLost()
	}
	return rep
}
