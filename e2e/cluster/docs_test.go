//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/docblocks"
)

// The ```sh cluster blocks of README.md and docs/ (internal/docblocks) run here as typed, in order, one bash
// per page, from the repository's root, against the cluster this test is given: they are TestCluster's steps
// (the README's quick start is its install). What the blocks cannot do on the node they run on is answered by
// the prelude, loudly:
//   - `make cluster`: the cluster is the one make test-cluster started (make cluster's own run); the prelude
//     checks that it answers and prints the line make cluster prints. `make cluster-down`: make test-cluster
//     takes it down after the test. `make images` is run. `sudo` runs its command (the test runs as root).
//   - `docker build`: there is no Docker on the node; the line after it in the same block, `make images`, is the
//     documented way without Docker, and stands in for it.
//   - `ctr` reaches the node's containerd (CONTAINERD_ADDRESS, which ctr reads, names its socket).

const clusterDocsPrelude = `set -eo pipefail
sudo() { "$@"; }
make() {
  case "$*" in
    cluster) kubectl --kubeconfig "$DOCS_KUBECONFIG" get --raw /readyz >/dev/null
      echo "docs test: the cluster make test-cluster started (make cluster) is up"
      echo "export KUBECONFIG=$DOCS_KUBECONFIG" ;;
    cluster-down) echo "docs test: make test-cluster takes the cluster down after the test" ;;
    images) command make images ;;
    *) echo "docs test: make $* is not run by this test" >&2; return 1 ;;
  esac
}
docker() { echo "docs test: no Docker on this node: the next line, make images, is the documented way without it" >&2; }
trap 'echo "docs test: failed: $BASH_COMMAND" >&2' ERR
`

// clusterDocBlocks are the cluster blocks of one page.
func (c *cluster) clusterDocBlocks(t *testing.T, page string) []docblocks.Block {
	t.Helper()
	blocks, err := docblocks.Read(c.root, filepath.Join(c.root, page))
	if err != nil {
		t.Fatal(err)
	}
	var out []docblocks.Block
	for _, b := range blocks {
		if b.Tag == docblocks.Cluster {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no ```sh cluster block", page)
	}
	return out
}

// runDocBlocks runs blocks as typed, in order, in one bash from the repository's root, and fails the test with
// their output when one fails.
func (c *cluster) runDocBlocks(t *testing.T, blocks []docblocks.Block) {
	t.Helper()
	// The blocks name make cluster's kubeconfig ($PWD/.run/cluster/kubeconfig).
	want := filepath.Join(c.root, ".run", "cluster", "kubeconfig")
	if abs, _ := filepath.Abs(c.kubeconfig); abs != want {
		t.Fatalf("the docs' cluster blocks use make cluster's kubeconfig %s; this test was given %s: run `make test-cluster`", want, c.kubeconfig)
	}
	var script strings.Builder
	script.WriteString(clusterDocsPrelude)
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo %q\n", fmt.Sprintf("### block %d of %d: %s", i+1, len(blocks), b.Where()))
		script.WriteString(b.Text)
	}
	script.WriteString("echo '### all blocks ran'\n")
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "docs-blocks.sh")
	if err := os.WriteFile(scriptPath, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = c.root
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || k == "PATH" || strings.HasPrefix(k, "LBPLANE_") {
			continue // the blocks say what they need
		}
		env = append(env, kv)
	}
	cmd.Env = append(env,
		"PATH="+filepath.Dir(c.helm)+":"+filepath.Dir(c.kubectl)+":"+filepath.Join(c.root, "bin")+":"+os.Getenv("PATH"),
		"DOCS_KUBECONFIG="+want,
		"CONTAINERD_ADDRESS="+filepath.Join(c.root, ".run", "cluster", "containerd", "containerd.sock"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	out, err := cmd.CombinedOutput()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // nothing a block started outlives it
	if err != nil || !strings.Contains(string(out), "### all blocks ran") {
		t.Fatalf("the docs' cluster blocks: %v; output:\n%s", err, out)
	}
	var where []string
	for _, b := range blocks {
		where = append(where, b.Where())
	}
	t.Logf("the docs' cluster blocks %s ran in %.1fs; output:\n%s", strings.Join(where, ", "), time.Since(start).Seconds(), out)
}

// allClusterBlocksRun fails when a cluster block of README.md or docs/ is in none of the pages TestCluster runs.
func allClusterBlocksRun(t *testing.T, root string, ran map[string]bool) {
	t.Helper()
	blocks, err := docblocks.Tagged(root, docblocks.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if !ran[b.Page] {
			t.Errorf("%s: a ```sh cluster block that TestCluster does not run: add its page to TestCluster", b.Where())
		}
	}
}
