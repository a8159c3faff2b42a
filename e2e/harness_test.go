// Package e2e runs lbplane as users do: the real binaries, a real Envoy, real HTTP backends, all on
// loopback, with assertions on the traffic that goes through.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/backend"
	"github.com/lbplane/lbplane/internal/dnstest"
	"github.com/lbplane/lbplane/internal/portreserve"
	"github.com/lbplane/lbplane/internal/tools"
)

const token = "e2e-test-token"

var binDir string

// plainLbplane is lbplane built without the race detector, for the tests that measure its memory.
var plainLbplane string

func TestMain(m *testing.M) {
	// The test binary re-executed as an attacking client (see attackerProcess), not as a test run.
	if addr := os.Getenv(attackerAddrEnv); addr != "" {
		os.Exit(attackerProcess(addr))
	}
	dir, err := os.MkdirTemp("", "lbplane-e2e-bin-")
	if err != nil {
		panic(err)
	}
	// Stamp the commit as make build does (GOFLAGS may turn Go's own VCS stamping off).
	args := []string{"build", "-o", dir + "/", "-ldflags", "-X github.com/lbplane/lbplane/version.revision=" + tools.Revision()}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/...")...)
	cmd.Dir = tools.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the binaries: %v\n%s", err, out)
		os.Exit(1)
	}
	binDir = dir
	// Memory bounds are measured on lbplane as it ships: a race-instrumented process's RSS is mostly the
	// detector's shadow memory, which it never gives back.
	plainLbplane = filepath.Join(dir, "lbplane")
	if raceEnabled {
		plainLbplane = filepath.Join(dir, "plain", "lbplane")
		cmd := exec.Command("go", "build", "-o", plainLbplane, "./cmd/lbplane")
		cmd.Dir = tools.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building lbplane without the race detector: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	// lbctl envoy and lbctl bootstrap keep an Envoy's files under $XDG_STATE_HOME by default: the tests' own,
	// not the home of whoever runs them.
	state, err := os.MkdirTemp("", "lbplane-e2e-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", state)
	code := m.Run()
	os.RemoveAll(dir)
	os.RemoveAll(state)
	os.Exit(code)
}

// exclusives holds one mutex per name given to exclusive.
var exclusives sync.Map

// exclusive makes the tests that call it with the same name run one at a time while the others run in
// parallel: each connection flood needs the host's descriptors and loopback ports to itself, or one flood's
// attacker starves another's and neither happens as described. It holds until the test's other cleanups
// (its Envoy, its attacker) have run.
func exclusive(t *testing.T, name string) {
	t.Helper()
	m, _ := exclusives.LoadOrStore(name, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	t.Cleanup(mu.Unlock)
}

// reservePort returns a loopback port held for this test (see internal/portreserve): Envoy's listeners and
// the backends bind it, and no other process can take it first.
func reservePort(t *testing.T) int {
	t.Helper()
	return portreserve.Reserve(t)
}

// Backend is a real HTTP server on loopback.
type Backend struct {
	*backend.Backend
	Port int
	srv  *http.Server
	lis  net.Listener
}

func startBackend(t *testing.T, name string, delay time.Duration) *Backend {
	t.Helper()
	port, lis := listenReserved(t)
	return serveBackend(t, name, delay, port, lis, backend.ServeOptions{}, nil)
}

// listenReserved binds a port reserved for this test. The port stays reserved after the listener closes, so
// that Backend.Restart finds it free.
func listenReserved(t *testing.T) (int, net.Listener) {
	t.Helper()
	port := reservePort(t)
	lis, err := portreserve.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	return port, lis
}

// serveBackend serves a backend on lis, as o says, until the test ends; tweak, when set, adjusts the server.
func serveBackend(t *testing.T, name string, delay time.Duration, port int, lis net.Listener, o backend.ServeOptions, tweak func(*http.Server)) *Backend {
	t.Helper()
	b := &Backend{Backend: backend.New(name, 1024, delay), Port: port, lis: lis}
	b.srv = &http.Server{Handler: b.Backend, ReadHeaderTimeout: 10 * time.Second}
	if tweak != nil {
		tweak(b.srv)
	}
	go b.srv.Serve(backend.Listen(lis, o))
	t.Cleanup(func() { b.srv.Close() })
	return b
}

func startBackends(t *testing.T, names ...string) []*Backend {
	var out []*Backend
	for _, n := range names {
		out = append(out, startBackend(t, n, 0))
	}
	return out
}

// Stop closes the backend's listener and connections: a dead backend.
func (b *Backend) Stop() { b.srv.Close() }

// Process is a child process whose output goes to a file kept for failed tests.
type Process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProcess(t *testing.T, logName string, name string, args ...string) *Process {
	t.Helper()
	return startProcessIn(t, "", logName, name, args...)
}

// startProcessIn is startProcess in working directory dir (empty: the test's).
func startProcessIn(t *testing.T, dir, logName string, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	return runLogged(t, cmd, logName)
}

// runLogged starts cmd with its output in a file that a failed test prints (its last 20,000 bytes), in a
// process group of its own that SIGKILL ends should the test binary die; the test's end kills it.
func runLogged(t *testing.T, cmd *exec.Cmd, logName string) *Process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), logName)
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("--- %s (last 20000 bytes)\n%s", logName, b)
		}
	})
	return p
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Lbplane is a running `lbplane serve`.
type Lbplane struct {
	*Process
	DataDir     string
	XDSAddr     string
	APIURL      string
	Client      *pushapi.Client
	metricsPort int
	extraArg    []string
	// secureDefaults leaves out the loopback opt-in the other tests need (see startLbplaneDefaults).
	secureDefaults bool
	// workDir and dataDirArg, when set, start lbplane in that working directory with --data-dir given as
	// that (relative) name, as the README's commands do; DataDir is then the absolute path.
	workDir, dataDirArg string
	// bin, when set, is the lbplane binary to run (plainLbplane for memory measurements).
	bin string
	// ports is what the first start bound; a restart binds the same ones, as Envoys are pointed at them.
	ports serve.Ports
	// netns, when set, runs lbplane in that network namespace (a host of the test's switch: newHALAN),
	// listening on that host's address.
	netns string
	// dnsAddr is the loopback DNS server lbplane resolves backend host names with when the test names none.
	dnsAddr string
}

// startLbplane starts lbplane with backends on loopback allowed (--allow-backend-cidrs 127.0.0.0/8,::1):
// the tests' backends run on this host.
func startLbplane(t *testing.T, extra ...string) *Lbplane {
	t.Helper()
	l := &Lbplane{DataDir: t.TempDir(), extraArg: extra}
	if err := l.start(t, serve.Ports{XDS: "127.0.0.1:0", API: "127.0.0.1:0", Metrics: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	return l
}

// startLbplaneDefaults starts lbplane with its default backend address rules: no loopback backends.
func startLbplaneDefaults(t *testing.T, extra ...string) *Lbplane {
	t.Helper()
	l := &Lbplane{DataDir: t.TempDir(), extraArg: extra, secureDefaults: true}
	if err := l.start(t, serve.Ports{XDS: "127.0.0.1:0", API: "127.0.0.1:0", Metrics: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	return l
}

// loopbackBackends is the opt-in the tests with backends on this host start lbplane with.
var loopbackBackends = []string{"--allow-backend-cidrs", "127.0.0.0/8,::1/128"}

// start runs lbplane on the given addresses and waits until it has written the ports it bound. It fails when
// lbplane exits first (the caller reads its log) or does not write them within a minute.
func (l *Lbplane) start(t *testing.T, addrs serve.Ports) error {
	t.Helper()
	dataDir := l.DataDir
	if l.dataDirArg != "" {
		dataDir = l.dataDirArg
	}
	args := append([]string{"serve", "--data-dir", dataDir, "--xds-address", addrs.XDS,
		"--api-address", addrs.API, "--token", token, "--log-level", "debug", "--metrics-address", addrs.Metrics,
		// The tests call the API far faster than people do; the limiter has its own unit test.
		"--api-rate-limit", "0"}, l.extraArg...)
	if !l.secureDefaults {
		args = append(args, loopbackBackends...)
	}
	if l.netns == "" && !slices.Contains(l.extraArg, "--dns-resolver") {
		// lbplane resolves backend host names itself: a test that names none of its own DNS servers gets one
		// on loopback (NXDOMAIN for every name), so no test asks this machine's resolver.
		if l.dnsAddr == "" {
			l.dnsAddr = dnstest.Start(t).Addr
		}
		args = append(args, "--dns-resolver", l.dnsAddr)
	}
	// The file of an earlier run would say "listening" before this one is.
	if err := os.Remove(filepath.Join(l.DataDir, serve.PortsFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	if l.netns != "" {
		// On the host's address, beyond loopback: the test's switch is its network.
		args = append([]string{"netns", "exec", l.netns, filepath.Join(binDir, "lbplane")}, append(args, "--api-insecure-listen-any")...)
		l.Process = startProcessIn(t, l.workDir, "lbplane-"+l.netns+".log", "ip", args...)
	} else {
		bin := filepath.Join(binDir, "lbplane")
		if l.bin != "" {
			bin = l.bin
		}
		l.Process = startProcessIn(t, l.workDir, "lbplane.log", bin, args...)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ports, err := serve.ReadPorts(l.DataDir)
		if err == nil {
			l.ports = ports
			l.XDSAddr = ports.XDS
			l.APIURL = "http://" + ports.API
			_, mp, _ := net.SplitHostPort(ports.Metrics)
			l.metricsPort, _ = strconv.Atoi(mp)
			l.Client = &pushapi.Client{BaseURL: l.APIURL, Token: token}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lbplane wrote no %s within a minute: %v", serve.PortsFile, err)
		}
		select {
		case <-l.done:
			return fmt.Errorf("lbplane exited before it listened (%s)", l.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Restart starts lbplane again on the same ports and data directory after it was killed: the Envoys are
// pointed at those. The ports were free for a moment, so an outgoing connection may hold one of them as its
// source port; then lbplane cannot bind it, and the start is tried again until the port is free (bounded).
func (l *Lbplane) Restart(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for attempt := 1; ; attempt++ {
		err := l.start(t, l.ports)
		if err == nil {
			return
		}
		b, _ := os.ReadFile(l.log)
		if !bytes.Contains(b, []byte("address already in use")) || time.Now().After(deadline) {
			t.Fatalf("restarting lbplane on %+v: %v", l.ports, err)
		}
		t.Logf("restart attempt %d: a port is still taken; trying again", attempt)
		time.Sleep(100 * time.Millisecond)
	}
}

// Envoy is a running Envoy fed by lbplane.
type Envoy struct {
	*Process
	NodeID string
	// AdminSocket is the Unix socket Envoy's admin listens on (the bootstrap's default: admin has no TCP
	// port). Tests reach admin only through adminGet, adminDo, envoyStats, envoyStatSum, ConfigDump and
	// Clusters.
	AdminSocket string
	// AdminPort names this Envoy to those helpers, for tests that pass it (adminGet(t, e.AdminPort, ...)).
	// It is not a port: nothing listens on it, and it is above 65535 so that a test dialing it fails at once.
	AdminPort int
	StatsPort int
}

func startEnvoy(t *testing.T, l *Lbplane, nodeID string, delta bool) *Envoy {
	t.Helper()
	return startEnvoyWith(t, l, nodeID, "default", delta, envoyTLS(t, l, nodeID, "default"))
}

// startEnvoyWith starts an Envoy in a proxy group with the given xDS client credentials (nil: plaintext).
func startEnvoyWith(t *testing.T, l *Lbplane, nodeID, group string, delta bool, tlsParams *envoybootstrap.TLS) *Envoy {
	t.Helper()
	return startEnvoyDraining(t, l, nodeID, group, delta, tlsParams, "--drain-time-s", "1")
}

// startEnvoyDraining is startEnvoyWith with Envoy's drain options (--drain-time-s, --drain-strategy).
func startEnvoyDraining(t *testing.T, l *Lbplane, nodeID, group string, delta bool, tlsParams *envoybootstrap.TLS, drainArgs ...string) *Envoy {
	t.Helper()
	return startEnvoyFrom(t, envoybootstrap.Params{NodeID: nodeID, Group: group, XDS: l.XDSAddr, Delta: delta, TLS: tlsParams},
		"config:info,upstream:info", drainArgs...)
}

// startEnvoyFrom starts an Envoy from the bootstrap p renders, with admin and stats on reserved ports.
func startEnvoyFrom(t *testing.T, p envoybootstrap.Params, componentLogLevels string, args ...string) *Envoy {
	t.Helper()
	bin := tools.Require(t, "envoy")
	e := &Envoy{NodeID: p.NodeID, AdminSocket: adminSocketPath(t), StatsPort: reservePort(t)}
	e.AdminPort = registerAdmin(e.AdminSocket)
	p.AdminSocket, p.StatsPort = e.AdminSocket, e.StatsPort
	b, err := envoybootstrap.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Process = startProcess(t, "envoy-"+p.NodeID+".log", bin, append([]string{"-c", cfg, "--use-dynamic-base-id",
		"--concurrency", "1", "-l", "warn", "--component-log-level", componentLogLevels}, args...)...)
	return e
}

// ConfigDump returns Envoy's dynamic config (clusters, endpoints, listeners, routes) as canonical JSON,
// without update timestamps: the bootstrap part is left out because Envoy prints its maps in random order.
func (e *Envoy) ConfigDump(t *testing.T) string {
	t.Helper()
	var keep []any
	for _, c := range configDumpOf(t, e, "BootstrapConfigDump") {
		keep = append(keep, dropKey(c, "last_updated"))
	}
	b, err := json.MarshalIndent(keep, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configDumpOf returns the sections of an Envoy's /config_dump?include_eds, leaving out those whose @type
// ends in one of skip.
func configDumpOf(t *testing.T, e *Envoy, skip ...string) []map[string]any {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, "/config_dump?include_eds")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var dump struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dump); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
next:
	for _, c := range dump.Configs {
		typ, _ := c["@type"].(string)
		for _, s := range skip {
			if strings.HasSuffix(typ, s) {
				continue next
			}
		}
		out = append(out, c)
	}
	return out
}

func dropKey(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if k != key {
				out[k] = dropKey(val, key)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = dropKey(val, key)
		}
		return out
	}
	return v
}

// policy renders a YAML template with the given data (ports of backends etc.).
func policy(t *testing.T, text string, data any) []byte {
	t.Helper()
	var buf bytes.Buffer
	funcs := template.FuncMap{"inc": func(i int) int { return i + 1 }}
	if err := template.Must(template.New("p").Funcs(funcs).Parse(text)).Execute(&buf, data); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func push(t *testing.T, l *Lbplane, doc []byte) {
	t.Helper()
	if _, err := l.Client.Apply(context.Background(), doc, false); err != nil {
		t.Fatalf("push: %v", err)
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting until %s: %v", timeout, what, err)
}

// waitSynced waits until every connected proxy runs the current config.
func waitSynced(t *testing.T, l *Lbplane, proxies int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%d proxies are SYNCED", proxies), func() error {
		ps, err := l.Client.Proxies(context.Background())
		if err != nil {
			return err
		}
		if len(ps) != proxies {
			return fmt.Errorf("%d proxies connected", len(ps))
		}
		for _, p := range ps {
			if p.State != xdsserver.Synced {
				return fmt.Errorf("%s is %s %s", p.NodeID, p.State, p.Message)
			}
		}
		return nil
	})
}

// waitServing waits until url answers 200 through Envoy with one of the wanted backends.
func waitServing(t *testing.T, url string, want ...string) {
	t.Helper()
	eventually(t, 30*time.Second, url+" answers", func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		got := resp.Header.Get("X-Backend")
		for _, w := range want {
			if got == w {
				return nil
			}
		}
		return fmt.Errorf("answered by %q", got)
	})
}

// Client sends requests and counts answers by backend.
type Client struct {
	HTTP *http.Client
}

func newClient(keepAlive bool) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableKeepAlives: !keepAlive}
	return &Client{HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// Do sends one request and returns the backend that answered and the status.
func (c *Client) Do(req *http.Request) (string, int, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("X-Backend"), resp.StatusCode, nil
}

// Spread sends n sequential GETs and counts the answers by backend; any failure fails the test.
func (c *Client) Spread(t *testing.T, url string, n int, header map[string]string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		b, code, err := doWith(c, url, header)
		if err != nil || code != 200 {
			t.Fatalf("request %d to %s: status %d, error %v", i, url, code, err)
		}
		counts[b]++
	}
	return counts
}

// Load sends requests at a steady rate from several goroutines until stopped, counting failures.
type Load struct {
	OK, Failed atomic.Int64
	mu         sync.Mutex
	Backends   map[string]int
	// failures holds every failed request: when it was sent, and what it got.
	failures []loadFailure
	stop     chan struct{}
	wg       sync.WaitGroup
}

type loadFailure struct {
	sent time.Time
	what string
}

// Errors describes the first 20 failed requests.
func (l *Load) Errors() []string {
	_, what := l.FailedSince(time.Time{})
	return what
}

// FailedSince returns the failed requests that were sent at or after since (the first 20 described): a
// request sent before a change and answered after it is the change's before's, not its after's.
func (l *Load) FailedSince(since time.Time) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, what := 0, []string(nil)
	for _, f := range l.failures {
		if !f.sent.Before(since) {
			if n++; len(what) < 20 {
				what = append(what, f.what)
			}
		}
	}
	return n, what
}

// startLoad sends about rps requests per second to url over `workers` keep-alive connections. The loop is
// bounded: it stops at Stop or after maxDuration, whichever comes first.
func startLoad(url string, rps, workers int, maxDuration time.Duration) *Load {
	return startLoadWith(newClient(true), url, rps, workers, maxDuration)
}

// startLoadWith is startLoad through the given client.
func startLoadWith(c *Client, url string, rps, workers int, maxDuration time.Duration) *Load {
	l := &Load{stop: make(chan struct{}), Backends: map[string]int{}}
	interval := time.Duration(int64(time.Second) * int64(workers) / int64(rps))
	deadline := time.Now().Add(maxDuration)
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for time.Now().Before(deadline) {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				sent := time.Now()
				b, code, err := c.Do(req)
				l.mu.Lock()
				if err != nil || code != 200 {
					l.Failed.Add(1)
					what := fmt.Sprintf("%s (sent %s): status %d backend %q err %v", time.Now().Format("15:04:05.000"), sent.Format("15:04:05.000"), code, b, err)
					l.failures = append(l.failures, loadFailure{sent: sent, what: what})
				} else {
					l.OK.Add(1)
					l.Backends[b]++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// WaitServed waits until at least n requests of the load have succeeded (bounded), so that a test whose
// steps finish quickly (no race detector) still puts enough requests through them to mean anything.
func (l *Load) WaitServed(t *testing.T, n int64) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("%d requests served under load", n), func() error {
		if ok := l.OK.Load(); ok < n {
			return fmt.Errorf("%d served, %d failed", ok, l.Failed.Load())
		}
		return nil
	})
}

// Stop ends the load and waits for in-flight requests.
func (l *Load) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// RequireNoFailures fails the test if any request failed, and if too few were sent to mean anything.
func (l *Load) RequireNoFailures(t *testing.T, minOK int64) {
	t.Helper()
	if f := l.Failed.Load(); f > 0 {
		t.Errorf("%d of %d requests failed: %v", f, f+l.OK.Load(), l.Errors())
	}
	if ok := l.OK.Load(); ok < minOK {
		t.Errorf("only %d requests succeeded; expected at least %d", ok, minOK)
	}
}

func within(t *testing.T, what string, got, want int, tolerance float64) {
	t.Helper()
	lo, hi := float64(want)*(1-tolerance), float64(want)*(1+tolerance)
	if float64(got) < lo || float64(got) > hi {
		t.Errorf("%s: got %d, want %d ±%.0f%% (%.0f..%.0f)", what, got, want, tolerance*100, lo, hi)
	}
}

func doWith(c *Client, url string, header map[string]string) (string, int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	for k, v := range header {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	return c.Do(req)
}

// requestVia returns an error unless the request gets a 200.
func requestVia(c *Client, url string, header map[string]string) (string, error) {
	b, code, err := doWith(c, url, header)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	return b, err
}

// cookieFrom returns a Cookie header with what the jar got from Set-Cookie, Secure cookies included.
func cookieFrom(jar http.CookieJar, rawURL string) map[string]string {
	u, _ := url.Parse(strings.Replace(rawURL, "http://", "https://", 1))
	var parts []string
	for _, c := range jar.Cookies(u) {
		parts = append(parts, c.Name+"="+c.Value)
	}
	if len(parts) == 0 {
		return nil
	}
	return map[string]string{"Cookie": strings.Join(parts, "; ")}
}

// Restart listens again on the backend's port after Stop.
func (b *Backend) Restart(t *testing.T) {
	t.Helper()
	lis, err := portreserve.Listen(b.Port)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = &http.Server{Handler: b.Backend, ReadHeaderTimeout: 10 * time.Second}
	go b.srv.Serve(lis)
	t.Cleanup(func() { b.srv.Close() })
}

// Clusters returns Envoy's admin /clusters view (hosts, health flags, counters), for failure messages.
func (e *Envoy) Clusters(t *testing.T) string {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, "/clusters")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "health_flags") || strings.Contains(l, "::rq_error") || strings.Contains(l, "::cx_connect_fail") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// adminSocketPath returns a path for an Envoy's admin socket in a directory of its own, removed with the
// test: short, as a socket path holds at most 107 bytes (t.TempDir's, named after the test, can be longer).
func adminSocketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "envoy-admin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "admin.sock")
}

// admins maps the AdminPort handles of Envoys to their admin sockets.
var (
	adminsMu   sync.Mutex
	admins     = map[int]string{}
	nextHandle = 1 << 20
)

func registerAdmin(socket string) int {
	adminsMu.Lock()
	defer adminsMu.Unlock()
	nextHandle++
	admins[nextHandle] = socket
	return nextHandle
}

// adminRef is an Envoy, or its AdminPort handle.
type adminRef interface{ ~int | *Envoy }

func socketOf[A adminRef](a A) (string, error) {
	switch x := any(a).(type) {
	case *Envoy:
		return x.AdminSocket, nil
	case int:
		adminsMu.Lock()
		defer adminsMu.Unlock()
		if s, ok := admins[x]; ok {
			return s, nil
		}
		return "", fmt.Errorf("%d names no Envoy started by this test binary (Envoy.AdminPort)", x)
	}
	return "", fmt.Errorf("unsupported admin reference %T", a)
}

// adminDo sends one request to an Envoy's admin over its Unix socket.
func adminDo[A adminRef](a A, method, path string) (*http.Response, error) {
	socket, err := socketOf(a)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}}
	req, err := http.NewRequest(method, "http://envoy-admin"+path, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}
