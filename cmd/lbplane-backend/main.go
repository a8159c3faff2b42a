// Command lbplane-backend is a sample HTTP backend: it answers with its name (header X-Backend and the
// first line of the body) and a fixed-size body. The demo and the benchmarks run several.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/lbplane/lbplane/internal/backend"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18081", "address to listen on")
	name := flag.String("name", "", "name to answer with (default: the listen address)")
	size := flag.Int("size", 1024, "response body size in bytes")
	delay := flag.Duration("delay", 0, "delay before each response")
	proxyProtocol := flag.Bool("proxy-protocol", false, "require a PROXY protocol header (v1 or v2) on every connection and answer with the client it names (header X-Peer)")
	tlsCert := flag.String("tls-cert", "", "serve TLS with this PEM certificate (with --tls-key)")
	tlsKey := flag.String("tls-key", "", "PEM private key of --tls-cert")
	clientCA := flag.String("client-ca", "", "with --tls-cert: require a client certificate signed by this PEM CA (mutual TLS)")
	utilization := flag.Float64("utilization", 0, "report this utilization (0-1) in an ORCA endpoint-load-metrics header on every response; 0: no report")
	flag.Parse()
	if *name == "" {
		*name = *listen
	}
	if err := run(*listen, *name, *size, *delay, *proxyProtocol, *tlsCert, *tlsKey, *clientCA, *utilization); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(listen, name string, size int, delay time.Duration, proxyProtocol bool, cert, key, clientCA string, utilization float64) error {
	opts := backend.ServeOptions{ProxyProtocol: proxyProtocol}
	switch {
	case cert != "" || key != "":
		cfg, err := backend.ServerTLS(cert, key, clientCA)
		if err != nil {
			return err
		}
		opts.TLS = cfg
	case clientCA != "":
		return fmt.Errorf("--client-ca needs --tls-cert and --tls-key")
	}
	if utilization < 0 || utilization > 1 {
		return fmt.Errorf("--utilization must be between 0 and 1, got %g", utilization)
	}
	b := backend.New(name, size, delay)
	b.SetUtilization(utilization)
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(backend.Listen(lis, opts))
}
