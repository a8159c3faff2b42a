package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	"github.com/lbplane/lbplane/internal/docblocks"
	"github.com/lbplane/lbplane/internal/tools"
)

// The commands the README's quick starts stand on: one lbplane-backend process serving several addresses, and
// lbctl envoy running a real Envoy fed by lbplane as its child.

var servingLine = regexp.MustCompile(`(?m)^serving (\S+) on 127\.0\.0\.1:(\d+)$`)

// startBackendProcess runs lbplane-backend with args and returns the backends it serves, read from the lines
// it prints once every address is bound (port 0 picks free ports).
func startBackendProcess(t *testing.T, n int, args ...string) (*Process, []procBackend) {
	t.Helper()
	p := startProcess(t, "lbplane-backend.log", filepath.Join(binDir, "lbplane-backend"), args...)
	var found [][]string
	eventually(t, 30*time.Second, fmt.Sprintf("lbplane-backend serves %d addresses", n), func() error {
		b, _ := os.ReadFile(p.log)
		found = servingLine.FindAllStringSubmatch(string(b), -1)
		if len(found) < n {
			return fmt.Errorf("%d of %d serving: %s", len(found), n, b)
		}
		return nil
	})
	var out []procBackend
	for _, m := range found {
		port, _ := strconv.Atoi(m[2])
		out = append(out, procBackend{Port: port, name: m[1]})
	}
	return p, out
}

// procBackend is one address an lbplane-backend process serves, and the name it answers with.
type procBackend struct {
	Port int
	name string
}

// answeredBy asks url once and returns X-Backend.
func answeredBy(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Backend"), nil
}

func TestBackendServesSeveralAddresses(t *testing.T) {
	t.Parallel()
	// Several addresses, named after the ports they bound.
	_, bs := startBackendProcess(t, 3, "--listen", "127.0.0.1:0,127.0.0.1:0", "--listen", "127.0.0.1:0")
	seen := map[int]bool{}
	for _, b := range bs {
		if want := "backend-" + strconv.Itoa(b.Port); b.name != want {
			t.Errorf("port %d is named %q, want %q", b.Port, b.name, want)
		}
		got, err := answeredBy(fmt.Sprintf("http://127.0.0.1:%d/", b.Port))
		if err != nil || got != b.name {
			t.Errorf("port %d answered %q (%v), want %q", b.Port, got, err, b.name)
		}
		seen[b.Port] = true
	}
	if len(seen) != 3 {
		t.Errorf("ports %v: want 3 different ones", seen)
	}
	// --name once per address, in order.
	_, named := startBackendProcess(t, 2, "--listen", "127.0.0.1:0,127.0.0.1:0", "--name", "left,right")
	for i, want := range []string{"left", "right"} {
		if got, err := answeredBy(fmt.Sprintf("http://127.0.0.1:%d/", named[i].Port)); err != nil || got != want {
			t.Errorf("port %d answered %q (%v), want %q", named[i].Port, got, err, want)
		}
	}
	// One address: named by the address as given, as it always was.
	_, one := startBackendProcess(t, 1, "--listen", "127.0.0.1:0")
	if got, err := answeredBy(fmt.Sprintf("http://127.0.0.1:%d/", one[0].Port)); err != nil || got != "127.0.0.1:0" {
		t.Errorf("one address answered %q (%v), want 127.0.0.1:0", got, err)
	}
}

// lbctlEnvoy runs `lbctl envoy` against l, as a user would with LBPLANE_SERVER and LBPLANE_TOKEN set.
func lbctlEnvoy(t *testing.T, l *Lbplane, nodeID, outDir, logName string) *Process {
	t.Helper()
	envoy := tools.Require(t, "envoy")
	cmd := exec.Command(filepath.Join(binDir, "lbctl"), "envoy", "--node-id", nodeID, "--xds-address", l.XDSAddr, "--stats-port", "0",
		"--out-dir", outDir, "--envoy-path", envoy, "--wait-server", "60s", "--", "--concurrency", "1", "-l", "warn")
	cmd.Env = append(docblocks.Environ(), "LBPLANE_SERVER="+l.APIURL, "LBPLANE_TOKEN="+token)
	// SIGKILL should the test binary die (runLogged); lbctl then takes Envoy with it.
	return runLogged(t, cmd, logName)
}

// envoyChild returns the pid of the Envoy that p (lbctl envoy) runs as its child.
func envoyChild(t *testing.T, p *Process) int {
	t.Helper()
	var pid int
	eventually(t, 30*time.Second, "lbctl envoy has an Envoy child", func() error {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p.cmd.Process.Pid))
		for _, task := range tasks {
			b, _ := os.ReadFile(task)
			for _, f := range strings.Fields(string(b)) {
				c, _ := strconv.Atoi(f)
				if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(comm)) == "envoy" {
					pid = c
					return nil
				}
			}
		}
		return fmt.Errorf("no envoy among the children of %d", p.cmd.Process.Pid)
	})
	return pid
}

// processGone tells whether pid has exited (gone, or a zombie nobody has reaped yet).
func processGone(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// pid (comm) STATE ...: comm may hold spaces, the state follows its closing parenthesis.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return nil
	}
	return fmt.Errorf("process %d is still running", pid)
}

// TestLbctlEnvoy: `lbctl envoy` started before lbplane waits for it, gets a certificate, runs a real Envoy that
// serves a policy over backends of one lbplane-backend process, and stops that Envoy when it is stopped
// (SIGTERM, passed on) and when it is killed (SIGKILL: Envoy's PR_SET_PDEATHSIG and lbctl's own).
func TestLbctlEnvoy(t *testing.T) {
	t.Parallel()
	_, bs := startBackendProcess(t, 3, "--listen", "127.0.0.1:0,127.0.0.1:0,127.0.0.1:0")
	l := startLbplane(t)
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	push(t, l, policy(t, roundRobin, map[string]any{"Port": port, "B": bs}))
	// lbplane down: lbctl envoy finds its address refusing connections and waits.
	l.Kill()
	out := filepath.Join(t.TempDir(), "edge-1")
	p := lbctlEnvoy(t, l, "edge-1", out, "lbctl-envoy.log")
	eventually(t, 30*time.Second, "lbctl envoy says it waits for lbplane", func() error {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			t.Fatalf("lbctl envoy exited while lbplane was down (%s): %s", p.cmd.ProcessState, b)
		default:
		}
		b, _ := os.ReadFile(p.log)
		if bytes.Contains(b, []byte("running ")) {
			t.Fatalf("lbctl envoy ran Envoy without a certificate: %s", b)
		}
		if !bytes.Contains(b, []byte("waiting up to 1m0s for lbplane at "+l.APIURL)) || !bytes.Contains(b, []byte("connection refused")) {
			return fmt.Errorf("log: %s", b)
		}
		return nil
	})
	l.Restart(t)
	// Every backend of the one process answers through Envoy.
	eventually(t, 60*time.Second, "Envoy from lbctl envoy spreads over the 3 backends", func() error {
		seen := map[string]bool{}
		for i := 0; i < 30; i++ {
			got, err := answeredBy(url)
			if err != nil {
				return err
			}
			seen[got] = true
		}
		for _, b := range bs {
			if !seen[b.name] {
				return fmt.Errorf("answered by %v, not %s", seen, b.name)
			}
		}
		return nil
	})
	for _, f := range []string{"envoy.yaml", "admin.sock"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("--out-dir: %v", err)
		}
	}
	// Envoy's access log is on lbctl envoy's standard output, as the README's quick start redirects it: each
	// request's line names the policy and the endpoint that answered.
	eventually(t, 20*time.Second, "an access log line in lbctl envoy's output", func() error {
		b, _ := os.ReadFile(p.log)
		for _, line := range strings.Split(string(b), "\n") {
			var a accessLine
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &a) != nil || a.Policy != "default/p" {
				continue
			}
			for _, be := range bs {
				if a.Endpoint == fmt.Sprintf("127.0.0.1:%d", be.Port) && a.Backend == "app" && a.Status == 200 {
					return nil
				}
			}
			return fmt.Errorf("an access log line with no backend's endpoint: %s", line)
		}
		return fmt.Errorf("no access log line of policy default/p in lbctl envoy's output")
	})

	// SIGTERM to lbctl reaches Envoy; both exit.
	envoyPid := envoyChild(t, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("lbctl envoy did not exit within 60s of SIGTERM")
	}
	eventually(t, 30*time.Second, "Envoy stops with lbctl envoy", func() error { return processGone(envoyPid) })
	if _, err := answeredBy(url); err == nil {
		t.Error("the listener still answers after Envoy stopped")
	}

	// Run again (the same node and directory) and kill lbctl outright: Envoy goes too.
	p2 := lbctlEnvoy(t, l, "edge-1", out, "lbctl-envoy-2.log")
	waitServing(t, url, bs[0].name, bs[1].name, bs[2].name)
	envoyPid = envoyChild(t, p2)
	p2.Kill()
	eventually(t, 30*time.Second, "Envoy stops when lbctl envoy is killed", func() error { return processGone(envoyPid) })
}
