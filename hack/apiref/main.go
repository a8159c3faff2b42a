// Command apiref writes docs/policy-reference.md from the doc comments of the LoadBalancerPolicy API types
// (api/v1alpha1), between the hand-written header.md and footer.md beside it. The CRD's descriptions come from
// the same comments (controller-gen), so the reference and `kubectl explain lbp.spec...` say the same thing.
// Each field's "Envoy:" line comes from the rules lbctl explain resolves (controlplane/explain).
//
//	go run ./hack/apiref            # write docs/policy-reference.md
//	go run ./hack/apiref -o -       # print it
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	out := flag.String("o", "docs/policy-reference.md", "output file, - for stdout")
	flag.Parse()
	text, err := Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiref:", err)
		os.Exit(1)
	}
	if *out == "-" {
		os.Stdout.Write(text)
		return
	}
	if err := os.WriteFile(filepath.Join(*root, *out), text, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "apiref:", err)
		os.Exit(1)
	}
}
