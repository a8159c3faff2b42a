package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// chartEnvoyShutdown returns the Envoy container's preStop command and drain arguments as the chart renders
// them with these values.
func chartEnvoyShutdown(t *testing.T, set ...string) (preStop []string, drainArgs []string) {
	t.Helper()
	out, err := helm(t, append([]string{"template", "demo", chartDir, "-n", "lbplane", "--kube-version", "1.37.1"}, set...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Spec     struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Args      []string `json:"args"`
							Lifecycle struct {
								PreStop struct {
									Exec struct{ Command []string } `json:"exec"`
								} `json:"preStop"`
							} `json:"lifecycle"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if yaml.Unmarshal([]byte(doc), &obj) != nil || obj.Kind != "Deployment" || obj.Metadata.Name != "demo-lbplane-envoy" {
			continue
		}
		c := obj.Spec.Template.Spec.Containers[0]
		for i, a := range c.Args {
			if strings.HasPrefix(a, "--drain-") && i+1 < len(c.Args) {
				drainArgs = append(drainArgs, a, c.Args[i+1])
			}
		}
		return c.Lifecycle.PreStop.Exec.Command, drainArgs
	}
	t.Fatal("the chart rendered no Envoy Deployment")
	return nil, nil
}

// service stands for a Kubernetes Service in front of Envoy pods: each new connection goes to one of the
// live endpoints in turn, and removing an endpoint (what kube-proxy does some time after a pod starts
// terminating) only stops new connections to it.
type service struct {
	mu    sync.Mutex
	addrs []string
	next  int
	dials map[string]*atomic.Int64
}

func (s *service) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	s.mu.Lock()
	addr := s.addrs[s.next%len(s.addrs)]
	s.next++
	s.mu.Unlock()
	s.dials[addr].Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (s *service) remove(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keep []string
	for _, a := range s.addrs {
		if a != addr {
			keep = append(keep, a)
		}
	}
	s.addrs = keep
}

// envoyStats returns admin's /stats filtered by filter, as text. e is an *Envoy or its AdminPort.
func envoyStats[A adminRef](t *testing.T, e A, filter string) string {
	t.Helper()
	return adminGet(t, e, "/stats?filter="+filter)
}

// adminGet returns the body of an Envoy admin path, read over the admin's Unix socket, failing the test
// unless it answers 200. e is an *Envoy or its AdminPort.
func adminGet[A adminRef](t *testing.T, e A, path string) string {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}

// envoyStatSum sums Envoy's counters or gauges whose name matches: prefix, anything, suffix.
func envoyStatSum[A adminRef](t *testing.T, e A, prefix, suffix string, skip ...string) int {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, "/stats?filter="+url.QueryEscape(suffix))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0
	sc := bufio.NewScanner(resp.Body)
next:
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ": ")
		// listener.<address>.worker_<n>.* repeats each worker's share of the listener's gauges.
		if !ok || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) || strings.Contains(name, ".worker_") {
			continue
		}
		for _, s := range skip {
			if strings.HasPrefix(name, s) {
				continue next
			}
		}
		n, _ := strconv.Atoi(value)
		sum += n
	}
	return sum
}

// TestEnvoyPreStopDrain runs the chart's Envoy preStop hook, the very command helm renders (only the admin
// socket's path changed to the test Envoy's), against a real Envoy started with the chart's drain arguments, while
// keep-alive clients send 200 req/s through a stand-in Service to it and a second Envoy. As in a cluster,
// the endpoint is removed from the Service a while after the hook starts (the kube-proxy delay), during
// which the draining Envoy still takes new connections. The hook must return only once that Envoy has no
// connection left, after which it is killed (the kubelet's SIGTERM, then SIGKILL): not one request fails.
//
// Not proven here: that the kubelet runs the hook and waits terminationGracePeriodSeconds (no kubelet on
// these machines), and how long kube-proxy really takes (drain.seconds must cover it).
func TestEnvoyPreStopDrain(t *testing.T) {
	t.Parallel()
	preStop, drainArgs := chartEnvoyShutdown(t, "--set", "envoy.drain.seconds=3", "--set", "envoy.drain.waitSeconds=20")
	if len(preStop) != 3 || preStop[0] != "/bin/bash" || !strings.Contains(preStop[2], chartAdminSocket) {
		t.Fatalf("unexpected preStop command: %q", preStop)
	}
	if strings.Join(drainArgs, " ") != "--drain-time-s 3 --drain-strategy immediate" {
		t.Fatalf("the chart's Envoy drain arguments: %q", drainArgs)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to run the chart's preStop hook")
	}

	bs := startBackends(t, "d1", "d2")
	l := startLbplane(t)
	// One policy per Envoy, so that each has a port of its own on this host (in a cluster both listen on the
	// same port in their own pods).
	ports := map[string]int{}
	envoys := map[string]*Envoy{}
	for _, name := range []string{"a", "b"} {
		envoys[name] = startEnvoyDraining(t, l, "envoy-"+name, "group-"+name, true, envoyTLS(t, l, "envoy-"+name, "group-"+name), drainArgs...)
		ports[name] = reservePort(t)
		push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  proxyGroup: {{.Group}}
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.B1}}}, {address: 127.0.0.1, port: {{.B2}}}]}]
`, map[string]any{"Name": "drain-" + name, "Group": "group-" + name, "Port": ports[name], "B1": bs[0].Port, "B2": bs[1].Port}))
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports[name]), "d1", "d2")
	}
	addrA, addrB := fmt.Sprintf("127.0.0.1:%d", ports["a"]), fmt.Sprintf("127.0.0.1:%d", ports["b"])
	svc := &service{addrs: []string{addrA, addrB}, dials: map[string]*atomic.Int64{addrA: {}, addrB: {}}}
	client := &Client{HTTP: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: svc.dial, MaxIdleConnsPerHost: 64}}}
	load := startLoadWith(client, "http://lbplane-envoy.test/", 200, 8, 2*time.Minute)
	eventually(t, 20*time.Second, "both Envoys carry the load", func() error {
		a := envoyStatSum(t, envoys["a"].AdminPort, "listener.127.0.0.1_", ".downstream_cx_active")
		b := envoyStatSum(t, envoys["b"].AdminPort, "listener.127.0.0.1_", ".downstream_cx_active")
		if a == 0 || b == 0 || load.OK.Load() < 200 {
			return fmt.Errorf("open connections a=%d b=%d, %d requests", a, b, load.OK.Load())
		}
		return nil
	})

	// The pod is deleted: the kubelet runs the hook; a second later the Service stops sending to it.
	hook := strings.ReplaceAll(preStop[2], chartAdminSocket, envoys["a"].AdminSocket)
	hookDone := make(chan error, 1)
	started := time.Now()
	dialsBefore := svc.dials[addrA].Load()
	go func() {
		out, err := exec.Command(bash, preStop[1], hook).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, out)
		}
		hookDone <- err
	}()
	time.Sleep(time.Second) // the kube-proxy delay, which drain.seconds covers
	svc.remove(addrA)
	dialsDuringDrain := svc.dials[addrA].Load() - dialsBefore
	var hookErr error
	select {
	case hookErr = <-hookDone:
	case <-time.After(time.Minute):
		t.Fatal("the preStop hook did not return within a minute (its bound is 3 s + 20 s)")
	}
	took := time.Since(started)
	if hookErr != nil {
		t.Fatalf("preStop hook: %v", hookErr)
	}
	// What the hook waits for, read again here: requests in flight, and connections beyond the HTTP ones
	// (TCP listeners'; none in this test). Idle keep-alive connections may remain.
	skip := []string{"listener.admin.", "listener.lbplane_stats.", "http.admin.", "http.lbplane_stats."}
	conns := envoyStatSum(t, envoys["a"].AdminPort, "listener.", ".downstream_cx_active", skip...)
	busy := conns - envoyStatSum(t, envoys["a"].AdminPort, "http.", ".downstream_cx_active", skip...) +
		envoyStatSum(t, envoys["a"].AdminPort, "http.", ".downstream_rq_active", skip...)
	drainClosed := envoyStatSum(t, envoys["a"].AdminPort, "http.", ".downstream_cx_drain_close")
	activeStats := envoyStats(t, envoys["a"].AdminPort, "active")
	// The kubelet's SIGTERM after the hook.
	envoys["a"].Kill()
	okAfter := load.OK.Load()
	eventually(t, 20*time.Second, "traffic goes on through the other Envoy", func() error {
		if load.OK.Load() < okAfter+200 {
			return fmt.Errorf("%d requests since", load.OK.Load()-okAfter)
		}
		return nil
	})
	load.Stop()
	t.Logf("hook took %s; new connections to the draining Envoy in the first second: %d; closed by the drain: %d; "+
		"when the hook returned: %d busy, %d connections open (idle keep-alive); requests %d ok, %d failed",
		took.Round(time.Millisecond), dialsDuringDrain, drainClosed, busy, conns, load.OK.Load(), load.Failed.Load())
	load.RequireNoFailures(t, 500)
	if busy != 0 {
		t.Errorf("the hook returned with %d requests or TCP connections still in flight on the draining Envoy:\n%s", busy, activeStats)
	}
	if took >= 22*time.Second {
		t.Errorf("the hook took %s: it waited out its bound (3 s + 20 s) instead of seeing the Envoy idle", took)
	}
	if drainClosed == 0 {
		t.Error("the draining Envoy closed no connection with Connection: close (downstream_cx_drain_close is 0): the drain did not reach the clients")
	}
	if took < 3*time.Second {
		t.Errorf("the hook returned after %s, before the drain period (3 s) in which the Service may still send new connections", took)
	}
}
