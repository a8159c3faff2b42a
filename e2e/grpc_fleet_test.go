package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/internal/tools"
)

// fleetClients is how many proxyless gRPC clients TestThousandProxylessGRPCClients runs.
const fleetClients = 1000

// grpcFleetBinary builds internal/grpcfleet/fleet, once, without the race detector: a thousand grpc-go
// channels with their xDS clients and subchannels hold more goroutines than the detector allows one process.
var grpcFleetBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "grpc-fleet")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/grpcfleet/fleet")
	cmd.Dir = tools.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the gRPC fleet: %v\n%s", err, out)
	}
	return bin, nil
})

// grpcFleet drives a running internal/grpcfleet/fleet process: a command a line, an answer a JSON line.
type grpcFleet struct {
	in       io.WriteCloser
	out      *bufio.Scanner
	backends []fleetBackend
}

// fleetBackend is one of the fleet's gRPC backends, as the policy template takes it.
type fleetBackend struct {
	Name string `json:"name"`
	Port int    `json:"port"`
}

func startGRPCFleet(t *testing.T, l *Lbplane, clients int, target string) *grpcFleet {
	t.Helper()
	bin, err := grpcFleetBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-clients", fmt.Sprint(clients), "-api", l.APIURL, "-xds", l.XDSAddr,
		"-target", target, "-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "LBPLANE_TOKEN="+token)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("gRPC fleet's stderr (last 4 KiB): %s", tail(stderr.String(), 4096))
		}
	})
	f := &grpcFleet{in: in, out: bufio.NewScanner(stdout)}
	f.out.Buffer(nil, 1<<20)
	var started struct {
		Backends []fleetBackend `json:"backends"`
	}
	f.answer(t, &started)
	f.backends = started.Backends
	return f
}

// answer reads the fleet's next JSON line into v; a line with "error" fails the test.
func (f *grpcFleet) answer(t *testing.T, v any) {
	t.Helper()
	if !f.out.Scan() {
		t.Fatalf("the gRPC fleet ended: %v", f.out.Err())
	}
	var failed struct{ Error string }
	if json.Unmarshal(f.out.Bytes(), &failed); failed.Error != "" {
		t.Fatalf("the gRPC fleet: %s", failed.Error)
	}
	if err := json.Unmarshal(f.out.Bytes(), v); err != nil {
		t.Fatalf("the gRPC fleet said %q: %v", f.out.Text(), err)
	}
}

func (f *grpcFleet) do(t *testing.T, command string, v any) {
	t.Helper()
	if _, err := io.WriteString(f.in, command+"\n"); err != nil {
		t.Fatal(err)
	}
	f.answer(t, v)
}

type fleetCalls struct {
	Answers    map[string]int `json:"answers"`
	Errors     int            `json:"errors"`
	FirstError string         `json:"firstError"`
}

// TestThousandProxylessGRPCClients runs 1,000 grpc-go xDS clients (state of the world), each its own node with
// its own certificate, against one lbplane. Each of five changes of the endpoints they balance over is
// acknowledged by every one of them, and the next call of every client follows it; lbplane counts no NACK.
// How long a change takes to reach all of them is a benchmark's question (bench/runner -only grpc-fleet),
// logged here only.
func TestThousandProxylessGRPCClients(t *testing.T) {
	t.Parallel()
	// A thousand xDS streams in lbplane and as many goroutines per stream: lbplane as it ships (the race
	// detector allows 8,128 goroutines a process).
	l := &Lbplane{DataDir: t.TempDir(), bin: plainLbplane}
	if err := l.start(t, serve.Ports{XDS: "127.0.0.1:0", API: "127.0.0.1:0", Metrics: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	p := struct {
		Name, Algorithm string
		Hash, TLS       bool
		Port            int
		B               []fleetBackend
	}{Name: "fleet", Algorithm: "RoundRobin", Port: reservePort(t)}
	f := startGRPCFleet(t, l, fleetClients, fmt.Sprintf("fleet.grpc.test:%d", p.Port))
	if len(f.backends) != 3 {
		t.Fatalf("the fleet started %d backends, want 3", len(f.backends))
	}
	p.B = f.backends
	push(t, l, policy(t, grpcPolicy, &p))
	var ready struct {
		Ready   int     `json:"ready"`
		Seconds float64 `json:"seconds"`
	}
	f.do(t, "connect", &ready)
	t.Logf("%d clients answered a first call %.1fs after they started", ready.Ready, ready.Seconds)
	if ready.Ready != fleetClients {
		t.Fatalf("%d clients ready, want %d", ready.Ready, fleetClients)
	}
	eventually(t, time.Minute, "every gRPC client is SYNCED", func() error {
		ps, err := l.Client.Proxies(context.Background())
		if err != nil {
			return err
		}
		return grpcProxiesSynced(ps, fleetClients)
	})
	// Each change leaves a different set of backends.
	for i, keep := range [][]int{{0, 1}, {1, 2}, {2}, {0, 2}, {0, 1, 2}} {
		p.B = nil
		want := map[string]bool{}
		for _, k := range keep {
			p.B = append(p.B, f.backends[k])
			want[f.backends[k].Name] = true
		}
		before := l.currentVersion(t)
		start := time.Now()
		push(t, l, policy(t, grpcPolicy, &p))
		eventually(t, time.Minute, fmt.Sprintf("change %d is acknowledged by all %d clients", i+1, fleetClients), func() error {
			ps, err := l.Client.Proxies(context.Background())
			if err != nil {
				return err
			}
			if err := grpcProxiesSynced(ps, fleetClients); err != nil {
				return err
			}
			for _, p := range ps {
				if p.Version == before {
					return fmt.Errorf("%s still runs %s", p.NodeID, before)
				}
			}
			return nil
		})
		t.Logf("change %d: every client acknowledged it %s after the push was sent (not asserted: the machine is shared)", i+1, time.Since(start))
		// grpc-go acknowledges an update before its balancer has taken it: the clients' calls follow within
		// moments, not necessarily at once.
		eventually(t, 30*time.Second, fmt.Sprintf("after change %d every client calls only %v", i+1, slices.Sorted(maps.Keys(want))), func() error {
			var got fleetCalls
			f.do(t, "call", &got)
			if got.Errors > 0 {
				return fmt.Errorf("%d calls failed, the first: %s", got.Errors, got.FirstError)
			}
			total := 0
			for b, n := range got.Answers {
				if !want[b] {
					return fmt.Errorf("%d calls reached %s: %v", n, b, got.Answers)
				}
				total += n
			}
			if total != fleetClients {
				return fmt.Errorf("%d answers, want %d", total, fleetClients)
			}
			return nil
		})
	}
	noNacks(t, l)
}

// currentVersion is the config version lbplane serves its proxies now (every proxy's currentVersion).
func (l *Lbplane) currentVersion(t *testing.T) string {
	t.Helper()
	ps, err := l.Client.Proxies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 {
		t.Fatal("no proxy connected")
	}
	return ps[0].Current
}
