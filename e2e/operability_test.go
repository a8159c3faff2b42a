package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

const opPolicy = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: op}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  routes: [{backends: [{name: app}], retry: {attempts: 2}}]
  backends:
    - name: app
      loadBalancing: {algorithm: {{.Algorithm}}}
      endpoints: [{address: 127.0.0.1, port: {{.Backend}}}]
`

func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestDiffExplainAndLintAgainstTheServer: lbctl diff shows what a push would change and changes nothing,
// lbctl explain names the Envoy fields, and lint findings come back on push and in status.
func TestDiffExplainAndLintAgainstTheServer(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "d1")
	l := startLbplane(t)
	startEnvoy(t, l, "envoy-op", true)
	data := map[string]any{"Port": reservePort(t), "Backend": bs[0].Port, "Algorithm": "RoundRobin"}
	doc := string(policy(t, opPolicy, data))
	out, errOut, err := lbctl(t, l, doc, "push-config", "-f", "-")
	if err != nil {
		t.Fatalf("push: %v %s", err, errOut)
	}
	if !strings.Contains(errOut, "warning: default/op: retry-without-budget: spec.routes[0].retry:") {
		t.Errorf("push printed no lint warning: stdout %q stderr %q", out, errOut)
	}
	waitSynced(t, l, 1)

	out, errOut, err = lbctl(t, l, doc, "diff", "-f", "-")
	if exitStatus(err) != 0 || out != "" {
		t.Errorf("diff of the pushed policy: exit %d, output %q, stderr %q", exitStatus(err), out, errOut)
	}
	data["Algorithm"] = "LeastRequest"
	changed := string(policy(t, opPolicy, data))
	out, errOut, err = lbctl(t, l, changed, "diff", "-f", "-")
	if exitStatus(err) != 1 || !strings.Contains(out, "~ Cluster default/op/app (proxy group default)") ||
		!strings.Contains(out, `"envoy.load_balancing_policies.round_robin" -> "envoy.load_balancing_policies.least_request"`) {
		t.Errorf("diff of a changed policy: exit %d, output %q, stderr %q", exitStatus(err), out, errOut)
	}
	// Nothing was pushed.
	var p v1alpha1.LoadBalancerPolicy
	if err := json.Unmarshal([]byte(lbctlOK(t, l, "get", "op", "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	if p.Generation != 1 || p.Spec.Backends[0].LoadBalancing.Algorithm != v1alpha1.AlgorithmRoundRobin {
		t.Errorf("diff changed the policy: generation %d, algorithm %s", p.Generation, p.Spec.Backends[0].LoadBalancing.Algorithm)
	}
	if len(p.Status.Warnings) != 1 || !strings.HasPrefix(p.Status.Warnings[0], "retry-without-budget: ") {
		t.Errorf("status warnings: %q", p.Status.Warnings)
	}
	// A bad document is an error, exit 2, as diff(1) has it.
	_, errOut, err = lbctl(t, l, strings.Replace(doc, "RoundRobin", "Fastest", 1), "diff", "-f", "-")
	if exitStatus(err) != 2 || !strings.Contains(errOut, "algorithm") {
		t.Errorf("diff of an invalid policy: exit %d, stderr %q", exitStatus(err), errOut)
	}

	out = lbctlOK(t, l, "explain", "op")
	for _, want := range []string{
		"Policy default/op, proxy group default (served)",
		"Cluster                default/op/app",
		"spec.backends[0].loadBalancing.algorithm",
		"Cluster default/op/app: load_balancing_policy.policies[0].typed_extension_config.name",
		"envoy.load_balancing_policies.round_robin",
		"spec.routes[0].retry.attempts",
		"route.retry_policy.num_retries",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lbctl explain op lacks %q:\n%s", want, out)
		}
	}
}

// TestSigtermIsLogged: lbplane stopped by SIGTERM (the kubelet's, systemd's) says so in its log, with the
// signal, and exits 0, rather than vanishing without a word.
func TestSigtermIsLogged(t *testing.T) {
	t.Parallel()
	l := startLbplane(t)
	if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.done:
	case <-time.After(30 * time.Second):
		t.Fatal("lbplane did not exit within 30 s of SIGTERM")
	}
	if code := l.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	b, err := os.ReadFile(l.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stopping: received a signal", "signal=terminated", "msg=stopped"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the log does not say %q:\n%s", want, b)
		}
	}
}
