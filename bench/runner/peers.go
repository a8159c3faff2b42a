package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"text/template"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// peer is one load balancer under test (or none: direct).
type peer struct {
	Name string
	// HTTPPort, TCPPort and TLSPort are where it listens; 0 when it has no such listener here.
	HTTPPort, TCPPort, TLSPort int
	start                      func(e *env, p *peer) error
	procs                      []*proc
	// main is the process whose tree is the data plane (CPU and memory are read from it).
	main *proc
	// vars are set in this peer's templates: NoRetry, and what the hash and health scenarios vary (Hash,
	// Health).
	vars map[string]any
	// optIn peers run only when -peers names them: variants for a focused comparison.
	optIn bool
}

func (p *peer) stop() {
	for i := len(p.procs) - 1; i >= 0; i-- {
		p.procs[i].stop()
	}
	p.procs, p.main = nil, nil
}

func (p *peer) pid() int { return p.main.cmd.Process.Pid }

// env is what every peer shares: tools, binaries, backends and the run's directory.
type env struct {
	dir      string
	bin      string // lbplane's binaries
	tools    map[string]string
	backends []string // host:port
	// backendProcs run the backends; direct measures the first.
	backendProcs []*proc
	maxConn      int
	noFile       int
	// cert is the HTTPS peers' certificate and key (RSA, for the ECDHE-RSA suites).
	cert tlsFiles
	// envoyRuntime, envoyArgs and envoyEnv are set on lbplane's Envoys only (-envoy-runtime, -envoy-args,
	// -envoy-env): one change at a time for the per-connection memory experiments.
	envoyRuntime map[string]string
	envoyArgs    []string
	envoyEnv     []string
	// heapDumps, when set (-envoy-heap-dumps), is where the WebSocket runs save Envoy's heap profile with
	// every connection open.
	heapDumps string
}

type endpoint struct {
	Host string
	Port int
}

func (e *env) templateData(p *peer, dir string) map[string]any {
	var eps []endpoint
	var servers []server
	for _, b := range e.backends {
		h, ps, _ := net.SplitHostPort(b)
		n, _ := strconv.Atoi(ps)
		eps = append(eps, endpoint{h, n})
		// The port is the server's id: it stays when another server leaves (HAProxy's consistent hash
		// places servers by id).
		servers = append(servers, server{ID: n, Addr: b})
	}
	data := map[string]any{"Servers": servers, "Hash": "", "HashHeader": "", "BalanceFactor": 0, "Health": "", "NoRetry": false, "OldTail": false, "Relaxed": false}
	for k, v := range p.vars {
		data[k] = v
	}
	for k, v := range map[string]any{"Dir": dir, "HTTPPort": p.HTTPPort, "TCPPort": p.TCPPort, "TLSPort": p.TLSPort, "AdminPort": p.HTTPPort + 1000,
		"CertFile": e.cert.Cert, "KeyFile": e.cert.Key, "CertKeyFile": e.cert.Both,
		"Backends": e.backends, "Endpoints": eps, "MaxConn": e.maxConn, "NoFile": e.noFile,
		// nginx counts client and upstream connections against worker_connections, and more besides: with
		// as many as the open-file limit it refused WebSockets at 9,374 (18,748 descriptors). The open-file
		// limit is the real cap.
		"NginxConn": e.noFile * 3 / 2} {
		data[k] = v
	}
	return data
}

type server struct {
	ID   int
	Addr string
}

// render writes bench/peers/<name> with data into dir.
func render(name, dir string, data map[string]any) (string, error) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "bench", "peers", name))
	if err != nil {
		return "", err
	}
	// The static Envoy config iterates over endpoints (host and port apart); the others over host:port.
	if name == "envoy-static.yaml" || name == "lbplane.yaml" {
		data = clone(data)
		data["Backends"] = data["Endpoints"]
	}
	t, err := template.New(name).Parse(string(src))
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return out, t.Execute(f, data)
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func peerDir(e *env, p *peer) (string, error) {
	dir := filepath.Join(e.dir, "peers", p.Name)
	return dir, os.MkdirAll(dir, 0o755)
}

func (p *peer) run(e *env, dir, name string, env []string, bin string, args ...string) (*proc, error) {
	pr, err := start(dir, name, env, bin, args...)
	if err != nil {
		return nil, err
	}
	p.procs = append(p.procs, pr)
	return pr, nil
}

// peers returns every peer, ports from base up.
func peers(base int) []*peer {
	base += portOffset
	return []*peer{
		{Name: "direct", HTTPPort: 0, start: startDirect},
		{Name: "lbplane-envoy", HTTPPort: base, TCPPort: base + 1, TLSPort: base + 2, start: startLbplane()},
		// The same without what lbplane adds for observability: the router's dynamic stats off and no reading
		// of Envoy's stats port, so no backend health or load in status; what the hand-tuned config leaves out.
		{Name: "lbplane-envoy-lean", HTTPPort: base + 50, TCPPort: base + 51, start: startLbplane("--router-dynamic-stats=false", "--proxy-stats-interval=0")},
		// lbplane's default without its default retry of connection failures (retry: {attempts: 0}).
		{Name: "lbplane-envoy-noretry", HTTPPort: base + 60, TCPPort: base + 61, start: startLbplane(), vars: map[string]any{"NoRetry": true}, optIn: true},
		// lbplane's default with the tail defaults from before issue 17 (no default ejection of an endpoint that
		// refuses connections, a 25 ms connect-retry back-off): the A/B of the killed-backend tail.
		{Name: "lbplane-envoy-before17", HTTPPort: base + 80, TCPPort: base + 81, start: startLbplane(), vars: map[string]any{"OldTail": true}, optIn: true},
		// lbplane's default with the edge hardening relaxed to Envoy's own defaults (HTTP listener, its
		// cluster, no heap monitor in the bootstrap): the A/B of what the hardening costs.
		{Name: "lbplane-envoy-relaxed", HTTPPort: base + 70, TCPPort: base + 71, start: startLbplane(), vars: map[string]any{"Relaxed": true}, optIn: true},
		// lbplane's default access log (a JSON line per request on Envoy's stdout, its log file here), which the
		// other lbplane peers turn off as nginx, HAProxy and Traefik have theirs off: the A/B of what it costs
		// (-only paired -peers lbplane-envoy,lbplane-envoy-accesslog).
		{Name: "lbplane-envoy-accesslog", HTTPPort: base + 90, TCPPort: base + 91, start: startLbplane("--access-log=json"), optIn: true},
		// lbplane's default again, under another name: the paired scenario's A/A control (what two identical
		// Envoys loaded together differ by on this machine).
		{Name: "lbplane-envoy-twin", HTTPPort: base + 80, TCPPort: base + 81, start: startLbplane(), optIn: true},
		{Name: "static-envoy", HTTPPort: base + 10, TCPPort: base + 11, TLSPort: base + 12, start: startStaticEnvoy},
		{Name: "nginx", HTTPPort: base + 20, TLSPort: base + 22, start: startNginx},
		{Name: "haproxy", HTTPPort: base + 30, TCPPort: base + 31, TLSPort: base + 32, start: startHAProxy},
		{Name: "traefik", HTTPPort: base + 40, TLSPort: base + 42, start: startTraefik},
	}
}

// startDirect points the load at the first backend: the ceiling every proxy is compared with.
func startDirect(e *env, p *peer) error {
	_, port, _ := net.SplitHostPort(e.backends[0])
	p.HTTPPort, _ = strconv.Atoi(port)
	p.main = e.backendProcs[0]
	return nil
}

func startLbplane(extra ...string) func(e *env, p *peer) error {
	return func(e *env, p *peer) error { return startLbplaneWith(e, p, extra) }
}

func startLbplaneWith(e *env, p *peer, extra []string) error {
	dir, err := peerDir(e, p)
	if err != nil {
		return err
	}
	xds, api := p.HTTPPort+100, p.HTTPPort+101
	// xDS in plaintext on loopback (lbplane's default is mTLS, which costs the data path nothing): the bench
	// measures Envoy's traffic, not its certificates.
	_, err = p.run(e, dir, "lbplane", nil, filepath.Join(e.bin, "lbplane"), append([]string{"serve", "--data-dir", dir,
		"--xds-address", fmt.Sprintf("127.0.0.1:%d", xds), "--xds-insecure", "--api-address", fmt.Sprintf("127.0.0.1:%d", api),
		"--metrics-address", "", "--token", "bench", "--api-rate-limit", "0", "--allow-backend-cidrs", "127.0.0.0/8",
		// No access log, as the other peers have none; lbplane-envoy-accesslog turns lbplane's default on
		// (a later --access-log wins).
		"--access-log", "off",
		// The HTTPS scenario's certificate lives in the work directory; policies may name files there only.
		"--files-root", filepath.Dir(e.cert.Cert)}, extra...)...)
	if err != nil {
		return err
	}
	if err := waitPort(fmt.Sprintf("127.0.0.1:%d", api), 20*time.Second); err != nil {
		return err
	}
	if err := pushBenchPolicies(e, p); err != nil {
		return err
	}
	params := envoybootstrap.Params{NodeID: "bench", XDS: fmt.Sprintf("127.0.0.1:%d", xds), Delta: true,
		AdminPort: p.HTTPPort + 1000, InsecureAdminTCP: true, StatsPort: p.HTTPPort + 1001, MaxConnections: e.maxConn}
	if relaxed, _ := p.vars["Relaxed"].(bool); relaxed {
		params.MaxHeapBytes = -1
	}
	b, err := envoybootstrap.Render(params)
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		return err
	}
	p.main, err = p.run(e, dir, "envoy", e.envoyEnv, e.tools["envoy"], append([]string{"-c", cfg, "--concurrency", "1", "--use-dynamic-base-id", "-l", "warn"}, e.envoyArgs...)...)
	if err != nil {
		return err
	}
	if err := waitPort(fmt.Sprintf("127.0.0.1:%d", p.HTTPPort), 30*time.Second); err != nil {
		return err
	}
	runtime := maps.Clone(e.envoyRuntime)
	if relaxed, _ := p.vars["Relaxed"].(bool); relaxed {
		if runtime == nil {
			runtime = map[string]string{}
		}
		// Envoy's own defaults for what lbplane's bootstrap sets against HTTP/2 rapid reset: no limit of
		// requests per I/O cycle, and 500 streams before a connection with many early resets is closed.
		runtime["http.max_requests_per_io_cycle"] = "4294967295"
		runtime["overload.premature_reset_total_stream_count"] = "500"
	}
	return setEnvoyRuntime(p.HTTPPort+1000, runtime)
}

func startStaticEnvoy(e *env, p *peer) error {
	dir, err := peerDir(e, p)
	if err != nil {
		return err
	}
	cfg, err := render("envoy-static.yaml", dir, e.templateData(p, dir))
	if err != nil {
		return err
	}
	p.main, err = p.run(e, dir, "envoy", nil, e.tools["envoy"], "-c", cfg, "--concurrency", "1", "--use-dynamic-base-id", "-l", "warn")
	if err != nil {
		return err
	}
	return waitPort(fmt.Sprintf("127.0.0.1:%d", p.HTTPPort), 30*time.Second)
}

func startNginx(e *env, p *peer) error {
	dir, err := peerDir(e, p)
	if err != nil {
		return err
	}
	cfg, err := render("nginx.conf", dir, e.templateData(p, dir))
	if err != nil {
		return err
	}
	p.main, err = p.run(e, dir, "nginx", nil, e.tools["nginx"], "-p", dir, "-c", cfg, "-e", filepath.Join(dir, "nginx-error.log"), "-g", "daemon off;")
	if err != nil {
		return err
	}
	return waitPort(fmt.Sprintf("127.0.0.1:%d", p.HTTPPort), 10*time.Second)
}

func startHAProxy(e *env, p *peer) error {
	dir, err := peerDir(e, p)
	if err != nil {
		return err
	}
	cfg, err := render("haproxy.cfg", dir, e.templateData(p, dir))
	if err != nil {
		return err
	}
	p.main, err = p.run(e, dir, "haproxy", nil, e.tools["haproxy"], "-db", "-f", cfg)
	if err != nil {
		return err
	}
	return waitPort(fmt.Sprintf("127.0.0.1:%d", p.HTTPPort), 10*time.Second)
}

func startTraefik(e *env, p *peer) error {
	dir, err := peerDir(e, p)
	if err != nil {
		return err
	}
	data := e.templateData(p, dir)
	if _, err := render("traefik-dynamic.yaml", dir, data); err != nil {
		return err
	}
	cfg, err := render("traefik.yaml", dir, data)
	if err != nil {
		return err
	}
	p.main, err = p.run(e, dir, "traefik", []string{"GOMAXPROCS=1"}, e.tools["traefik"], "--configFile="+cfg)
	if err != nil {
		return err
	}
	return waitPort(fmt.Sprintf("127.0.0.1:%d", p.HTTPPort), 20*time.Second)
}

// pushBenchPolicies renders bench/peers/lbplane.yaml for p and pushes it to p's lbplane.
func pushBenchPolicies(e *env, p *peer) error {
	dir, err := peerDir(e, p)
	if err != nil {
		return err
	}
	c := &pushapi.Client{BaseURL: fmt.Sprintf("http://127.0.0.1:%d", p.HTTPPort+101), Token: "bench"}
	policy, err := render("lbplane.yaml", dir, e.templateData(p, dir))
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(policy)
	if err != nil {
		return err
	}
	if _, err := c.Apply(context.Background(), doc, false); err != nil {
		return fmt.Errorf("pushing the bench policies: %w", err)
	}
	return nil
}
