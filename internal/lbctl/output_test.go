package lbctl_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/internal/lbctl"
	"github.com/lbplane/lbplane/internal/tools"
)

// apiServer is the push API in this process, with a store of its own; it returns its URL.
func apiServer(t *testing.T) string {
	t.Helper()
	_, url, _ := pushapitest.Start(t, "admin", nil)
	return url
}

const shopPolicy = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: cart, namespace: shop}
spec:
  proxyGroup: edge
  listener: {port: 10090, protocol: HTTP, hostnames: [cart.example.com]}
  backends:
    - name: carts
      loadBalancing: {algorithm: LeastRequest}
      endpoints: [{address: 127.0.0.1, port: 9001}, {address: 127.0.0.1, port: 9002}]
`

// volatile is what differs from run to run in the output: times, UIDs and the Go version.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\b[0-9a-f]{32}\b`), "<uid>"},
	{regexp.MustCompile(`go1\.[0-9.a-z]+`), "<go>"},
}

func normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// TestOutputGolden runs each command with each -o format against a push API holding two policies, and
// compares the output with testdata/output/<case>.txt (regenerate with -update and review the diff). Every
// command that prints an answer takes the same formats.
func TestOutputGolden(t *testing.T) {
	url := apiServer(t)
	root := tools.RepoRoot()
	t.Chdir(root)
	c := &pushclient.Client{BaseURL: url, Token: "admin"}
	demo, err := os.ReadFile("examples/round-robin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// One push: both policies are created in the same second, so both are five minutes old below.
	if _, err := c.Apply(context.Background(), []byte(shopPolicy+"\n---\n"+string(demo)), false); err != nil {
		t.Fatal(err)
	}
	ps, err := c.List(context.Background())
	if err != nil || len(ps) != 2 {
		t.Fatalf("%d policies, %v", len(ps), err)
	}
	// Ages are five minutes, whenever the test runs.
	defer lbctl.SetNow(ps[0].CreationTimestamp.Add(5*60e9 + 1))()

	diffDir := filepath.Join("internal", "lbctl", "testdata", "diff", "algorithm")
	jp := "-o=jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.listener.port}{\"\\n\"}{end}"
	cases := map[string][]string{
		"get-table":            {"get"},
		"get-wide":             {"get", "-o", "wide"},
		"get-all-table":        {"get", "-A"},
		"get-all-wide":         {"get", "-A", "-o", "wide"},
		"get-json":             {"get", "-A", "-o", "json"},
		"get-yaml":             {"get", "-A", "-o", "yaml"},
		"get-name":             {"get", "-A", "-o", "name"},
		"get-jsonpath":         {"get", "-A", jp},
		"get-one-yaml":         {"get", "cart", "-n", "shop", "-o", "yaml"},
		"get-one-name":         {"get", "demo", "-o", "name"},
		"status-table":         {"status"},
		"status-json":          {"status", "-o", "json"},
		"status-policy-table":  {"status", "demo"},
		"status-policy-json":   {"status", "demo", "-o", "json"},
		"status-policy-yaml":   {"status", "demo", "-o", "yaml"},
		"status-policy-name":   {"status", "demo", "-o", "name"},
		"explain-table":        {"explain", "demo"},
		"explain-name":         {"explain", "demo", "-o", "name"},
		"explain-jsonpath":     {"explain", "demo", "-o", "jsonpath={.policy} {.proxyGroup} {.resources[*].name}"},
		"apply-table":          {"apply", "--dry-run", "-f", "examples/least-request.yaml"},
		"apply-json":           {"apply", "--dry-run", "-f", "examples/least-request.yaml", "-o", "json"},
		"apply-yaml":           {"apply", "--dry-run", "-f", "examples/least-request.yaml", "-o", "yaml"},
		"apply-name":           {"apply", "--dry-run", "-f", "examples/least-request.yaml", "-o", "name"},
		"push-config-table":    {"push-config", "--dry-run", "-f", "examples/least-request.yaml"},
		"diff-table":           {"diff", "--from", filepath.Join(diffDir, "old.yaml"), "-f", filepath.Join(diffDir, "new.yaml")},
		"diff-json":            {"diff", "--from", filepath.Join(diffDir, "old.yaml"), "-f", filepath.Join(diffDir, "new.yaml"), "-o", "json"},
		"diff-yaml":            {"diff", "--from", filepath.Join(diffDir, "old.yaml"), "-f", filepath.Join(diffDir, "new.yaml"), "-o", "yaml"},
		"diff-name":            {"diff", "--from", filepath.Join(diffDir, "old.yaml"), "-f", filepath.Join(diffDir, "new.yaml"), "-o", "name"},
		"translate-table":      {"translate", "-f", "examples/round-robin.yaml", "-o", "table"},
		"translate-name":       {"translate", "-f", "examples/round-robin.yaml", "-o", "name"},
		"translate-jsonpath":   {"translate", "-f", "examples/round-robin.yaml", "-o", "jsonpath={.default['type\\.googleapis\\.com/envoy\\.config\\.cluster\\.v3\\.Cluster'][*].name}"},
		"version-client-table": {"version", "--client"},
		"trace-table":          {"trace", "demo", "-f", "examples/round-robin.yaml", "--path", "/a"},
		"trace-yaml":           {"trace", "demo", "-f", "examples/round-robin.yaml", "--path", "/a", "-o", "yaml"},
		"trace-name":           {"trace", "demo", "-f", "examples/round-robin.yaml", "-o", "name"},
		"whatif-table":         {"whatif", "demo", "-f", "examples/round-robin.yaml", "--down", "endpoint=127.0.0.1:18081"},
		"whatif-json":          {"whatif", "demo", "-f", "examples/round-robin.yaml", "--down", "endpoint=127.0.0.1:18081", "-o", "json"},
		"version-json":         {"version", "-o", "json"},
		"version-yaml":         {"version", "-o", "yaml"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errs := run(t, "", append([]string{"--server", url, "--token", "admin"}, args...)...)
			want := 0
			if strings.HasPrefix(name, "diff-") {
				want = 1 // diff(1): something differs
			}
			if code != want {
				t.Fatalf("exit %d, want %d: %s", code, want, errs)
			}
			if errs != "" {
				out += "--- stderr\n" + errs
			}
			if out == "" {
				t.Fatal("no output")
			}
			got := normalize(out)
			golden := filepath.Join(root, "internal", "lbctl", "testdata", "output", name+".txt")
			if *updateDiff {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != got {
				t.Errorf("lbctl %s: output differs from %s (go test ./internal/lbctl -run TestOutputGolden -update):\n%s", strings.Join(args, " "), golden, got)
			}
		})
	}
	// status NAME prints the policy as get NAME does, so that a jsonpath copied from one works on the other.
	for _, f := range []string{"json", "yaml", "jsonpath={.metadata.name} {.status.conditions[*].type}"} {
		_, get, _ := run(t, "", "--server", url, "--token", "admin", "get", "demo", "-o", f)
		_, status, _ := run(t, "", "--server", url, "--token", "admin", "status", "demo", "-o", f)
		if get == "" || get != status {
			t.Errorf("-o %s: status demo printed\n%s\nget demo\n%s", f, status, get)
		}
	}
}

// An unknown format fails before anything is asked, with the formats there are, for every command.
func TestOutputRefusesUnknownFormats(t *testing.T) {
	for _, args := range [][]string{{"get"}, {"status"}, {"explain", "x"}, {"apply", "-f", "x.yaml"}, {"delete", "x"}, {"version"}, {"translate", "-f", "x.yaml"}, {"diff", "-f", "x.yaml"}} {
		code, out, errs := run(t, "", append(args, "--server", "http://127.0.0.1:1", "--token", "t", "-o", "xml")...)
		if code == 0 || out != "" || !strings.Contains(errs, `--output: unsupported value "xml"; supported: table, wide, json, yaml, name, jsonpath=...,`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}
