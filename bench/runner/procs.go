package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process whose output goes to a log file in the run directory.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func start(dir, name string, env []string, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so that stop takes nginx's or HAProxy's workers along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// kill ends the process at once, as a crash would: no graceful close of its connections.
func (p *proc) kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// waitPort waits until something accepts connections on addr.
func waitPort(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after %s", addr, timeout)
}

// tree returns pid and its descendants (nginx and HAProxy fork workers).
func tree(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(p); err == nil {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

type stat struct {
	ppid     int
	cpuTicks int64
	rssBytes int64
}

const clockTicks = 100 // USER_HZ on Linux

func readStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	// The command name may hold spaces; fields start after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return stat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	rssPages, _ := strconv.ParseInt(f[21], 10, 64)
	return stat{ppid: ppid, cpuTicks: utime + stime, rssBytes: rssPages * int64(os.Getpagesize())}, nil
}

// peakRSS is the most resident memory the process has had (VmHWM), 0 when unknown.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// usage is CPU seconds and resident memory of a process tree.
type usage struct {
	CPUSeconds float64
	RSSBytes   int64
}

func treeUsage(pid int) usage {
	var u usage
	for _, p := range tree(pid) {
		if st, err := readStat(p); err == nil {
			u.CPUSeconds += float64(st.cpuTicks) / clockTicks
			u.RSSBytes += st.rssBytes
		}
	}
	return u
}

// sampler records a process tree's RSS every interval until stopped: the peak for the run, and the series
// for the memory-over-time plot.
type sampler struct {
	mu      sync.Mutex
	peak    int64
	series  []memPoint
	stopped chan struct{}
	done    chan struct{}
}

type memPoint struct {
	T   float64 `json:"t"` // seconds since the benchmark started
	RSS int64   `json:"rss"`
}

func sample(ctx context.Context, pid int, every time.Duration, epoch time.Time) *sampler {
	s := &sampler{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			u := treeUsage(pid)
			s.mu.Lock()
			s.peak = max(s.peak, u.RSSBytes)
			s.series = append(s.series, memPoint{T: time.Since(epoch).Seconds(), RSS: u.RSSBytes})
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-s.stopped:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() (int64, []memPoint) {
	close(s.stopped)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.series
}

// peakSince is the highest RSS sampled since t (seconds since the benchmark started).
func (s *sampler) peakSince(t float64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var peak int64
	for _, p := range s.series {
		if p.T >= t {
			peak = max(peak, p.RSS)
		}
	}
	return peak
}
