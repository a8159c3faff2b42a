package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lbplane/lbplane/internal/tools"
)

// The kind path (e2e/kind/run.sh) needs a container engine. Where one runs, this test runs it; elsewhere it is
// skipped, and says why: the same flow is proved against a real kube-apiserver by the Kubernetes tests here.
func TestKindPath(t *testing.T) {
	t.Parallel()
	if exec.Command("docker", "info").Run() != nil {
		t.Skip("no container engine on this machine (docker info fails): e2e/kind/run.sh needs one; the Kubernetes flow is tested against a real kube-apiserver instead")
	}
	if out, err := exec.Command("bash", filepath.Join(tools.RepoRoot(), "e2e", "kind", "run.sh")).CombinedOutput(); err != nil {
		t.Fatalf("e2e/kind/run.sh: %v\n%s", err, out)
	}
}
