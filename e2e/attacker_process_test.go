package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The rapid-reset attacker runs in its own process, the test binary re-executed (TestMain hands over to
// attackerProcess when attackerAddrEnv is set). In the test's own process its four busy goroutines shared
// the Go scheduler (GOMAXPROCS 2) with the trickle's clients, so the trickle's latency measured how long a
// client goroutine waited for a Go thread behind the attackers, not how long Envoy took. A real attacker is
// another process (another machine); the kernel then schedules it against Envoy and the legitimate clients.
const (
	attackerAddrEnv     = "LBPLANE_E2E_ATTACKER_ADDR"
	attackerDurationEnv = "LBPLANE_E2E_ATTACKER_DURATION"
	attackerConns       = 4
)

// attackerProcess runs attackerConns rapid-reset loops against addr for the duration in attackerDurationEnv
// (at most 30 s) and prints "streams conns" on stdout. It returns the exit code.
func attackerProcess(addr string) int {
	d, err := time.ParseDuration(os.Getenv(attackerDurationEnv))
	if err != nil || d <= 0 || d > 30*time.Second {
		fmt.Fprintf(os.Stderr, "%s: want a duration up to 30s, got %q\n", attackerDurationEnv, os.Getenv(attackerDurationEnv))
		return 2
	}
	deadline := time.Now().Add(d)
	var streams, conns atomic.Int64
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
	fmt.Println(streams.Load(), conns.Load())
	return 0
}

// rapidResetAttack is a running attacker process.
type rapidResetAttack struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	cancel context.CancelFunc
}

func startRapidResetAttack(t *testing.T, addr string, d time.Duration) *rapidResetAttack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	a := &rapidResetAttack{cancel: cancel}
	a.cmd = exec.CommandContext(ctx, os.Args[0])
	a.cmd.Env = append(os.Environ(), attackerAddrEnv+"="+addr, attackerDurationEnv+"="+d.String())
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
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats", e.AdminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok || !strings.HasPrefix(k, "http.") || strings.HasPrefix(k, "http.lbplane_stats.") || strings.HasPrefix(k, "http.admin.") {
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(k, "."+n) {
				c, _ := strconv.ParseInt(v, 10, 64)
				m[n] += c
			}
		}
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
