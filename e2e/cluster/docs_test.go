//go:build cluster

package cluster

import (
	"context"
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
//     takes it down after the test. `make images` is run. The blocks are typed as root, without sudo, as the
//     test runs; helm and kubectl come from hack/tools.sh, as the README says.
//   - `docker build`: there is no Docker on the node; the line after it in the same block, `make images`, is the
//     documented way without Docker, and stands in for it.
//   - `ctr` reaches the node's containerd (CONTAINERD_ADDRESS, which ctr reads, names its socket).
//   - `lbctl diff` exits 1 when something would change, as diff(1): that is not a failure of the block.

const clusterDocsPrelude = `set -eo pipefail
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
# lbctl diff exits 1 when something would change, as diff(1) does: the reader reads the diff, not the status.
lbctl() {
  local rc=0; command lbctl "$@" || rc=$?
  case " $* " in *" diff "*) [ $rc = 1 ] && echo "docs test: lbctl diff: exit status 1 (something would change)" && rc=0 ;; esac
  return $rc
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
	c.runDocBlocksIn(t, c.root, nil, blocks)
}

// runDocBlocksIn runs blocks from dir, with env added to the environment.
func (c *cluster) runDocBlocksIn(t *testing.T, dir string, extraEnv []string, blocks []docblocks.Block) {
	t.Helper()
	// The blocks name make cluster's kubeconfig ($PWD/.run/cluster/kubeconfig).
	want := filepath.Join(c.root, ".run", "cluster", "kubeconfig")
	if abs, _ := filepath.Abs(c.kubeconfig); abs != want {
		t.Fatalf("the docs' cluster blocks use make cluster's kubeconfig %s; this test was given %s: run `make test-cluster`", want, c.kubeconfig)
	}
	scriptPath := filepath.Join(t.TempDir(), "docs-blocks.sh")
	if err := os.WriteFile(scriptPath, []byte(docblocks.Script(clusterDocsPrelude, blocks, nil)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = dir
	cmd.Env = append(docblocks.Environ("PATH"),
		"PATH="+filepath.Dir(c.helm)+":"+filepath.Dir(c.kubectl)+":"+filepath.Join(c.root, "bin")+":"+os.Getenv("PATH"),
		"DOCS_KUBECONFIG="+want,
		"CONTAINERD_ADDRESS="+filepath.Join(c.root, ".run", "cluster", "containerd", "containerd.sock"))
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	out, err := cmd.CombinedOutput()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // nothing a block started outlives it
	if err != nil || !strings.Contains(string(out), docblocks.Done) {
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

// The reader's own files and context that kubernetes-reference.md's "In any cluster" block names.
const (
	myPolicy = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: shop, namespace: shop}
spec: {ports: [{name: http, port: 80, targetPort: 8080}], selector: {app: shop}}
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: my-policy, namespace: shop}
spec:
  listener: {port: 10081, protocol: HTTP}
  backends:
    - name: shop
      service: {name: shop, port: 80}
`
	myPolicyNext = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: my-policy, namespace: shop}
spec:
  listener: {port: 10081, protocol: HTTP}
  backends:
    - name: shop
      loadBalancing: {algorithm: LeastRequest}
      service: {name: shop, port: 80}
`
)

// runAnyClusterDocBlocks runs the blocks of session any-cluster as a reader on another cluster types them: from
// a folder of theirs (the chart, their policy files), with their kubeconfig's context named my-cluster, and
// lbctl built. This node has no registry: the images the chart names by default are the ones make images
// built, tagged with those names in the node's containerd (what a pull would have put there).
func (c *cluster) runAnyClusterDocBlocks(t *testing.T, blocks []docblocks.Block) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(c.root, "charts"), filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"my-policy.yaml": myPolicy, "my-policy-next.yaml": myPolicyNext} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.cleanup(t, func() { c.run("", "delete", "namespace", "shop", "--ignore-not-found", "--wait=false") })
	kc, err := os.ReadFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	myKC := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(myKC, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	current, err := exec.Command(c.kubectl, "--kubeconfig", myKC, "config", "current-context").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl config current-context: %v %s", err, current)
	}
	if out, err := exec.Command(c.kubectl, "--kubeconfig", myKC, "config", "rename-context", strings.TrimSpace(string(current)), "my-cluster").CombinedOutput(); err != nil {
		t.Fatalf("kubectl config rename-context: %v %s", err, out)
	}
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/lbctl")
	build.Dir = c.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lbctl: %v\n%s", err, out)
	}
	chart := strings.TrimSpace(c.helmRun(t, "show", "chart", "charts/lbplane"))
	appVersion := ""
	for _, l := range strings.Split(chart, "\n") {
		if v, ok := strings.CutPrefix(l, "appVersion: "); ok {
			appVersion = strings.Trim(v, `"`)
		}
	}
	if appVersion == "" {
		t.Fatalf("no appVersion in the chart:\n%s", chart)
	}
	sock := filepath.Join(c.root, ".run", "cluster", "containerd", "containerd.sock")
	for src, dst := range map[string]string{
		"ghcr.io/lbplane/lbplane:dev": "ghcr.io/lbplane/lbplane:" + appVersion,
		"lbplane.local/envoy:v1.40.0": "docker.io/envoyproxy/envoy:v1.40.0",
	} {
		if out, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "tag", "--force", src, dst).CombinedOutput(); err != nil {
			t.Fatalf("ctr images tag %s %s: %v\n%s", src, dst, err, out)
		}
	}
	c.runDocBlocksIn(t, dir, []string{"KUBECONFIG=" + myKC, "PATH=" + bin + ":" + filepath.Dir(c.helm) + ":" + filepath.Dir(c.kubectl) + ":" + os.Getenv("PATH")}, blocks)
}
