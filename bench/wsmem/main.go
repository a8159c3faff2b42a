// Command wsmem measures what one WebSocket held through Envoy costs in memory, for one Envoy setting at a
// time: it renders a static Envoy config shaped like lbplane's HTTP listener (the knobs below change one thing
// each), starts Envoy with it in front of an in-process WebSocket echo backend, opens -conns WebSockets, and
// reads Envoy's memory with none and with all of them open. Per connection it gives:
//   - allocated: tcmalloc's bytes in live objects (admin /memory "allocated", also server.memory_allocated);
//   - heap: what tcmalloc holds from the system (heap_size − pageheap_unmapped), live objects plus caches;
//   - RSS: the process's resident memory, from /proc.
//
// allocated is what a config knob can shrink; heap − allocated and RSS − heap are the allocator's slack.
// Used for the 2026-11-23 edge report; run from the repository root:
//
//	go run ./bench/wsmem -conns 1000 [-buffer 16384] [-mode tcp] [-tls] [-concurrency 2] ...
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"golang.org/x/net/websocket"

	"github.com/lbplane/lbplane/internal/backend"
)

type knobs struct {
	Port, AdminPort, BackendPort int
	Buffer                       int    // per_connection_buffer_limit_bytes on listener and cluster; 0: Envoy's default (1 MiB)
	Mode                         string // http: HCM with upgrade_configs websocket; tcp: tcp_proxy (L4)
	TLS                          bool
	CertFile, KeyFile            string
	StreamIdle                   string // HCM stream_idle_timeout; "" Envoy's default (5m), "0s" off
	ConnIdle                     string // common_http_protocol_options.idle_timeout
	HeadersTimeout               string // request_headers_timeout
	NoStats                      bool   // stats_config: reject every stat
	AccessLog                    bool   // a file access log on the HCM (lbplane sets none by default)
	Hardened                     bool   // lbplane's request hardening: header limits, underscores, normalize_path, merge_slashes
	Overload                     bool   // lbplane's overload manager with a fixed heap monitor
	DynamicStats                 bool   // the router's dynamic stats (lbplane's default is on)
	Runtime                      map[string]string
	MaxConn                      int
}

const config = `admin:
  address: {socket_address: {address: 127.0.0.1, port_value: {{.AdminPort}}}}
{{- if .NoStats}}
stats_config: {stats_matcher: {reject_all: true}}
{{- end}}
{{- if .Runtime}}
layered_runtime:
  layers:
    - name: static
      static_layer:
{{- range $k, $v := .Runtime}}
        {{$k}}: {{$v}}
{{- end}}
{{- end}}
overload_manager:
{{- if .Overload}}
  refresh_interval: 0.25s
{{- end}}
  resource_monitors:
    - name: envoy.resource_monitors.global_downstream_max_connections
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig
        max_active_downstream_connections: {{.MaxConn}}
{{- if .Overload}}
    - name: envoy.resource_monitors.fixed_heap
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig
        max_heap_size_bytes: 1073741824
  actions:
    - name: envoy.overload_actions.shrink_heap
      triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.95}}]
    - name: envoy.overload_actions.stop_accepting_requests
      triggers: [{name: envoy.resource_monitors.fixed_heap, threshold: {value: 0.98}}]
{{- end}}
static_resources:
  listeners:
    - name: edge
      address: {socket_address: {address: 127.0.0.1, port_value: {{.Port}}}}
{{- if .Buffer}}
      per_connection_buffer_limit_bytes: {{.Buffer}}
{{- end}}
      filter_chains:
        - filters:
{{- if eq .Mode "tcp"}}
            - name: envoy.filters.network.tcp_proxy
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
                stat_prefix: edge
                cluster: app
{{- else}}
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: edge
                use_remote_address: true
                upgrade_configs: [{upgrade_type: websocket}]
{{- if .StreamIdle}}
                stream_idle_timeout: {{.StreamIdle}}
{{- end}}
{{- if .HeadersTimeout}}
                request_headers_timeout: {{.HeadersTimeout}}
{{- end}}
{{- if or .ConnIdle .Hardened}}
                common_http_protocol_options:
{{- if .ConnIdle}}
                  idle_timeout: {{.ConnIdle}}
{{- end}}
{{- if .Hardened}}
                  headers_with_underscores_action: REJECT_REQUEST
                  max_headers_count: 100
{{- end}}
{{- end}}
{{- if .Hardened}}
                max_request_headers_kb: 60
                normalize_path: true
                merge_slashes: true
                path_with_escaped_slashes_action: KEEP_UNCHANGED
{{- end}}
{{- if .AccessLog}}
                access_log:
                  - name: envoy.access_loggers.file
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
                      path: /dev/null
{{- end}}
                route_config:
                  virtual_hosts:
                    - name: all
                      domains: ["*"]
                      routes:
                        - match: {prefix: /}
                          route: {cluster: app}
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
                      dynamic_stats: {{.DynamicStats}}
{{- end}}
{{- if .TLS}}
          transport_socket:
            name: envoy.transport_sockets.tls
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
              common_tls_context:
                alpn_protocols: [http/1.1]
                tls_certificates:
                  - certificate_chain: {filename: {{.CertFile}}}
                    private_key: {filename: {{.KeyFile}}}
{{- end}}
  clusters:
    - name: app
      type: STATIC
      connect_timeout: 5s
{{- if .Buffer}}
      per_connection_buffer_limit_bytes: {{.Buffer}}
{{- end}}
      circuit_breakers:
        thresholds: [{max_connections: 1048576, max_pending_requests: 1048576, max_requests: 1048576}]
      load_assignment:
        cluster_name: app
        endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: {{.BackendPort}}}}}}]}]
`

func main() {
	k := knobs{MaxConn: 18000}
	conns := flag.Int("conns", 1000, "WebSockets to hold open")
	envoy := flag.String("envoy", ".cache/tools/envoy-1.40.0/envoy", "the Envoy binary")
	concurrency := flag.Int("concurrency", 1, "Envoy's worker threads")
	runtime := flag.String("runtime", "", "comma-separated key=value runtime keys (bootstrap static layer)")
	envList := flag.String("env", "", "comma-separated KEY=VALUE environment for Envoy (e.g. tcmalloc settings)")
	flag.IntVar(&k.Buffer, "buffer", 32768, "per_connection_buffer_limit_bytes on the listener and the cluster (0: Envoy's default, 1 MiB)")
	flag.StringVar(&k.Mode, "mode", "http", "http (HCM upgrade) or tcp (tcp_proxy)")
	flag.BoolVar(&k.TLS, "tls", false, "TLS on the listener")
	flag.StringVar(&k.StreamIdle, "stream-idle", "300s", "stream_idle_timeout (empty: unset; 0s: off)")
	flag.StringVar(&k.ConnIdle, "conn-idle", "3600s", "downstream idle_timeout (empty: unset)")
	flag.StringVar(&k.HeadersTimeout, "headers-timeout", "10s", "request_headers_timeout (empty: unset)")
	flag.BoolVar(&k.NoStats, "no-stats", false, "reject every stat")
	flag.BoolVar(&k.AccessLog, "access-log", false, "a file access log on the listener")
	flag.BoolVar(&k.Hardened, "hardened", true, "lbplane's request hardening (header limits, underscores, path normalisation)")
	flag.BoolVar(&k.Overload, "overload", true, "lbplane's heap monitor and overload actions")
	flag.BoolVar(&k.DynamicStats, "dynamic-stats", true, "the router's dynamic stats")
	label := flag.String("label", "", "the row's name in the output")
	flag.StringVar(&heapDump, "heap-dump", "", "file for Envoy's tcmalloc heap profile (admin /heap_dump) with every WebSocket open")
	flag.Parse()
	if *runtime != "" {
		k.Runtime = map[string]string{}
		for _, kv := range strings.Split(*runtime, ",") {
			key, v, _ := strings.Cut(kv, "=")
			k.Runtime[key] = v
		}
	}
	if err := run(k, *conns, *envoy, *concurrency, *envList, *label); err != nil {
		fmt.Fprintln(os.Stderr, "wsmem:", err)
		os.Exit(1)
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func run(k knobs, n int, envoyBin string, concurrency int, envList, label string) error {
	dir, err := os.MkdirTemp("", "wsmem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	// The backend listens on port 0 now; Envoy's ports are picked free and bound by Envoy at once (a bench
	// tool, not a test: a lost race fails the run visibly).
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(bl, backend.New("wsmem", 64, 0))
	k.BackendPort = bl.Addr().(*net.TCPAddr).Port
	k.Port, k.AdminPort = freePort(), freePort()
	if k.TLS {
		if k.CertFile, k.KeyFile, err = selfSigned(dir); err != nil {
			return err
		}
	}
	cfg := filepath.Join(dir, "envoy.yaml")
	f, err := os.Create(cfg)
	if err != nil {
		return err
	}
	if err := template.Must(template.New("envoy").Parse(config)).Execute(f, k); err != nil {
		return err
	}
	f.Close()
	cmd := exec.Command(envoyBin, "-c", cfg, "--concurrency", strconv.Itoa(concurrency), "--use-dynamic-base-id", "-l", "warn")
	cmd.Stderr = os.Stderr
	cmd.Env = os.Environ()
	if envList != "" {
		cmd.Env = append(cmd.Env, strings.Split(envList, ",")...)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	dial := func() (*websocket.Conn, error) {
		scheme := "ws"
		if k.TLS {
			scheme = "wss"
		}
		c, err := websocket.NewConfig(fmt.Sprintf("%s://127.0.0.1:%d/ws", scheme, k.Port), fmt.Sprintf("http://127.0.0.1:%d/", k.Port))
		if err != nil {
			return nil, err
		}
		c.TlsConfig = &tls.Config{InsecureSkipVerify: true}
		ws, err := websocket.DialConfig(c)
		if err != nil {
			return nil, err
		}
		ws.SetDeadline(time.Now().Add(10 * time.Second))
		var hello string
		if err := websocket.Message.Receive(ws, &hello); err != nil {
			ws.Close()
			return nil, err
		}
		return ws, nil
	}
	// Warm: a few connections opened and closed, so that what Envoy allocates once is in the baseline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := dial()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("envoy never served: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range 20 {
		if c, err := dial(); err == nil {
			c.Close()
		}
	}
	time.Sleep(2 * time.Second)
	m0 := read(k.AdminPort, cmd.Process.Pid)
	held := make([]*websocket.Conn, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed int
	todo := make(chan struct{}, n)
	for range n {
		todo <- struct{}{}
	}
	close(todo)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range todo {
				c, err := dial()
				mu.Lock()
				if err != nil {
					failed++
				} else {
					held = append(held, c)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	time.Sleep(3 * time.Second)
	m1 := read(k.AdminPort, cmd.Process.Pid)
	if heapDump != "" {
		if err := saveHeapDump(k.AdminPort, heapDump); err != nil {
			fmt.Fprintln(os.Stderr, "heap dump:", err)
		}
	}
	alive := 0
	for _, c := range held {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var got string
		if websocket.Message.Send(c, "ping") == nil && websocket.Message.Receive(c, &got) == nil && got == "ping" {
			alive++
		}
		c.Close()
	}
	per := func(a, b int64) float64 { return float64(b-a) / 1024 / float64(len(held)) }
	load, _ := os.ReadFile("/proc/loadavg")
	out := map[string]any{
		"label": label, "conns": len(held), "failed": failed, "alive": alive, "concurrency": concurrency,
		"allocatedKiB": per(m0.allocated, m1.allocated), "heapKiB": per(m0.heap, m1.heap), "rssKiB": per(m0.rss, m1.rss),
		"idle": m0, "open": m1, "load": strings.Fields(string(load))[0],
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	fmt.Fprintf(os.Stderr, "%-40s %5d open (%d answered): allocated %5.1f KiB, heap %5.1f KiB, RSS %5.1f KiB per WebSocket (idle: allocated %.1f MiB, heap %.1f, free %.1f, RSS %.1f)\n",
		label, len(held), alive, per(m0.allocated, m1.allocated), per(m0.heap, m1.heap), per(m0.rss, m1.rss),
		float64(m0.allocated)/(1<<20), float64(m0.heap)/(1<<20), float64(m0.pageheapFree)/(1<<20), float64(m0.rss)/(1<<20))
	return nil
}

var heapDump string

// saveHeapDump writes Envoy's sampled heap profile (pprof format; sizes only, the release binary is stripped).
func saveHeapDump(admin int, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/heap_dump", admin))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap_dump: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

type mem struct {
	allocated, heap, pageheapFree, threadCache, rss int64
}

func (m mem) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]int64{"allocated": m.allocated, "heap": m.heap, "pageheapFree": m.pageheapFree, "threadCache": m.threadCache, "rss": m.rss})
}

// read takes Envoy's allocator figures (admin /memory) and its RSS (/proc).
func read(admin, pid int) mem {
	var m mem
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/memory", admin))
	if err == nil {
		var v map[string]string
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		num := func(k string) int64 { n, _ := strconv.ParseInt(v[k], 10, 64); return n }
		m.allocated, m.pageheapFree, m.threadCache = num("allocated"), num("pageheap_free"), num("total_thread_cache")
		m.heap = num("heap_size") - num("pageheap_unmapped")
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.rss = kb * 1024
			}
		}
	}
	return m
}

func selfSigned(dir string) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wsmem"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	cert, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return cert, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}
