// Command stresscheck runs the end-to-end test packages several times in a row while a background load keeps
// every core busy and churns loopback connections, the way a busy CI machine does. Tests that race for ports,
// sleep instead of waiting for a signal, or time out on a slow machine fail here first.
//
// It writes a report (every run's verdict, the failures, the load it ran under) and exits non-zero when any
// run failed. `make stress` runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	runs := flag.Int("runs", 3, "how many times to run the packages")
	out := flag.String("out", "", "directory for the report and each run's output (default bench/results/<date>-<host>-stress)")
	timeout := flag.Duration("timeout", 30*time.Minute, "go test -timeout of each run")
	parallel := flag.Int("parallel", 4, "go test -parallel of each run (make test's TEST_PARALLEL)")
	maxLoad := flag.Duration("max-load", 2*time.Hour, "the background load stops after this long, whatever happens")
	connRate := flag.Int("conn-rate", 300, "loopback connections opened and closed per second by the load")
	spinners := flag.Int("spinners", runtime.NumCPU(), "goroutines burning CPU alongside the tests")
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./e2e", "./internal/kubetest"}
	}
	if *out == "" {
		host, _ := os.Hostname()
		*out = filepath.Join("bench", "results", time.Now().UTC().Format("2006-01-02")+"-"+host+"-stress")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *maxLoad)
	load, err := startLoad(ctx, *spinners, *connRate)
	if err != nil {
		fatal(err)
	}

	var results []runResult
	for i := 1; i <= *runs; i++ {
		r := runOnce(i, pkgs, *timeout, *parallel, *out)
		results = append(results, r)
		fmt.Printf("run %d: %s in %s, %d failures\n", i, r.verdict(), r.took.Round(time.Second), len(r.failures))
	}
	cancel()
	stats := load.stop()

	report := render(results, pkgs, stats, *runs, *connRate)
	if err := os.WriteFile(filepath.Join(*out, "REPORT.md"), []byte(report), 0o644); err != nil {
		fatal(err)
	}
	fmt.Print(report)
	for _, r := range results {
		if !r.ok {
			os.Exit(1)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "stresscheck:", err)
	os.Exit(2)
}

// loadStats is what the background load did, for the report.
type loadStats struct {
	spinners    int
	conns, errs int64
	took        time.Duration
}

type load struct {
	wg    sync.WaitGroup
	start time.Time
	conns atomic.Int64
	errs  atomic.Int64
	lis   net.Listener
	done  context.CancelFunc
	n     int
}

// startLoad keeps `spinners` goroutines burning CPU and opens and closes rate loopback connections a second,
// each from a new ephemeral port, until ctx ends or stop is called. The server closes first, so the TIME_WAIT
// sockets stay on its side and the ephemeral range is churned, not exhausted.
func startLoad(parent context.Context, spinners, rate int) (*load, error) {
	ctx, cancel := context.WithCancel(parent)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return nil, err
	}
	l := &load{start: time.Now(), lis: lis, done: cancel, n: spinners}
	runtime.GOMAXPROCS(spinners + 2)
	for i := 0; i < spinners; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			x := uint64(i + 1)
			for ctx.Err() == nil {
				for j := 0; j < 1_000_000; j++ {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
			}
			_ = x
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	const workers = 4
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(time.Second * workers / time.Duration(max(rate, 1)))
			defer tick.Stop()
			buf := make([]byte, 1)
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				c, err := net.DialTimeout("tcp", lis.Addr().String(), time.Second)
				if err != nil {
					l.errs.Add(1)
					continue
				}
				c.SetReadDeadline(time.Now().Add(time.Second))
				c.Read(buf) // returns at the server's close
				c.Close()
				l.conns.Add(1)
			}
		}()
	}
	return l, nil
}

func (l *load) stop() loadStats {
	l.done()
	l.lis.Close()
	l.wg.Wait()
	return loadStats{spinners: l.n, conns: l.conns.Load(), errs: l.errs.Load(), took: time.Since(l.start)}
}

type runResult struct {
	n        int
	ok       bool
	took     time.Duration
	packages []string // "ok ./e2e 312s" lines
	failures []string // the tests that failed, with their first lines of output
	log      string
}

func (r runResult) verdict() string {
	if r.ok {
		return "PASS"
	}
	return "FAIL"
}

var (
	failLine = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
	pkgLine  = regexp.MustCompile(`^(ok|FAIL)\s+\S+`)
)

func runOnce(n int, pkgs []string, timeout time.Duration, parallel int, out string) runResult {
	logPath := filepath.Join(out, fmt.Sprintf("run-%d.log", n))
	args := append([]string{"test", "-race", "-count=1", "-parallel", strconv.Itoa(parallel), "-timeout", timeout.String()}, pkgs...)
	cmd := exec.Command("go", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, os.Stderr), io.MultiWriter(&buf, os.Stderr)
	start := time.Now()
	err := cmd.Run()
	r := runResult{n: n, ok: err == nil, took: time.Since(start), log: logPath}
	os.WriteFile(logPath, buf.Bytes(), 0o644)
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var current []string
	for sc.Scan() {
		line := sc.Text()
		if m := failLine.FindStringSubmatch(line); m != nil {
			current = []string{m[1]}
			r.failures = append(r.failures, m[1])
			continue
		}
		if pkgLine.MatchString(line) {
			r.packages = append(r.packages, strings.Join(strings.Fields(line), " "))
		}
		// The first lines after a failure say why.
		if len(current) > 0 && len(current) < 4 && strings.TrimSpace(line) != "" {
			current = append(current, strings.TrimSpace(line))
			r.failures[len(r.failures)-1] = strings.Join(current, " | ")
		}
	}
	if err != nil && len(r.failures) == 0 {
		r.failures = append(r.failures, "go test: "+err.Error())
	}
	return r
}

func render(results []runResult, pkgs []string, s loadStats, runs, rate int) string {
	var b strings.Builder
	passed := 0
	for _, r := range results {
		if r.ok {
			passed++
		}
	}
	fmt.Fprintf(&b, "# Stress check: %d of %d runs passed\n\n", passed, runs)
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	fmt.Fprintf(&b, "Command: `make stress` (`go run ./hack/stresscheck %s`), %s, %d cores, commit %s.\n\n",
		strings.Join(pkgs, " "), time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), commit)
	fmt.Fprintf(&b, "Each run is `go test -race -count=1 %s`. Alongside, for %s: %d goroutines burning CPU and %d loopback connections opened and closed a second (%d in all, %d failed to connect), each from a fresh ephemeral port.\n\n",
		strings.Join(pkgs, " "), s.took.Round(time.Second), s.spinners, rate, s.conns, s.errs)
	b.WriteString("| run | verdict | time | packages | failed tests |\n|---|---|---|---|---|\n")
	for _, r := range results {
		failed := "none"
		if len(r.failures) > 0 {
			failed = strings.ReplaceAll(strings.Join(r.failures, "; "), "|", "\\|")
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", r.n, r.verdict(), r.took.Round(time.Second), strings.Join(r.packages, ", "), failed)
	}
	b.WriteString("\nEach run's output is in run-N.log beside this file.\n")
	return b.String()
}
