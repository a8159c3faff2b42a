//go:build conformance

package conformance

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/yaml"
)

// reports is the folder the report is written under when -report-output is not given (ReportPath).
var reports = flag.String("reports-dir", "reports", "folder for the report, in the upstream layout <Gateway API version>/<channel>-<version>-<mode>-report.yaml (-report-output writes one file instead)")

// TestGatewayAPIConformance runs the Gateway API conformance suite on the cluster KUBECONFIG names, where
// lbplane's chart is installed with gatewayAPI.enabled=true: the GATEWAY-HTTP profile's core tests unless
// flags say otherwise (Defaults), base resources cleaned up afterwards, and the report written in the
// upstream format. `sudo make conformance` prepares the cluster and runs it (docs/conformance.md).
func TestGatewayAPIConformance(t *testing.T) {
	if f := flag.Lookup(config.KubeconfigFlagName); os.Getenv("KUBECONFIG") == "" && (f == nil || f.Value.String() == "") {
		t.Fatal("KUBECONFIG is not set: this test runs the suite on a cluster with lbplane installed; " +
			"`sudo make conformance` brings up the one-node cluster (make cluster), installs the Gateway API CRDs and the chart, and runs it")
	}
	explicit := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	opts := conformance.DefaultOptions(t)
	Defaults(&opts.ConfigurableOptions, func(name string) bool { return explicit[name] }, gitVersion(t))
	if err := opts.Implementation.Validate(); err != nil {
		t.Fatalf("the report's implementation details: %v", err)
	}
	t.Logf("GatewayClass %s, profiles %v, supported features %v, implementation %+v",
		opts.GatewayClassName, opts.ConformanceProfiles, opts.SupportedFeatures, opts.Implementation)

	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatalf("the conformance suite: %v", err)
	}
	ran := false
	t.Cleanup(func() {
		if !ran {
			return // Setup failed: there are no results to report.
		}
		report, err := cSuite.Report()
		if err != nil {
			t.Errorf("the conformance report: %v", err)
			return
		}
		out := opts.ReportOutputPath
		if out == "" {
			out = ReportPath(*reports, *report)
		}
		b, err := yaml.Marshal(report)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(out), 0o755)
		}
		if err == nil {
			err = os.WriteFile(out, b, 0o644)
		}
		if err != nil {
			t.Errorf("writing the conformance report: %v", err)
			return
		}
		t.Logf("conformance report written to %s:\n%s", out, b)
	})
	cSuite.Setup(t, tests.ConformanceTests)
	ran = true
	claimedIsTested(t, opts.Client, opts.GatewayClassName)
	if err := cSuite.Run(t, tests.ConformanceTests); err != nil {
		t.Fatalf("the conformance suite: %v", err)
	}
}

// claimedIsTested checks that what lbplane's GatewayClass claims in status.supportedFeatures (lbplane's
// gatewayapi.Features) is what the suite tests by default: the profile's core features and Extended.
func claimedIsTested(t *testing.T, c client.Client, class string) {
	t.Helper()
	var gc gwv1.GatewayClass
	if err := c.Get(context.Background(), client.ObjectKey{Name: class}, &gc); err != nil {
		t.Fatalf("reading GatewayClass %s: %v", class, err)
	}
	var claimed []string
	for _, f := range gc.Status.SupportedFeatures {
		claimed = append(claimed, string(f.Name))
	}
	var tested []string
	for _, f := range Profile.CoreFeatures.Clone().Insert(Extended...).UnsortedList() {
		tested = append(tested, string(f))
	}
	slices.Sort(claimed)
	slices.Sort(tested)
	if !slices.Equal(claimed, tested) {
		t.Errorf("GatewayClass %s claims %v in status.supportedFeatures, the suite tests %v: lbplane's gatewayapi.Features and this module's Extended must say the same", class, claimed, tested)
	}
}

// gitVersion is Version from this checkout's git and version/VERSION.
func gitVersion(t *testing.T) string {
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	release, err := os.ReadFile(filepath.Join("..", "version", "VERSION"))
	if err != nil {
		t.Fatalf("the implementation version (give -version to set it): %v", err)
	}
	return Version(git("describe", "--tags", "--dirty", "--match", "v[0-9]*"), string(release), git("describe", "--always", "--dirty"))
}
