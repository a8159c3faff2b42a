package conformance

import (
	"path/filepath"
	"slices"
	"testing"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

func TestDefaults(t *testing.T) {
	none := func(string) bool { return false }

	var o suite.ConfigurableOptions
	Defaults(&o, none, "v0.1.0-g1234567")
	if o.GatewayClassName != "lbplane" {
		t.Errorf("gateway class %q, want lbplane", o.GatewayClassName)
	}
	if !slices.Equal(o.ConformanceProfiles, []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName}) {
		t.Errorf("profiles %v, want GATEWAY-HTTP", o.ConformanceProfiles)
	}
	// The three core features and lbplane's extended ones, so the suite never infers from the GatewayClass.
	want := append([]features.FeatureName{features.SupportGateway, features.SupportHTTPRoute, features.SupportReferenceGrant}, Extended...)
	got := slices.Clone(o.SupportedFeatures)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("supported features %v, want the core ones %v", got, want)
	}
	if err := o.Implementation.Validate(); err != nil {
		t.Errorf("implementation %+v: %v", o.Implementation, err)
	}
	if o.Implementation.Organization != "lbplane" || o.Implementation.Project != "lbplane" || o.Implementation.Version != "v0.1.0-g1234567" {
		t.Errorf("implementation %+v", o.Implementation)
	}
	o.Implementation.Contact[0] = "changed"
	if Implementation.Contact[0] == "changed" {
		t.Error("Defaults shares the Contact slice with Implementation")
	}

	// Flags given on the command line win.
	o = suite.ConfigurableOptions{
		GatewayClassName:    "other",
		ConformanceProfiles: []suite.ConformanceProfileName{suite.GatewayGRPCConformanceProfileName},
		SupportedFeatures:   []features.FeatureName{features.SupportHTTPRouteQueryParamMatching},
		Implementation:      confv1.Implementation{Version: "v9.9.9", Contact: []string{"me"}},
	}
	given := map[string]bool{"gateway-class": true, "conformance-profiles": true, "supported-features": true, "version": true, "contact": true}
	Defaults(&o, func(f string) bool { return given[f] }, "v0.1.0")
	if o.GatewayClassName != "other" || o.ConformanceProfiles[0] != suite.GatewayGRPCConformanceProfileName ||
		!slices.Equal(o.SupportedFeatures, []features.FeatureName{features.SupportHTTPRouteQueryParamMatching}) ||
		o.Implementation.Version != "v9.9.9" || !slices.Equal(o.Implementation.Contact, []string{"me"}) {
		t.Errorf("explicit flags overridden: %+v", o)
	}
	if o.Implementation.Organization != "lbplane" {
		t.Errorf("organization %q, want the default when -organization is not given", o.Implementation.Organization)
	}

	// -all-features, -exempt-features and -run-test leave the features to the suite.
	for _, f := range []string{"all-features", "exempt-features", "run-test"} {
		o = suite.ConfigurableOptions{}
		Defaults(&o, func(g string) bool { return g == f }, "v0.1.0")
		if o.SupportedFeatures != nil {
			t.Errorf("-%s: supported features set to %v", f, o.SupportedFeatures)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, c := range []struct{ tags, release, commit, want string }{
		{"v0.2.0", "0.2.0\n", "abc1234", "v0.2.0"},
		{"v0.2.0-3-gabc1234-dirty", "0.2.0", "abc1234-dirty", "v0.2.0-3-gabc1234-dirty"},
		{"", "0.1.0\n", "abc1234", "v0.1.0-gabc1234"},
		{"", "0.1.0", "abc1234-dirty", "v0.1.0-gabc1234-dirty"},
		{"", "v0.1.0", "", "v0.1.0"},
		{"nightly", "0.1.0", "abc1234", "v0.1.0-gabc1234"},
	} {
		if got := Version(c.tags, c.release, c.commit); got != c.want {
			t.Errorf("Version(%q, %q, %q) = %q, want %q", c.tags, c.release, c.commit, got, c.want)
		}
	}
}

func TestReportPath(t *testing.T) {
	r := confv1.ConformanceReport{GatewayAPIVersion: "v1.6.3", GatewayAPIChannel: "standard", Mode: "default",
		Implementation: confv1.Implementation{Version: "v0.1.0-gabc1234"}}
	if got, want := ReportPath("reports", r), filepath.Join("reports", "v1.6.3", "standard-v0.1.0-gabc1234-default-report.yaml"); got != want {
		t.Errorf("ReportPath = %q, want %q", got, want)
	}
	// What the cluster or the flags say cannot leave the folder.
	r = confv1.ConformanceReport{GatewayAPIVersion: "..", Implementation: confv1.Implementation{Version: "../../x"}}
	if got, want := ReportPath("reports", r), filepath.Join("reports", "__", "UNDEFINED-.._.._x-default-report.yaml"); got != want {
		t.Errorf("ReportPath = %q, want %q", got, want)
	}
}

// Every feature lbplane claims is one of the profile's extended features, claimed once: the report lists them
// under the profile, and a feature of another profile would not be tested there.
func TestExtendedAreTheProfiles(t *testing.T) {
	seen := map[features.FeatureName]bool{}
	for _, f := range Extended {
		if !Profile.ExtendedFeatures.Has(f) || seen[f] {
			t.Errorf("%s: not an extended feature of %s, or listed twice", f, Profile.Name)
		}
		seen[f] = true
	}
}

// Every feature lbplane claims is exercised by at least one of the suite's tests: a claim no test reaches
// would pass unseen in the report.
func TestEveryExtendedFeatureIsTested(t *testing.T) {
	tested := map[features.FeatureName]int{}
	for _, ct := range tests.ConformanceTests {
		for _, f := range ct.Features {
			tested[f]++
		}
	}
	for _, f := range Extended {
		if tested[f] == 0 {
			t.Errorf("%s: no test of the suite needs it", f)
		}
	}
}
