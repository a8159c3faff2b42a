package lbctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/internal/lbctl"
	"github.com/lbplane/lbplane/internal/tools"
)

func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := lbctl.Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestValidateAcceptsEveryExample(t *testing.T) {
	// Example file references are relative to the repository, where a user runs lbctl.
	t.Chdir(tools.RepoRoot())
	code, out, errs := run(t, "", "validate", "--allow-backend-cidrs", "127.0.0.0/8", "-f", "examples")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasSuffix(out, " policies valid\n") {
		t.Errorf("output %q", out)
	}
}

func TestValidateListsEveryErrorOnItsOwnLine(t *testing.T) {
	bad := `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: bad}
spec:
  listener: {port: 0, protocol: HTTP}
  backends: [{name: a, loadBalancing: {algorithm: Fastest}, endpoints: [{address: 10.0.0.1, port: 80}]}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: typo}
spec:
  listenr: {port: 80, protocol: HTTP}
`
	code, _, errs := run(t, bad, "validate", "-f", "-")
	if code == 0 {
		t.Fatal("invalid policies validated")
	}
	want := []string{
		// The typo does not hide the document's other problems (here, what the misspelled listener leaves unset).
		`error: <stdin>#2: unknown field "spec.listenr"`,
		`error: <stdin>#2: spec.listener.port: must be between 1 and 65535, got 0`,
		`error: <stdin>#2: spec.listener.protocol: required; supported: HTTP, HTTPS, TCP`,
		`error: <stdin>#2: spec.backends: at least one backend is required (unless every route has redirect or directResponse)`,
		`error: default/bad (<stdin>#1): spec.listener.port: must be between 1 and 65535, got 0`,
		`error: default/bad (<stdin>#1): spec.backends[0].loadBalancing.algorithm: unsupported value "Fastest"; supported: RoundRobin, LeastRequest, Random, RingHash, Maglev, BackendUtilization`,
	}
	if got := strings.Split(strings.TrimSpace(errs), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", errs, strings.Join(want, "\n"))
	}
}

func TestTranslatePrintsResourcesByGroupAndType(t *testing.T) {
	code, out, errs := run(t, "", "translate", "-f", filepath.Join(tools.RepoRoot(), "examples", "round-robin.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"default:", "type.googleapis.com/envoy.config.cluster.v3.Cluster:", "name: default/demo/app", "envoy.load_balancing_policies.round_robin", "routeConfigName: http-10080"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestBootstrapIsAcceptedByEnvoyWithAdminOnASocket(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	for _, args := range [][]string{{"--node-id", "e1", "--xds-insecure"}, {"--node-id", "e2", "--proxy-group", "edge", "--delta=false", "--xds-address", "lbplane.example.com:18000", "--xds-insecure"}} {
		code, out, errs := run(t, "", append([]string{"bootstrap"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if !strings.Contains(out, "pipe: {path: ") || strings.Contains(out, "port_value: 19000") {
			t.Errorf("admin is not a Unix socket:\n%s", out)
		}
		if err := envoyAccepts(t, envoy, out); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if code, _, errs := run(t, "", "bootstrap", "--node-id", "bad id"); code == 0 || !strings.Contains(errs, "--node-id") {
		t.Errorf("a bad node id: exit %d %s", code, errs)
	}
}

func TestRemoteCommandsNeedAToken(t *testing.T) {
	t.Setenv("LBPLANE_TOKEN", "")
	t.Setenv("LBPLANE_TOKEN_FILE", "")
	code, _, errs := run(t, "", "--token-file", "", "get")
	if code == 0 || !strings.Contains(errs, "error: no token") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	if code, out, _ := run(t, "", "version", "--client"); code != 0 || !strings.HasPrefix(out, "Client Version: ") {
		t.Errorf("version: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "completion", "bash"); code != 0 || !strings.Contains(out, "bash completion") {
		t.Errorf("completion: %d", code)
	}
}

// TestKubeconfigEnvSelectsKubernetesMode: KUBECONFIG alone, with no push API configured, makes lbctl go where
// kubectl goes; a configured push API (LBPLANE_SERVER, a token) keeps it on the push API. Both addresses
// refuse connections, so the error says which one was tried.
func TestKubeconfigEnvSelectsKubernetesMode(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:2"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"LBPLANE_SERVER", "LBPLANE_TOKEN", "LBPLANE_TOKEN_FILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	if code, _, errs := run(t, "", "get"); code == 0 || !strings.Contains(errs, "127.0.0.1:2") {
		t.Errorf("KUBECONFIG alone: exit %d, stderr %q; want the Kubernetes API server tried", code, errs)
	}
	t.Setenv("LBPLANE_SERVER", "http://127.0.0.1:1")
	t.Setenv("LBPLANE_TOKEN", "t")
	if code, _, errs := run(t, "", "get"); code == 0 || !strings.Contains(errs, "127.0.0.1:1") || strings.Contains(errs, "127.0.0.1:2") {
		t.Errorf("KUBECONFIG with a push API configured: exit %d, stderr %q; want the push API tried", code, errs)
	}
	// Without either, the error says how to get a token, in both modes' terms.
	t.Setenv("KUBECONFIG", "")
	t.Setenv("LBPLANE_TOKEN", "")
	if code, _, errs := run(t, "", "get"); code == 0 || !strings.Contains(errs, "<data-dir>/token") || !strings.Contains(errs, "KUBECONFIG") {
		t.Errorf("no token: exit %d, stderr %q", code, errs)
	}
}

// lbctl --version prints lbctl's version as lbctl version --client does, and needs no server.
func TestVersionFlag(t *testing.T) {
	code, flagOut, errs := run(t, "", "--version")
	if code != 0 || errs != "" {
		t.Fatalf("lbctl --version: exit %d: %s", code, errs)
	}
	_, cmdOut, _ := run(t, "", "version", "--client")
	if !strings.HasPrefix(flagOut, "Client Version: ") || flagOut != cmdOut {
		t.Errorf("lbctl --version printed %q, lbctl version --client %q", flagOut, cmdOut)
	}
}
