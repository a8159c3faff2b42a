package e2e

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/controlplane/pki"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/envoyvalidate"
	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

var updateChart = flag.Bool("update-chart", false, "rewrite charts/lbplane/testdata/*.golden.yaml from helm template")

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(tools.Require(t, "helm"), args...).CombinedOutput()
	return string(out), err
}

var chartDir = filepath.Join(tools.RepoRoot(), "charts", "lbplane")

// allValues sets every scheduling, disruption, autoscaling, metrics and CRD value of the chart;
// platformValues the names, labels, pinned images, DaemonSet on the nodes' network, NetworkPolicies,
// security contexts, update strategies and Service addresses.
var (
	allValues      = filepath.Join(chartDir, "testdata", "all-values.yaml")
	platformValues = filepath.Join(chartDir, "testdata", "platform-values.yaml")
)

func TestHelmLintAndSchema(t *testing.T) {
	t.Parallel()
	for _, set := range [][]string{nil, {"--set", "mtls.enabled=false"}, {"--set", "envoy.enabled=false"}, {"--set", "mtls.certManager.issuerRef.name=ca"},
		{"-f", allValues}, {"-f", allValues, "--set", "envoy.enabled=false"}, {"-f", platformValues},
		{"--set", "envoy.kind=DaemonSet", "--set", "envoy.service.managedPorts=false", "--set", "networkPolicy.enabled=true"},
		{"--set", "gatewayAPI.enabled=true", "--set", "gatewayAPI.ports=30000-30099"}} {
		if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, set...)...); err != nil {
			t.Errorf("helm lint %v: %v\n%s", set, err, out)
		}
	}
	// values.schema.json refuses what would render a broken release.
	for _, bad := range []string{"envoy.service.type=Bogus", "replicas=0", "envoy.proxyGroup=Not_A_Group", "typo=1", "mtls.certManager.issuerRef.kind=Secret", "mtls.certManager.duration=1d",
		"envoy.drain.seconds=-1", "metrics.serviceMonitor.interval=soon", "envoy.autoscaling.targetCPUUtilizationPercentage=0",
		"envoy.readinessPort=10080", "imagePullSecrets[0]=regcred", "envoy.kind=StatefulSet", "nameOverride=Bad_Name",
		"fullnameOverride=" + strings.Repeat("x", 51), "image.digest=latest", "envoy.image.digest=sha256:abc", "envoy.service.ipFamilyPolicy=DualStack",
		"envoy.service.ipFamilies[0]=IPv5", "envoy.service.ports[0].protocol=HTTP", "envoy.service.ports[0].name=a-port-name-too-long",
		"updateStrategy.type=OnDelete", "envoy.updateStrategy.type=Sometimes", "networkPolicy.apiFrom=everyone", "commonLabels.team=1",
		"envoy.accessLog=yes"} {
		out, err := helm(t, "template", "x", chartDir, "--kube-version", "1.37.1", "--set", bad)
		if err == nil || !strings.Contains(out, "schema") {
			t.Errorf("--set %s was not refused by the schema: %v %s", bad, err, out)
		}
	}
}

// TestHelmTemplateGolden renders the chart with fixed values and compares with the reviewed output; the
// rendered Envoy bootstrap must also be accepted by Envoy.
func TestHelmTemplateGolden(t *testing.T) {
	t.Parallel()
	envoy := tools.Require(t, "envoy")
	for name, set := range map[string][]string{
		"default":      {"--set", "apiToken=golden"},
		"insecure":     {"--set", "apiToken=golden", "--set", "mtls.enabled=false"},
		"mtls":         {"--set", "apiToken=golden", "--set", "mtls.enabled=true", "--set", "envoy.proxyGroup=edge", "--set", "envoy.service.type=NodePort"},
		"dashboards":   {"--set", "apiToken=golden", "--set", "metrics.dashboards.enabled=true", "--set", "metrics.podAnnotations=false"},
		"certmanager":  append([]string{"--set", "apiToken=golden"}, certManagerValues...),
		"all":          {"-f", allValues},
		"zone":         {"--set", "apiToken=golden", "--set", "envoy.zone=zone-a"},
		"clusterstats": {"--set", "apiToken=golden", "--set", "envoy.clusterStats=used"},
		"platform":     {"--set", "apiToken=golden", "-f", platformValues},
		"groupcert":    {"--set", "apiToken=golden", "--set", "mtls.envoyIdentity=group"},
		"gatewayapi":   {"--set", "apiToken=golden", "--set", "gatewayAPI.enabled=true"},
	} {
		out, err := helm(t, append([]string{"template", "demo", chartDir, "-n", "lbplane", "--kube-version", "1.37.1"}, set...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		golden := filepath.Join(chartDir, "testdata", name+".golden.yaml")
		if *updateChart {
			os.WriteFile(golden, []byte(out), 0o644)
		} else if want, err := os.ReadFile(golden); err != nil || string(want) != out {
			t.Errorf("%s differs from %s (regenerate with go test ./e2e -run TestHelmTemplateGolden -update-chart and review the diff)", name, golden)
		}
		if name == "dashboards" {
			checkDashboardConfigMap(t, out)
			continue
		}
		if name == "mtls" || name == "all" || name == "platform" || name == "groupcert" {
			continue // the default is mTLS too; all, platform and groupcert have the default's bootstrap
		}
		for _, doc := range strings.Split(out, "\n---\n") {
			var obj struct {
				Kind string            `json:"kind"`
				Data map[string]string `json:"data"`
			}
			if yaml.Unmarshal([]byte(doc), &obj) != nil || obj.Kind != "ConfigMap" {
				continue
			}
			dir := t.TempDir()
			// The credentials the pod mounts from lbplane's Secret, here written into a directory of the test;
			// with cert-manager, its Secret (as a test issuer makes it from the chart's Certificate) and the
			// ConfigMap's SDS files, as the pod's projected volume holds them.
			var tlsDir string
			if name == "certmanager" {
				cert, ok := chartCertificates(t, out)["demo-lbplane-envoy-tls"]
				if !ok {
					t.Fatal("certmanager: no Certificate demo-lbplane-envoy-tls")
				}
				tlsDir, _ = certManagerEnvoyVolume(t, obj.Data, newTestIssuer(t).issue(t, cert))
			} else {
				tlsDir = writeTestCredentials(t, "default")
			}
			bootstrap := strings.ReplaceAll(obj.Data["envoy.yaml"], "/etc/envoy/tls", tlsDir)
			path := filepath.Join(dir, "envoy.yaml")
			os.WriteFile(path, []byte(bootstrap), 0o600)
			if err := envoyvalidate.CheckBootstrap(context.Background(), envoy, path); err != nil {
				t.Errorf("the chart's Envoy bootstrap: %v", err)
			}
		}
	}
}

// checkDashboardConfigMap finds the dashboards ConfigMap with the Grafana sidecar's label and a dashboard
// that is the JSON file under charts/lbplane/dashboards.
func checkDashboardConfigMap(t *testing.T, out string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "lbplane.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		}
		if yaml.Unmarshal([]byte(doc), &obj) != nil || obj.Kind != "ConfigMap" || obj.Data["lbplane.json"] == "" {
			continue
		}
		if obj.Metadata.Labels["grafana_dashboard"] != "1" {
			t.Errorf("dashboards ConfigMap labels: %v", obj.Metadata.Labels)
		}
		if obj.Data["lbplane.json"] != string(want) {
			t.Error("the ConfigMap's lbplane.json differs from charts/lbplane/dashboards/lbplane.json")
		}
		return
	}
	t.Error("no ConfigMap with lbplane.json when metrics.dashboards.enabled=true")
}

// TestHelmInstallAndLeastPrivilege installs the chart into a real API server and proves with
// kubectl auth can-i that lbplane's service account can do what it needs and nothing else.
func TestHelmInstallAndLeastPrivilege(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	out, err := helm(t, "install", "demo", chartDir, "-n", "lbplane", "--create-namespace", "--kubeconfig", c.Kubeconfig, "--set", "apiToken=t")
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	as := "system:serviceaccount:lbplane:demo-lbplane"
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"list", "loadbalancerpolicies.lbplane.io", "-A"}, true},
		{[]string{"watch", "loadbalancerpolicies.lbplane.io", "-A"}, true},
		{[]string{"update", "loadbalancerpolicies.lbplane.io", "--subresource=status", "-n", "shop"}, true},
		{[]string{"watch", "endpointslices.discovery.k8s.io", "-A"}, true},
		{[]string{"get", "services", "-n", "shop"}, true},
		{[]string{"list", "secrets", "-A"}, true},
		{[]string{"update", "leases.coordination.k8s.io", "-n", "lbplane"}, true},
		{[]string{"delete", "leases.coordination.k8s.io", "-n", "lbplane"}, true},
		{[]string{"create", "loadbalancerpolicies.lbplane.io", "-n", "shop"}, false},
		{[]string{"update", "loadbalancerpolicies.lbplane.io", "-n", "shop"}, false},
		{[]string{"delete", "secrets", "-n", "shop"}, false},
		// lbplane's own Secrets: created in its namespace, then read and renewed by name only.
		{[]string{"create", "secrets", "-n", "lbplane"}, true},
		{[]string{"update", "secrets/demo-lbplane-ca", "-n", "lbplane"}, true},
		// Per-pod identity (the chart's default) keeps no group certificate: lbplane may not write one.
		{[]string{"update", "secrets/demo-lbplane-envoy-tls", "-n", "lbplane"}, false},
		// The token Secret: lbplane adds the read-only token to the one the chart made from apiToken.
		{[]string{"update", "secrets/demo-lbplane-api-token", "-n", "lbplane"}, true},
		{[]string{"delete", "secrets/demo-lbplane-api-token", "-n", "lbplane"}, false},
		{[]string{"update", "secrets/other", "-n", "lbplane"}, false},
		{[]string{"delete", "secrets/demo-lbplane-ca", "-n", "lbplane"}, false},
		{[]string{"create", "secrets", "-n", "shop"}, false},
		{[]string{"update", "secrets", "-n", "shop"}, false},
		{[]string{"update", "services", "-n", "shop"}, false},
		{[]string{"create", "pods", "-n", "lbplane"}, false},
		{[]string{"update", "leases.coordination.k8s.io", "-n", "kube-system"}, false},
		{[]string{"list", "nodes"}, false},
		{[]string{"list", "configmaps", "-A"}, false},
		// Each replica's proxy report, a ConfigMap in lbplane's namespace only.
		{[]string{"create", "configmaps", "-n", "lbplane"}, true},
		{[]string{"update", "configmaps", "-n", "lbplane"}, true},
		{[]string{"delete", "configmaps", "-n", "lbplane"}, true},
		{[]string{"list", "configmaps", "-n", "lbplane"}, true},
		{[]string{"create", "configmaps", "-n", "shop"}, false},
		// The Envoy Service's ports that follow the policies (envoy.service.managedPorts): that Service only.
		{[]string{"patch", "services/demo-lbplane-envoy", "-n", "lbplane"}, true},
		{[]string{"get", "services/demo-lbplane-envoy", "-n", "lbplane"}, true},
		{[]string{"patch", "services/demo-lbplane-xds", "-n", "lbplane"}, false},
		{[]string{"patch", "services", "-n", "shop"}, false},
		{[]string{"create", "services", "-n", "lbplane"}, false},
		// Per-pod Envoy identity: review the pods' tokens, read the Envoy pods of its namespace only.
		{[]string{"create", "tokenreviews.authentication.k8s.io"}, true},
		{[]string{"get", "pods", "-n", "lbplane"}, true},
		{[]string{"get", "pods", "-n", "shop"}, false},
		{[]string{"list", "pods", "-n", "lbplane"}, false},
	} {
		got, _ := kubectl(t, c.Kubeconfig, "", append([]string{"auth", "can-i", "--as", as}, tc.args...)...)
		allowed := canIAnswer(got) == "yes"
		if allowed != tc.want {
			t.Errorf("can-i %v: %q, want allowed=%v", tc.args, strings.TrimSpace(got), tc.want)
		}
	}
	// The Envoy pods' service account proves who a pod is, and may do nothing in the API.
	for _, args := range [][]string{{"get", "pods", "-n", "lbplane"}, {"get", "secrets", "-n", "lbplane"}, {"create", "tokenreviews.authentication.k8s.io"}, {"get", "configmaps", "-n", "lbplane"}} {
		got, _ := kubectl(t, c.Kubeconfig, "", append([]string{"auth", "can-i", "--as", "system:serviceaccount:lbplane:demo-lbplane-envoy"}, args...)...)
		if canIAnswer(got) != "no" {
			t.Errorf("the Envoy service account: can-i %v: %q, want no", args, strings.TrimSpace(got))
		}
	}
}

// canIAnswer is kubectl auth can-i's answer, the last line of its output (a warning may come first: a
// cluster-scoped resource asked about with a namespace).
func canIAnswer(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// writeTestCredentials writes, into a new directory, what lbplane's group certificate Secret holds (a CA of
// the test's, and a group certificate from it), as the kubelet would mount it; it returns the directory.
func writeTestCredentials(t *testing.T, group string) string {
	t.Helper()
	ca, _, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	is, err := ca.IssueGroup(group, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tls")
	if err := envoybootstrap.WriteCredentials(dir, envoybootstrap.Credentials{Cert: is.CertPEM, Key: is.KeyPEM, CA: is.CAPEM}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHelmAlertsWithPromtool renders the chart's PrometheusRule and runs promtool's rule tests
// (charts/lbplane/testdata/alerts-test.yaml) against it: each alert fires on the recorded series of its
// failure (a rejected policy, a NACK, no Envoy, a killed backend's ejected endpoints, expiring certificates)
// and stays quiet on the healthy ones.
func TestHelmAlertsWithPromtool(t *testing.T) {
	t.Parallel()
	promtool := tools.Require(t, "promtool")
	rules := chartRules(t)
	dir := t.TempDir()
	tests, err := os.ReadFile(filepath.Join(chartDir, "testdata", "alerts-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"rules.yaml": rules, "alerts-test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	checkAlertsProvenAndDocumented(t, rules, tests)
	if out, err := exec.Command(promtool, "test", "rules", filepath.Join(dir, "alerts-test.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	} else {
		t.Logf("promtool test rules:\n%s", out)
	}
}

// chartRules renders the chart's PrometheusRule (release x, namespace default) with the given --set values
// and returns its groups as a Prometheus rule file.
func chartRules(t *testing.T, set ...string) []byte {
	t.Helper()
	args := []string{"template", "x", chartDir, "--kube-version", "1.37.1", "--set", "metrics.prometheusRule.enabled=true",
		"--show-only", "templates/prometheusrule.yaml"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out), &rule); err != nil || rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) == 0 {
		t.Fatalf("no PrometheusRule rendered (%v):\n%s", err, out)
	}
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// checkAlertsProvenAndDocumented fails for an alert that no promtool case expects to fire (its test would
// pass without it), and for one whose runbook_url is not its own section of docs/operations.md.
func checkAlertsProvenAndDocumented(t *testing.T, rules, tests []byte) {
	t.Helper()
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &tf); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, c := range tf.Tests {
		for _, a := range c.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			}
		}
	}
	docs, err := os.ReadFile(filepath.Join(tools.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue // a recording rule
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("%s: no case of alerts-test.yaml expects it to fire", r.Alert)
			}
			want := "https://github.com/lbplane/lbplane/blob/main/docs/operations.md#" + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !strings.Contains(string(docs), "\n### "+r.Alert+"\n") {
				t.Errorf("%s: docs/operations.md has no section \"### %s\" for its runbook_url", r.Alert, r.Alert)
			}
		}
	}
	if n < 14 {
		t.Errorf("only %d alerts in the rules", n)
	}
}
