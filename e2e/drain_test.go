package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// chartShutdown is how the chart's Envoy pod shuts down, as helm renders it: Envoy's drain arguments, its
// preStop hook (an HTTP GET to envoy-sidecar) and its liveness probe, and envoy-sidecar's arguments.
type chartShutdown struct {
	DrainArgs            []string
	PreStopPath          string
	PreStopPort          any
	LivenessPath         string
	LivenessPort         any
	SidecarCommand       []string
	SidecarArgs          []string
	EnvoyRunsNoCommand   bool // no exec probe or hook in the Envoy container
	TerminationGraceSecs int
}

// chartEnvoyShutdown returns the Envoy pod's shutdown as the chart renders it with these values.
func chartEnvoyShutdown(t *testing.T, set ...string) chartShutdown {
	t.Helper()
	out, err := helm(t, append([]string{"template", "demo", chartDir, "-n", "lbplane", "--kube-version", "1.37.1"}, set...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	type handler struct {
		HTTPGet *struct {
			Path string `json:"path"`
			Port any    `json:"port"` // a number, or a port's name
		} `json:"httpGet"`
		Exec *struct{ Command []string } `json:"exec"`
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Spec     struct {
				Template struct {
					Spec struct {
						TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
						Containers                    []struct {
							Name           string   `json:"name"`
							Command        []string `json:"command"`
							Args           []string `json:"args"`
							ReadinessProbe handler  `json:"readinessProbe"`
							LivenessProbe  handler  `json:"livenessProbe"`
							Lifecycle      struct {
								PreStop handler `json:"preStop"`
							} `json:"lifecycle"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if yaml.Unmarshal([]byte(doc), &obj) != nil || obj.Kind != "Deployment" || obj.Metadata.Name != "demo-lbplane-envoy" {
			continue
		}
		var sd chartShutdown
		sd.TerminationGraceSecs = obj.Spec.Template.Spec.TerminationGracePeriodSeconds
		for _, c := range obj.Spec.Template.Spec.Containers {
			switch c.Name {
			case "envoy":
				for i, a := range c.Args {
					if strings.HasPrefix(a, "--drain-") && i+1 < len(c.Args) {
						sd.DrainArgs = append(sd.DrainArgs, a, c.Args[i+1])
					}
				}
				if h := c.Lifecycle.PreStop.HTTPGet; h != nil {
					sd.PreStopPath, sd.PreStopPort = h.Path, h.Port
				}
				if h := c.LivenessProbe.HTTPGet; h != nil {
					sd.LivenessPath, sd.LivenessPort = h.Path, h.Port
				}
				sd.EnvoyRunsNoCommand = c.Lifecycle.PreStop.Exec == nil && c.LivenessProbe.Exec == nil && c.ReadinessProbe.Exec == nil
			case "envoy-sidecar":
				sd.SidecarCommand, sd.SidecarArgs = c.Command, c.Args
			}
		}
		return sd
	}
	t.Fatal("the chart rendered no Envoy Deployment")
	return chartShutdown{}
}

// startChartSidecar runs envoy-sidecar as the chart's Envoy pod runs it (the lbctl of the test's build,
// with the chart's arguments), with the socket changed to this host's and the address to 127.0.0.1:0; it
// returns the process and the URL it serves, read from its log.
func startChartSidecar(t *testing.T, sd chartShutdown, socket string) (*Process, string) {
	t.Helper()
	if len(sd.SidecarCommand) != 1 || sd.SidecarCommand[0] != "/lbctl" {
		t.Fatalf("envoy-sidecar's command: %q", sd.SidecarCommand)
	}
	args := slices.Clone(sd.SidecarArgs)
	for i := range args {
		switch {
		case args[i] == chartAdminSocket:
			args[i] = socket
		case i > 0 && args[i-1] == "--listen":
			if args[i] != fmt.Sprintf(":%v", sd.LivenessPort) {
				t.Fatalf("envoy-sidecar listens on %s, the probe asks port %v", args[i], sd.LivenessPort)
			}
			args[i] = "127.0.0.1:0"
		}
	}
	p := startProcess(t, "envoy-sidecar.log", filepath.Join(binDir, "lbctl"), args...)
	var url string
	eventually(t, 20*time.Second, "envoy-sidecar serves", func() error {
		b, _ := os.ReadFile(p.log)
		for _, line := range strings.Split(string(b), "\n") {
			var rec struct{ Msg, Address string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Address != "" {
				url = "http://" + rec.Address
				return nil
			}
		}
		return fmt.Errorf("log: %s", b)
	})
	return p, url
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

// TestEnvoyPreStopDrain shuts an Envoy down as the chart's pod does, with the very arguments, hook and probe
// helm renders (only the admin socket and the sidecar's address changed to this host's): envoy-sidecar (lbctl
// of this build) beside a real Envoy started with the chart's drain arguments, while keep-alive clients send
// 200 req/s through a stand-in Service to it and a second Envoy. As the kubelet does, envoy-sidecar gets its
// SIGTERM at once and the Envoy's preStop hook, GET /shutdown on envoy-sidecar, is called at the same time; as
// in a cluster, the endpoint is removed from the Service a while after (the kube-proxy delay), during which
// the draining Envoy still takes new connections. The hook must answer only once that Envoy has no request or
// TCP connection left, after which it is killed (the kubelet's SIGTERM, then SIGKILL): not one request fails.
// Envoy's liveness (GET /envoy/alive on envoy-sidecar) answers 200 while the Envoy lives, and 503 once it is
// gone. Nothing in the Envoy container runs a command: its image needs no shell.
//
// Not proven here: that the kubelet calls the hook and waits terminationGracePeriodSeconds (no kubelet on
// these machines), and how long kube-proxy really takes (drain.seconds must cover it).
func TestEnvoyPreStopDrain(t *testing.T) {
	t.Parallel()
	sd := chartEnvoyShutdown(t, "--set", "envoy.drain.seconds=3", "--set", "envoy.drain.waitSeconds=20")
	if !sd.EnvoyRunsNoCommand || sd.PreStopPath != "/shutdown" || sd.LivenessPath != "/envoy/alive" || sd.PreStopPort != sd.LivenessPort {
		t.Fatalf("the chart's Envoy shutdown: %+v", sd)
	}
	if strings.Join(sd.DrainArgs, " ") != "--drain-time-s 3 --drain-strategy immediate" || sd.TerminationGraceSecs != 3+20+5 {
		t.Fatalf("the chart's Envoy drain: %+v", sd)
	}

	bs := startBackends(t, "d1", "d2")
	l := startLbplane(t)
	// One policy per Envoy, so that each has a port of its own on this host (in a cluster both listen on the
	// same port in their own pods).
	ports := map[string]int{}
	envoys := map[string]*Envoy{}
	for _, name := range []string{"a", "b"} {
		envoys[name] = startEnvoyDraining(t, l, "envoy-"+name, "group-"+name, true, envoyTLS(t, l, "envoy-"+name, "group-"+name), sd.DrainArgs...)
		ports[name] = reservePort(t)
		push(t, l, policy(t, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  proxyGroup: {{.Group}}
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP, accessLog: {disabled: true}}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.B1}}}, {address: 127.0.0.1, port: {{.B2}}}]}]
`, map[string]any{"Name": "drain-" + name, "Group": "group-" + name, "Port": ports[name], "B1": bs[0].Port, "B2": bs[1].Port}))
		waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", ports[name]), "d1", "d2")
	}
	sidecar, sidecarURL := startChartSidecar(t, sd, envoys["a"].AdminSocket)
	if code, body := httpStatus(t, sidecarURL+sd.LivenessPath); code != http.StatusOK {
		t.Fatalf("Envoy's liveness through envoy-sidecar: %d %s", code, body)
	}
	// Outside a shutdown the hook's path starts nothing: it answers at once and the Envoy keeps serving.
	if code, body := httpStatus(t, sidecarURL+sd.PreStopPath); code != http.StatusOK || !strings.Contains(body, "not terminating") {
		t.Fatalf("GET %s before any SIGTERM: %d %s", sd.PreStopPath, code, body)
	}
	if n := envoyStatSum(t, envoys["a"].AdminPort, "http.", ".downstream_cx_drain_close"); n != 0 {
		t.Fatalf("GET %s before any SIGTERM drained the Envoy: %d connections closed", sd.PreStopPath, n)
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

	// The pod is deleted: the kubelet sends envoy-sidecar SIGTERM and calls Envoy's hook; a second later the
	// Service stops sending to it.
	hookDone := make(chan error, 1)
	started := time.Now()
	dialsBefore := svc.dials[addrA].Load()
	if err := sidecar.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		code, body := httpStatus(t, sidecarURL+sd.PreStopPath)
		if code != http.StatusOK || !strings.Contains(body, "drained") {
			hookDone <- fmt.Errorf("%d %s", code, body)
			return
		}
		hookDone <- nil
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
	// envoy-sidecar ends on its own once it has answered the hook.
	select {
	case <-sidecar.done:
	case <-time.After(30 * time.Second):
		t.Error("envoy-sidecar did not exit within 30 s of the drain")
	}
}

// TestEnvoyLivenessWhileWaitingForLbplane: an Envoy whose lbplane is not there yet is not ready (no listener,
// the stats listener included, accepts before its config is loaded) but is alive, as envoy-sidecar reports it
// from admin's socket; once the Envoy is gone, it is not.
func TestEnvoyLivenessWhileWaitingForLbplane(t *testing.T) {
	t.Parallel()
	sd := chartEnvoyShutdown(t)
	// An lbplane that is started only to issue the Envoy's certificate, then stopped: the Envoy waits for it.
	l := startLbplane(t)
	creds := envoyTLS(t, l, "envoy-waiting", "default")
	l.Kill()
	e2 := startEnvoyWith(t, l, "envoy-waiting", "default", true, creds)
	_, sidecarURL := startChartSidecar(t, sd, e2.AdminSocket)
	url := sidecarURL + sd.LivenessPath
	eventually(t, 30*time.Second, "Envoy's admin answers while it waits for lbplane", func() error {
		if code, body := httpStatus(t, url); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if _, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", e2.StatsPort)); err == nil {
		t.Error("the waiting Envoy's stats listener answers: readiness would not tell a waiting Envoy from a ready one")
	}
	e2.Kill()
	if code, body := httpStatus(t, url); code != http.StatusServiceUnavailable {
		t.Errorf("liveness of a dead Envoy: %d %s, want 503", code, body)
	}
}

// httpStatus GETs url and returns the status code and body.
func httpStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
