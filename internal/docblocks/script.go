package docblocks

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Done is the line a script from Script prints after its last block: output without it ran short.
const Done = "### all blocks ran"

// Script is one bash script that runs blocks in order after prelude, each announced by its place
// ("### block 2 of 5: docs/ha.md:44"), and ends by printing Done. rewrite, when not nil, changes a block's
// text before it is written (the docs test moves ports with it).
func Script(prelude string, blocks []Block, rewrite func(string) string) string {
	var s strings.Builder
	s.WriteString(prelude)
	for i, b := range blocks {
		fmt.Fprintf(&s, "echo %q\n", fmt.Sprintf("### block %d of %d: %s", i+1, len(blocks), b.Where()))
		text := b.Text
		if rewrite != nil {
			text = rewrite(text)
		}
		s.WriteString(text)
	}
	s.WriteString("echo '" + Done + "'\n")
	return s.String()
}

// Environ is this process's environment less what a reader's shell would not have: lbplane's own
// variables (LBPLANE_*) and KUBECONFIG (alone it puts lbctl in Kubernetes mode), which the blocks set when
// they need them, and the names in drop.
func Environ(drop ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LBPLANE_") || k == "KUBECONFIG" || slices.Contains(drop, k) {
			continue
		}
		env = append(env, kv)
	}
	return env
}
