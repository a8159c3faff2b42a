// Command lbplane is the load-balancing control plane for Envoy.
package main

import (
	"os"

	"github.com/lbplane/lbplane/internal/lbplanecmd"
)

func main() { os.Exit(lbplanecmd.Main(os.Args[1:])) }
