package e2e

import (
	"context"
	"fmt"
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
	"github.com/lbplane/lbplane/internal/grpcfleet"
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

// grpcFleet drives a running internal/grpcfleet/fleet process; an answer that is not the one asked for
// fails the test.
type grpcFleet struct{ *grpcfleet.Process }

func startGRPCFleet(t *testing.T, l *Lbplane, clients int, target string) *grpcFleet {
	t.Helper()
	bin, err := grpcFleetBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-clients", fmt.Sprint(clients), "-api", l.APIURL, "-xds", l.XDSAddr,
		"-target", target, "-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "LBPLANE_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	p, err := grpcfleet.Start(cmd)
	if err != nil {
		t.Fatalf("%v; its stderr (last 4 KiB): %s", err, tail(stderr.String(), 4096))
	}
	t.Cleanup(func() {
		p.Close(30 * time.Second)
		if t.Failed() {
			t.Logf("gRPC fleet's stderr (last 4 KiB): %s", tail(stderr.String(), 4096))
		}
	})
	return &grpcFleet{p}
}

func (f *grpcFleet) do(t *testing.T, command string, v any) {
	t.Helper()
	if err := f.Do(command, v); err != nil {
		t.Fatal(err)
	}
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
		B               []grpcfleet.BackendInfo
	}{Name: "fleet", Algorithm: "RoundRobin", Port: reservePort(t)}
	f := startGRPCFleet(t, l, fleetClients, fmt.Sprintf("fleet.grpc.test:%d", p.Port))
	if len(f.Backends) != 3 {
		t.Fatalf("the fleet started %d backends, want 3", len(f.Backends))
	}
	p.B = f.Backends
	push(t, l, policy(t, grpcPolicy, &p))
	var ready grpcfleet.Ready
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
			p.B = append(p.B, f.Backends[k])
			want[f.Backends[k].Name] = true
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
			var got grpcfleet.Calls
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
