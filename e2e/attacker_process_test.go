package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The rapid-reset attacker runs in its own process, the test binary re-executed (TestMain hands over to
// attackerProcess when attackerAddrEnv is set). In the test's own process its four busy goroutines shared
// the Go scheduler (GOMAXPROCS 2) with the trickle's clients, so the trickle's latency measured how long a
// client goroutine waited for a Go thread behind the attackers, not how long Envoy took. A real attacker is
// another process (another machine); the kernel then schedules it against Envoy and the legitimate clients.
const (
	attackerAddrEnv     = "LBPLANE_E2E_ATTACKER_ADDR"
	attackerDurationEnv = "LBPLANE_E2E_ATTACKER_DURATION"
	// attackerStartEnv (Unix nanoseconds) and attackerWindowEnv make the attacker attack in the even windows
	// from the start and stay away in the odd ones, on the schedule the test classifies its requests by.
	attackerStartEnv  = "LBPLANE_E2E_ATTACKER_START"
	attackerWindowEnv = "LBPLANE_E2E_ATTACKER_WINDOW"
	attackerConns     = 4
	// envoyCPU and attackerCPU are the two cores of the smallest machine the suite runs on.
	envoyCPU, attackerCPU = 0, 1
)

// attackerProcess runs attackerConns rapid-reset loops against addr, from the start in attackerStartEnv for
// the duration in attackerDurationEnv (at most 30 s), in every other window of attackerWindowEnv: at the end
// of an attacking window it closes its connections, so that nothing of the attack is left in Envoy's socket
// buffers during a calm window (when paused with SIGSTOP instead, an Envoy without the premature-reset limit
// went on decoding the backlog through the calm windows, and the calm side measured the attack). It prints
// "streams conns" on stdout and returns the exit code.
func attackerProcess(addr string) int {
	if os.Getenv(floodSourceEnv) != "" {
		return floodProcess(addr)
	}
	d, err1 := time.ParseDuration(os.Getenv(attackerDurationEnv))
	window, err2 := time.ParseDuration(os.Getenv(attackerWindowEnv))
	startNs, err3 := strconv.ParseInt(os.Getenv(attackerStartEnv), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || d <= 0 || d > 30*time.Second || window <= 0 {
		fmt.Fprintf(os.Stderr, "want %s up to 30s, %s and %s, got %q, %q, %q\n", attackerDurationEnv, attackerWindowEnv, attackerStartEnv,
			os.Getenv(attackerDurationEnv), os.Getenv(attackerWindowEnv), os.Getenv(attackerStartEnv))
		return 2
	}
	start := time.Unix(0, startNs)
	var streams, conns atomic.Int64
	for w := 0; time.Duration(w)*window < d; w += 2 {
		time.Sleep(time.Until(start.Add(time.Duration(w) * window)))
		deadline := start.Add(time.Duration(w+1) * window)
		var wg sync.WaitGroup
		for range attackerConns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) && streams.Load() < 20_000_000 {
					conns.Add(1)
					rapidReset(addr, deadline, &streams)
				}
			}()
		}
		wg.Wait()
	}
	fmt.Println(streams.Load(), conns.Load())
	return 0
}

// rapidResetAttack is a running attacker process.
type rapidResetAttack struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	cancel context.CancelFunc
}

// startRapidResetAttack starts the attacker: from start, for d, attacking in every other window.
func startRapidResetAttack(t *testing.T, addr string, start time.Time, window, d time.Duration) *rapidResetAttack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	a := &rapidResetAttack{cancel: cancel}
	// The attacker gets one CPU (taskset acts before exec, so every thread of the attacker inherits it) and
	// Envoy the other (pinCPU): the attacker cannot take the CPU Envoy runs on, as an attacker on another
	// machine could not. It keeps its normal priority: at nice 19 it got so little CPU at a load average of 36
	// that it opened only 43 connections in 10 s.
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		cancel()
		t.Fatal("taskset (util-linux) is needed to keep the attacker off Envoy's CPU: apt-get install util-linux")
	}
	a.cmd = exec.CommandContext(ctx, taskset, "-c", strconv.Itoa(attackerCPU), os.Args[0])
	a.cmd.Env = append(os.Environ(), attackerAddrEnv+"="+addr, attackerDurationEnv+"="+d.String(),
		attackerWindowEnv+"="+window.String(), attackerStartEnv+"="+strconv.FormatInt(start.UnixNano(), 10))
	a.cmd.Stdout, a.cmd.Stderr = &a.out, os.Stderr
	if err := a.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.cancel(); a.cmd.Wait() })
	return a
}

// Wait returns the streams the attacker opened and reset, and the connections it took.
func (a *rapidResetAttack) Wait(t *testing.T) (streams, conns int64) {
	t.Helper()
	err := a.cmd.Wait()
	a.cancel()
	if err != nil {
		t.Fatalf("attacker process: %v (output %q)", err, a.out.String())
	}
	if _, err := fmt.Sscan(a.out.String(), &streams, &conns); err != nil {
		t.Fatalf("attacker process printed %q: %v", a.out.String(), err)
	}
	return streams, conns
}

// h2Stats sums Envoy's HTTP connection manager counters named by suffix over the listeners (not the stats
// listener, not admin): what Envoy itself decoded, as opposed to what the attacker wrote into its socket.
func h2Stats(t *testing.T, e *Envoy, names ...string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, n := range names {
		m[n] = int64(envoyStatSum(t, e.AdminPort, "http.", "."+n, "http.lbplane_stats.", "http.admin."))
	}
	return m
}

// cpuSeconds is a process's user + system CPU time so far, from /proc (clock ticks of 1/100 s).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may contain spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// pinCPU binds every thread of a process to one CPU (sched_setaffinity acts per thread, so each task in
// /proc/<pid>/task is bound; threads started later inherit it).
func pinCPU(t *testing.T, pid, cpu int) {
	t.Helper()
	if runtime.NumCPU() < 2 {
		t.Fatalf("this test needs two CPUs (Envoy on one, the attacker on the other), the machine has %d", runtime.NumCPU())
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			t.Fatalf("binding thread %d of %d to CPU %d: %v", tid, pid, cpu, err)
		}
	}
}

// The one-host floods (TestAttackOneHost*) run in an attacker process too: the test binary re-executed with
// floodSourceEnv set. It opens floodConnsEnv connections from the loopback address in floodSourceEnv, 512
// connects in flight, writes floodBytesEnv bytes of an unterminated request on each (none: a silent flood), and
// holds every connection until Envoy closes it or floodHoldEnv has passed since the flood began; it never
// reopens one. It prints one line of figures (see floodResult).
const (
	floodSourceEnv = "LBPLANE_E2E_FLOOD_SOURCE"
	floodConnsEnv  = "LBPLANE_E2E_FLOOD_CONNS"
	floodBytesEnv  = "LBPLANE_E2E_FLOOD_BYTES"
	floodHoldEnv   = "LBPLANE_E2E_FLOOD_HOLD"
)

// floodResult is what the flood process reports: connections opened, dials that failed, connections Envoy
// closed within a second of opening them (over its global limit), connections Envoy closed later, those
// still open when the flood ended, and the longest time Envoy kept one that it closed later.
type floodResult struct {
	Opened, DialFailed, ClosedAtOnce, ClosedLater, HeldToEnd int64
	LongestClosedLater                                       time.Duration
}

func floodProcess(addr string) int {
	src := net.ParseIP(os.Getenv(floodSourceEnv))
	conns, err1 := strconv.Atoi(os.Getenv(floodConnsEnv))
	size, err2 := strconv.Atoi(os.Getenv(floodBytesEnv))
	hold, err3 := time.ParseDuration(os.Getenv(floodHoldEnv))
	if src == nil || !src.IsLoopback() || err1 != nil || err2 != nil || err3 != nil || conns < 1 || conns > 25000 ||
		size < 0 || size > 1<<20 || hold <= 0 || hold > 60*time.Second {
		fmt.Fprintf(os.Stderr, "want a loopback %s, %s up to 25000, %s up to 1 MiB and %s up to 60s\n",
			floodSourceEnv, floodConnsEnv, floodBytesEnv, floodHoldEnv)
		return 2
	}
	// One descriptor per connection, and some to spare.
	if err := raiseNoFile(uint64(conns) + 1000); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var payload []byte
	if size > 0 {
		prefix := "GET / HTTP/1.1\r\nHost: flood\r\nX-Flood: "
		payload = append([]byte(prefix), bytes.Repeat([]byte("f"), max(size-len(prefix), 1))...)
	}
	dst, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil || dst.IP.To4() == nil || src.To4() == nil {
		fmt.Fprintf(os.Stderr, "want IPv4 addresses, got %s and %s\n", src, addr)
		return 2
	}
	var dstSa, srcSa unix.SockaddrInet4
	dstSa.Port = dst.Port
	copy(dstSa.Addr[:], dst.IP.To4())
	copy(srcSa.Addr[:], src.To4())
	// One thread, non-blocking sockets and one epoll set, rather than Go's dialer and a goroutine per
	// connection: make test builds the test binary, and so this process, with the race detector, which allows
	// at most 8,128 live goroutines and slowed the dialers' every step (385 connections a second instead of
	// thousands, so that the flood no longer met Envoy's limit in its time).
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer unix.Close(epfd)
	type conn struct {
		fd                int
		started, opened   time.Time
		connected, closed bool
		written           int
	}
	var r floodResult
	byFD := map[int32]*conn{}
	inflight, attempted := 0, 0
	const maxInflight = 512
	// A connect waits up to 10 s: SYNs beyond the listener's backlog are dropped and retried by the kernel,
	// and with a shorter timeout a busy machine's flood gave up before it reached Envoy's limit.
	const connectTimeout = 10 * time.Second
	fail := func(c *conn) {
		r.DialFailed++
		inflight--
		delete(byFD, int32(c.fd))
		unix.Close(c.fd)
	}
	watch := func(c *conn, events uint32) {
		unix.EpollCtl(epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: events, Fd: int32(c.fd)})
	}
	// write sends what remains of the payload; once it is all out, only reads are watched.
	write := func(c *conn) {
		for c.written < len(payload) {
			n, err := unix.SendmsgN(c.fd, payload[c.written:], nil, nil, unix.MSG_NOSIGNAL)
			if err != nil {
				if err == unix.EAGAIN {
					return
				}
				break // Envoy closed it: the read side will tell
			}
			c.written += n
		}
		watch(c, unix.EPOLLIN|unix.EPOLLRDHUP)
	}
	began := time.Now()
	end := began.Add(hold)
	events := make([]unix.EpollEvent, 1024)
	buf := make([]byte, 64<<10)
	lastSweep := began
	for time.Now().Before(end) {
		// A connect that failed is made again, as an attacker would, until conns are open or in flight (at
		// most 2 × conns attempts): on a loaded machine SYNs dropped past the backlog made hundreds fail, and
		// the flood fell short of what the test describes.
		for inflight < maxInflight && int(r.Opened)+inflight < conns && attempted < 2*conns {
			attempted++
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				r.DialFailed++
				continue
			}
			if err := unix.Bind(fd, &srcSa); err != nil {
				unix.Close(fd)
				r.DialFailed++
				continue
			}
			if err := unix.Connect(fd, &dstSa); err != nil && err != unix.EINPROGRESS {
				unix.Close(fd)
				r.DialFailed++
				continue
			}
			c := &conn{fd: fd, started: time.Now()}
			byFD[int32(fd)] = c
			inflight++
			unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)})
		}
		n, err := unix.EpollWait(epfd, events, 50)
		if err != nil && err != unix.EINTR {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		now := time.Now()
		for _, ev := range events[:max(n, 0)] {
			c := byFD[ev.Fd]
			if c == nil || c.closed {
				continue
			}
			if !c.connected {
				if soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soerr != 0 {
					fail(c)
					continue
				}
				c.connected, c.opened = true, now
				inflight--
				r.Opened++
				write(c)
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 {
				write(c)
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
				continue
			}
			// Read what Envoy sent (a 408 before closing, say) without blocking; end of file or an error
			// means Envoy closed the connection.
			for {
				m, err := unix.Read(c.fd, buf)
				if err == unix.EAGAIN || err == unix.EINTR {
					break
				}
				if m > 0 {
					continue
				}
				c.closed = true
				unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
				if held := now.Sub(c.opened); held < time.Second {
					r.ClosedAtOnce++
				} else {
					r.ClosedLater++
					r.LongestClosedLater = max(r.LongestClosedLater, held)
				}
				break
			}
		}
		if now.Sub(lastSweep) > time.Second {
			lastSweep = now
			for _, c := range byFD {
				if !c.connected && now.Sub(c.started) > connectTimeout {
					fail(c)
				}
			}
		}
	}
	for _, c := range byFD {
		switch {
		case !c.connected:
			r.DialFailed++
		case !c.closed:
			r.HeldToEnd++
		}
		// Reset instead of FIN: thousands of sockets in TIME_WAIT would hold the ephemeral ports of the
		// attacker's address for a minute.
		unix.SetsockoptLinger(c.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		unix.Close(c.fd)
	}
	fmt.Println(r.Opened, r.DialFailed, r.ClosedAtOnce, r.ClosedLater, r.HeldToEnd, int64(r.LongestClosedLater))
	return 0
}

// raiseNoFile raises this process's open-file limit (soft and, as root, hard) to at least n.
func raiseNoFile(n uint64) error {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= n {
		return nil
	}
	rl.Cur = n
	if rl.Max < n {
		rl.Max = n
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("raising the open-file limit to %d: %v; run the tests as root, or with `ulimit -n %d` (or more) in the shell that starts them", n, err, n)
	}
	return nil
}

// flood is a running flood process.
type flood struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	cancel context.CancelFunc
	began  time.Time
}

// startFlood starts a flood process bound to the attacker's CPU (as startRapidResetAttack does): conns
// connections from src to addr, each sending size bytes of an unterminated request, held for up to hold.
func startFlood(t *testing.T, addr, src string, conns, size int, hold time.Duration) *flood {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hold+60*time.Second)
	f := &flood{cancel: cancel}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		cancel()
		t.Fatal("taskset (util-linux) is needed to keep the attacker off Envoy's CPU: apt-get install util-linux")
	}
	f.cmd = exec.CommandContext(ctx, taskset, "-c", strconv.Itoa(attackerCPU), os.Args[0])
	f.cmd.Env = append(os.Environ(), attackerAddrEnv+"="+addr, floodSourceEnv+"="+src, floodConnsEnv+"="+strconv.Itoa(conns),
		floodBytesEnv+"="+strconv.Itoa(size), floodHoldEnv+"="+hold.String())
	f.cmd.Stdout, f.cmd.Stderr = &f.out, os.Stderr
	f.began = time.Now()
	if err := f.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cancel(); f.cmd.Wait() })
	return f
}

// Wait returns the flood's figures once it has ended.
func (f *flood) Wait(t *testing.T) floodResult {
	t.Helper()
	err := f.cmd.Wait()
	f.cancel()
	if err != nil {
		t.Fatalf("flood process: %v (output %q)", err, f.out.String())
	}
	var r floodResult
	var longest int64
	if _, err := fmt.Sscan(f.out.String(), &r.Opened, &r.DialFailed, &r.ClosedAtOnce, &r.ClosedLater, &r.HeldToEnd, &longest); err != nil {
		t.Fatalf("flood process printed %q: %v", f.out.String(), err)
	}
	r.LongestClosedLater = time.Duration(longest)
	return r
}
