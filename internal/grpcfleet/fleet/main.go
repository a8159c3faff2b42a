// Command fleet runs many proxyless gRPC clients in one process, each its own xDS node with its own
// certificate from lbplane, as `lbctl bootstrap --grpc` gives one, and the gRPC backends they call. The
// e2e fleet test and the benchmark's gRPC fleet row drive it. It is a process of its own so that thousands
// of clients run outside the race detector's limit on goroutines, and so that their memory is not counted as
// the driver's.
//
// It starts -backends backends and prints {"backends":[{"name":..., "port":...}]}; then it answers each
// command read from stdin with one JSON line on stdout (grpcfleet.Process drives it; the lines are
// grpcfleet.Started, Ready, Calls and Failure):
//
//	connect  asks lbplane for -clients certificates, starts a client for each and waits until every one
//	         answered a call: {"ready": n, "seconds": s}
//	call     one call from every client: {"answers": {"backend": count}, "errors": n, "firstError": "..."}
//	quit     closes the clients and exits, as the end of stdin does
//
// With -pprof it serves net/http/pprof (the benchmark profiles the clients' CPU over the changes it times).
// An error ends the process with {"error": "..."} and exit status 1. The push API token is read from
// LBPLANE_TOKEN.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lbplane/lbplane/controlplane/pushclient"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/grpcfleet"
)

type config struct {
	n, backends, parallel int
	api, xds, target, dir string
	pprof                 string
	group, prefix         string
	ready                 time.Duration
}

func main() {
	var c config
	flag.IntVar(&c.n, "clients", 1000, "gRPC clients, each its own xDS node")
	flag.IntVar(&c.backends, "backends", 3, "gRPC backends to start on 127.0.0.1")
	flag.IntVar(&c.parallel, "parallel", 16, "clients started, and calls made, at a time")
	flag.StringVar(&c.api, "api", "", "lbplane's push API URL (certificates)")
	flag.StringVar(&c.xds, "xds", "", "lbplane's xDS address, host:port")
	flag.StringVar(&c.target, "target", "", "what the clients dial: xds:///TARGET (a listener host:port)")
	flag.StringVar(&c.dir, "dir", "", "directory for the clients' certificates (one 0700 folder each)")
	flag.StringVar(&c.group, "proxy-group", "default", "the clients' proxy group")
	flag.StringVar(&c.prefix, "node-prefix", "grpc-fleet-", "node ids are this prefix and a number")
	flag.DurationVar(&c.ready, "ready-timeout", 2*time.Minute, "how long connect waits for every client's first answer")
	flag.StringVar(&c.pprof, "pprof", "", "serve net/http/pprof on this address, host:port (loopback: it has no authentication)")
	flag.Parse()
	if err := run(c); err != nil {
		answer(grpcfleet.Failure{Error: err.Error()})
		os.Exit(1)
	}
}

var out = json.NewEncoder(os.Stdout)

func answer(v any) {
	if err := out.Encode(v); err != nil {
		os.Exit(1)
	}
}

func run(c config) error {
	if c.api == "" || c.xds == "" || c.target == "" || c.dir == "" {
		return errors.New("-api, -xds, -target and -dir are required")
	}
	if c.parallel < 1 {
		return fmt.Errorf("-parallel: at least 1, got %d", c.parallel)
	}
	if c.pprof != "" {
		if host, _, err := net.SplitHostPort(c.pprof); err != nil || !net.ParseIP(host).IsLoopback() {
			return fmt.Errorf("-pprof: %q is not a loopback IP address and port", c.pprof)
		}
		lis, err := net.Listen("tcp", c.pprof)
		if err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
		go http.Serve(lis, nil) // net/http/pprof's handlers, on the default mux
	}
	var started grpcfleet.Started
	for i := range c.backends {
		b, err := grpcfleet.StartBackend(fmt.Sprintf("g%d", i))
		if err != nil {
			return err
		}
		defer b.Stop()
		started.Backends = append(started.Backends, grpcfleet.BackendInfo{Name: b.Name, Port: b.Port})
	}
	answer(started)
	f := &fleet{config: c, api: &pushclient.Client{BaseURL: c.api, Token: os.Getenv("LBPLANE_TOKEN")}}
	defer f.close()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch cmd := in.Text(); cmd {
		case "connect":
			start := time.Now()
			if err := f.connect(); err != nil {
				return err
			}
			answer(grpcfleet.Ready{Ready: len(f.clients), Seconds: time.Since(start).Seconds()})
		case "call":
			answer(f.callAll())
		case "quit":
			return nil
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	return in.Err()
}

type fleet struct {
	config
	api     *pushclient.Client
	clients []*grpcfleet.Client
}

func (f *fleet) close() {
	for _, c := range f.clients {
		if c != nil {
			c.Close()
		}
	}
}

// each runs do(i) for i in [0, n), f.parallel at a time, and returns the first error.
func (f *fleet) each(n int, do func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(f.parallel)
	for i := range n {
		g.Go(func() error { return do(i) })
	}
	return g.Wait()
}

// connect starts every client as `lbctl bootstrap --grpc` would set one up (a certificate from lbplane for
// its node id, written with lbplane's CA into its own folder, and the bootstrap pointing at them), then waits
// for each one's first answer.
func (f *fleet) connect() error {
	f.clients = make([]*grpcfleet.Client, f.n)
	deadline := time.Now().Add(f.ready)
	return f.each(len(f.clients), func(i int) error {
		node := fmt.Sprintf("%s%d", f.prefix, i)
		dir := filepath.Join(f.dir, node)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		issued, err := f.api.IssueCertificate(ctx, node, f.group)
		cancel()
		if err != nil {
			return fmt.Errorf("certificate of %s: %w", node, err)
		}
		if err := envoybootstrap.WriteCredentials(dir, envoybootstrap.Credentials{Cert: []byte(issued.Certificate), Key: []byte(issued.PrivateKey), CA: []byte(issued.CA)}); err != nil {
			return err
		}
		bootstrap, err := envoybootstrap.GRPCBootstrap(envoybootstrap.GRPCParams{NodeID: node, Group: f.group, XDS: []string{f.xds}, CredsDir: dir})
		if err != nil {
			return err
		}
		c, err := grpcfleet.NewClient(bootstrap, f.target)
		if err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		f.clients[i] = c
		for {
			_, err := grpcfleet.Call(c, "")
			if err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s had no answer within %s: %w", node, f.ready, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

func (f *fleet) callAll() grpcfleet.Calls {
	var (
		mu  sync.Mutex
		got = grpcfleet.Calls{Answers: map[string]int{}}
	)
	f.each(len(f.clients), func(i int) error {
		b, err := grpcfleet.Call(f.clients[i], "")
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if got.Errors == 0 {
				got.FirstError = err.Error()
			}
			got.Errors++
			return nil
		}
		got.Answers[b]++
		return nil
	})
	return got
}
