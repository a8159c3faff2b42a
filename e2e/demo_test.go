package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/tools"
)

// demoPorts are the ports hack/demo.sh uses, before its offset.
var demoPorts = []int{18000, 18001, 18002, 18081, 18082, 18083, 19001, 10080}

// demoOffset finds a port offset at which every demo port is free, so the test runs beside a developer's
// own `make run`. It stays out of the kernel's ephemeral port range, where client sockets of other tests
// (thousands after a connection flood) come and go.
func demoOffset(t *testing.T) int {
	t.Helper()
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &lo, &hi)
	}
	for off := 500; off <= 46000; off += 500 {
		if first, last := 10080+off, 19001+off; last >= lo && first <= hi || last > 65535 {
			continue
		}
		free := true
		for _, p := range demoPorts {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+off))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return off
		}
	}
	t.Fatal("no port offset with all demo ports free")
	return 0
}

// TestDemoOutlivesMakeRun runs the demo script as `make run` does, and checks after it returned that
// Envoy still serves the printed URL and lbctl status shows it SYNCED; then make stop's path stops it.
// Before the supervisor, Envoy (PR_SET_PDEATHSIG) died with the script and the printed curl failed.
func TestDemoOutlivesMakeRun(t *testing.T) {
	t.Parallel() // the demo's ports are offset outside the ephemeral range, where the other tests' ports are
	tools.Require(t, "envoy")
	run := t.TempDir()
	env := append(os.Environ(), "LBPLANE_DEMO_RUN_DIR="+run, "LBPLANE_DEMO_BIN="+binDir,
		"LBPLANE_DEMO_PORT_OFFSET="+strconv.Itoa(demoOffset(t)))
	script := filepath.Join(tools.RepoRoot(), "hack", "demo.sh")
	demo := func(ctx context.Context, arg string) (string, error) {
		cmd := exec.CommandContext(ctx, script, arg)
		cmd.Dir, cmd.Env = tools.RepoRoot(), env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		demo(ctx, "stop")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := demo(ctx, "start")
	if err != nil {
		t.Fatalf("demo start: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`curl -si (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("demo printed no URL to try:\n%s", out)
	}
	// The script has returned: the Envoy it started must still be running and serving.
	pidText, err := os.ReadFile(filepath.Join(run, "envoy.pid"))
	if err != nil {
		t.Fatalf("no envoy.pid after the demo returned: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("Envoy (pid %d) is gone after the demo returned", pid)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	for i := range 30 {
		resp, err := c.Get(m[1])
		if err != nil {
			t.Fatalf("request %d to %s after the demo returned: %v", i, m[1], err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") == "" {
			t.Fatalf("request %d: status %d, X-Backend %q", i, resp.StatusCode, resp.Header.Get("X-Backend"))
		}
	}
	api := ""
	if am := regexp.MustCompile(`LBPLANE_SERVER=(http://\S+)`).FindStringSubmatch(out); am != nil {
		api = am[1]
	}
	status := exec.Command(filepath.Join(binDir, "lbctl"), "status")
	status.Env = append(os.Environ(), "LBPLANE_SERVER="+api, "LBPLANE_TOKEN_FILE="+filepath.Join(run, "data", "token"))
	st, err := status.CombinedOutput()
	if err != nil || !regexp.MustCompile(`demo-envoy\s+default\s+\S+\s+SYNCED`).Match(st) {
		t.Fatalf("lbctl status after the demo returned (err %v):\n%s", err, st)
	}

	if out, err := demo(ctx, "stop"); err != nil {
		t.Fatalf("demo stop: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "Envoy stopped", func() error {
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("pid %d still running", pid)
		}
		return nil
	})
	if resp, err := c.Get(m[1]); err == nil {
		resp.Body.Close()
		t.Fatalf("%s still answers after stop", m[1])
	}
}
