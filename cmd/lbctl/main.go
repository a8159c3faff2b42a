// Command lbctl pushes, inspects and checks lbplane policies.
package main

import (
	"os"

	"github.com/lbplane/lbplane/internal/lbctl"
)

func main() { os.Exit(lbctl.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
