// Command lbplane-backend is a sample HTTP backend: it answers with its name (header X-Backend and the
// first line of the body) and a fixed-size body. The demo and the benchmarks run several.
package main

import (
	"flag"
	"fmt"
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
	flag.Parse()
	if *name == "" {
		*name = *listen
	}
	srv := &http.Server{Addr: *listen, Handler: backend.New(*name, *size, *delay), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
