// Command lbplane-backend is a sample HTTP backend: it answers with its name (header X-Backend and the
// first line of the body) and a fixed-size body. The demo and the benchmarks run several, and one process
// serves several addresses, each under its own name:
//
//	lbplane-backend --listen 127.0.0.1:18081-18083   # backend-18081, backend-18082 and backend-18083
//	lbplane-backend --listen 127.0.0.1:18081,127.0.0.1:18082 --name a,b
//
// SIGTERM or SIGINT stops it gracefully: with --drain D it first fails its health checks and closes each
// connection after its next response for D (as a Kubernetes pod should while its endpoint is being removed),
// then it stops accepting and lets the requests in flight finish.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lbplane/lbplane/internal/backend"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// listFlag is a flag that may be repeated or comma-separated; the first use replaces the default.
type listFlag struct {
	vals []string
	set  bool
}

func (l *listFlag) String() string { return strings.Join(l.vals, ",") }

func (l *listFlag) Set(s string) error {
	if !l.set {
		l.vals, l.set = nil, true
	}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return errors.New("empty value")
		}
		l.vals = append(l.vals, v)
	}
	return nil
}

// maxPortRange bounds HOST:FIRST-LAST, so that a typo does not open thousands of listeners.
const maxPortRange = 256

// expandListen turns each HOST:FIRST-LAST into HOST:FIRST, ..., HOST:LAST; other addresses are kept as given.
func expandListen(addrs []string) ([]string, error) {
	var out []string
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("--listen %s: %w", a, err)
		}
		first, last, isRange := strings.Cut(port, "-")
		if !isRange {
			out = append(out, a)
			continue
		}
		lo, err1 := strconv.ParseUint(first, 10, 16)
		hi, err2 := strconv.ParseUint(last, 10, 16)
		switch {
		case err1 != nil || err2 != nil || lo == 0:
			return nil, fmt.Errorf("--listen %s: a port range is FIRST-LAST, two ports from 1 to 65535", a)
		case hi < lo || hi-lo >= maxPortRange:
			return nil, fmt.Errorf("--listen %s: a port range runs upwards and holds at most %d ports", a, maxPortRange)
		}
		for p := lo; p <= hi; p++ {
			out = append(out, net.JoinHostPort(host, strconv.FormatUint(p, 10)))
		}
	}
	return out, nil
}

type options struct {
	size          int
	delay         time.Duration
	proxyProtocol bool
	cert, key     string
	clientCA      string
	utilization   float64
	failWith      int
	drain         time.Duration
}

// shutdownTimeout bounds how long a stop waits for the requests in flight.
const shutdownTimeout = 10 * time.Second

// run serves until a listener fails (its error) or ctx is done (nil, after draining for --drain and a
// graceful shutdown).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("lbplane-backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := &listFlag{vals: []string{"127.0.0.1:18081"}}
	names := &listFlag{}
	var o options
	fs.Var(listen, "listen", "address to listen on; several (repeated or comma-separated, or a port range HOST:FIRST-LAST) are served by this one process, each as its own backend (default 127.0.0.1:18081)")
	fs.Var(names, "name", "name to answer with, once per --listen address, in the same order (default: the listen address; with several addresses, backend-<port>)")
	fs.IntVar(&o.size, "size", 1024, "response body size in bytes")
	fs.DurationVar(&o.delay, "delay", 0, "delay before each response")
	fs.BoolVar(&o.proxyProtocol, "proxy-protocol", false, "require a PROXY protocol header (v1 or v2) on every connection and answer with the client it names (header X-Peer)")
	fs.StringVar(&o.cert, "tls-cert", "", "serve TLS with this PEM certificate (with --tls-key)")
	fs.StringVar(&o.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.clientCA, "client-ca", "", "with --tls-cert: require a client certificate signed by this PEM CA (mutual TLS)")
	fs.Float64Var(&o.utilization, "utilization", 0, "report this utilization (0-1) in an ORCA endpoint-load-metrics header on every response; 0: no report")
	fs.IntVar(&o.failWith, "fail-with", 0, "answer every request but health probes with this status (e.g. 500): a broken backend whose health checks pass; 0: 200")
	fs.DurationVar(&o.drain, "drain", 0, "on SIGTERM or SIGINT, first drain for this long: health checks get 503 and every response closes its connection; then stop (a Kubernetes pod wants a few seconds, for its endpoint's removal to reach the proxies)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (addresses go in --listen)", fs.Arg(0))
	}
	addrs, err := expandListen(listen.vals)
	if err != nil {
		return err
	}
	if names.set && len(names.vals) != len(addrs) {
		return fmt.Errorf("--name: one name per --listen address (%d addresses, %d names)", len(addrs), len(names.vals))
	}
	serveOpts, err := o.serveOptions()
	if err != nil {
		return err
	}
	// Bind every address before serving any, so that a taken port fails the start rather than leaving a
	// process that serves some of them.
	lis := make([]net.Listener, len(addrs))
	for i, addr := range addrs {
		if lis[i], err = net.Listen("tcp", addr); err != nil {
			for _, l := range lis[:i] {
				l.Close()
			}
			return fmt.Errorf("--listen %s: %w", addr, err)
		}
	}
	bound := make([]string, len(lis))
	for i, l := range lis {
		bound[i] = l.Addr().String()
	}
	nameList := names.vals
	if !names.set {
		nameList = defaultNames(addrs, bound)
	}
	errs := make(chan error, len(lis))
	backends := make([]*backend.Backend, len(lis))
	servers := make([]*http.Server, len(lis))
	for i, l := range lis {
		b := backend.New(nameList[i], o.size, o.delay)
		b.SetUtilization(o.utilization)
		b.FailWith(o.failWith)
		srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
		backends[i], servers[i] = b, srv
		fmt.Fprintf(stderr, "serving %s on %s\n", nameList[i], bound[i])
		go func() { errs <- srv.Serve(backend.Listen(l, serveOpts)) }()
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	if o.drain > 0 {
		fmt.Fprintf(stderr, "draining for %s\n", o.drain)
		for _, b := range backends {
			b.Drain()
		}
		select {
		case err := <-errs:
			return err
		case <-time.After(o.drain):
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var failed error
	for _, srv := range servers {
		if err := srv.Shutdown(stopCtx); err != nil {
			failed = fmt.Errorf("stopping: requests still in flight after %s: %w", shutdownTimeout, err)
		}
	}
	fmt.Fprintln(stderr, "stopped")
	return failed
}

// defaultNames names the backends when --name is not given: one address is named as given (as it always
// was); several are each named backend-<port> after the port bound (port 0 included), or by their address
// where two share a port.
func defaultNames(listen, bound []string) []string {
	if len(listen) == 1 {
		return []string{listen[0]}
	}
	ports := map[string]int{}
	for _, a := range bound {
		_, p, _ := net.SplitHostPort(a)
		ports[p]++
	}
	out := make([]string, len(bound))
	for i, a := range bound {
		_, p, _ := net.SplitHostPort(a)
		if _, err := strconv.Atoi(p); err == nil && ports[p] == 1 {
			out[i] = "backend-" + p
		} else {
			out[i] = a
		}
	}
	return out
}

func (o options) serveOptions() (backend.ServeOptions, error) {
	opts := backend.ServeOptions{ProxyProtocol: o.proxyProtocol}
	switch {
	case o.cert != "" || o.key != "":
		cfg, err := backend.ServerTLS(o.cert, o.key, o.clientCA)
		if err != nil {
			return opts, err
		}
		opts.TLS = cfg
	case o.clientCA != "":
		return opts, fmt.Errorf("--client-ca needs --tls-cert and --tls-key")
	}
	if o.utilization < 0 || o.utilization > 1 {
		return opts, fmt.Errorf("--utilization must be between 0 and 1, got %g", o.utilization)
	}
	if o.failWith != 0 && (o.failWith < 200 || o.failWith > 599) {
		return opts, fmt.Errorf("--fail-with must be an HTTP status (200-599) or 0, got %d", o.failWith)
	}
	if o.drain < 0 {
		return opts, fmt.Errorf("--drain must not be negative, got %s", o.drain)
	}
	return opts, nil
}
