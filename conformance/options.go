// Package conformance runs the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance) against
// lbplane on a Kubernetes cluster: `sudo make conformance` from the repository's root (docs/conformance.md).
//
// It is a module of its own: the suite pins Kubernetes libraries older than lbplane's, and it tests lbplane
// from the outside, through the cluster's API and the Gateways' addresses, so it needs none of lbplane's
// packages. This file holds lbplane's settings for the suite; conformance_test.go runs it.
package conformance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// GatewayClassName is the GatewayClass the chart creates with gatewayAPI.enabled=true.
const GatewayClassName = "lbplane"

// Implementation is what the report says about lbplane, but for the version (Version).
var Implementation = confv1.Implementation{
	Organization: "lbplane",
	Project:      "lbplane",
	URL:          "https://github.com/lbplane/lbplane",
	Contact:      []string{"https://github.com/lbplane/lbplane/issues/new"},
}

// Profile is the conformance profile run by default: HTTP on Gateways.
var Profile = suite.GatewayHTTPConformanceProfile

// Extended are the GATEWAY-HTTP profile's extended features lbplane supports, and the suite tests by
// default (docs/gateway-api.md says what each maps to; docs/conformance.md, which the last report passed).
var Extended = []features.FeatureName{
	features.SupportGatewayPort8080,
	features.SupportGatewayHTTPListenerIsolation,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteDestinationPortMatching,
	features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRouteNamedRouteRule,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRoute303RedirectStatusCode,
	features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode,
	features.SupportHTTPRouteRequestTimeout,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteRequestMirror,
	features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRoutePathRewrite,
}

// Defaults fills in lbplane's settings for what the command line left alone; explicit is true for the names
// of the flags given (the suite's own: -gateway-class, -conformance-profiles, -supported-features, ...), which
// always win.
//
// Without -supported-features, -exempt-features, -all-features or -run-test the suite would take the features
// to test from the GatewayClass's status; the default here is the profile's core features and Extended, the
// same on every run whatever the controller claims. -supported-features names others.
func Defaults(o *suite.ConfigurableOptions, explicit func(flag string) bool, version string) {
	if !explicit("gateway-class") {
		o.GatewayClassName = GatewayClassName
	}
	if !explicit("conformance-profiles") {
		o.ConformanceProfiles = []suite.ConformanceProfileName{Profile.Name}
	}
	if !explicit("supported-features") && !explicit("exempt-features") && !explicit("all-features") && !explicit("run-test") {
		o.SupportedFeatures = sets.List(Profile.CoreFeatures.Clone().Insert(Extended...))
	}
	if !explicit("organization") {
		o.Implementation.Organization = Implementation.Organization
	}
	if !explicit("project") {
		o.Implementation.Project = Implementation.Project
	}
	if !explicit("url") {
		o.Implementation.URL = Implementation.URL
	}
	if !explicit("contact") {
		o.Implementation.Contact = append([]string(nil), Implementation.Contact...)
	}
	if !explicit("version") {
		o.Implementation.Version = version
	}
}

var describeTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+`)

// Version is the implementation version the report gives: `git describe --tags --dirty` when the commit has a
// release tag behind it (v0.2.0, v0.2.0-3-g1a2b3c4), else the release in version/VERSION with the commit
// (v0.1.0-g1a2b3c4, -dirty with uncommitted changes), so that it is always a semantic version, as the
// upstream reports' rules ask.
func Version(describeTags, release, describeCommit string) string {
	if describeTag.MatchString(describeTags) {
		return describeTags
	}
	v := "v" + strings.TrimPrefix(strings.TrimSpace(release), "v")
	if describeCommit != "" {
		v += "-g" + describeCommit
	}
	return v
}

// ReportPath is where a report goes under dir, in the upstream layout: a folder per Gateway API version, a
// file named <API channel>-<implementation version>-<mode>-report.yaml.
func ReportPath(dir string, r confv1.ConformanceReport) string {
	clean := func(s string) string {
		s = strings.Map(func(c rune) rune {
			if c == '/' || c == '\\' || c == 0 {
				return '_'
			}
			return c
		}, s)
		if s == "." || s == ".." {
			return strings.Repeat("_", len(s))
		}
		return s
	}
	version, channel, mode := r.GatewayAPIVersion, r.GatewayAPIChannel, r.Mode
	if version == "" {
		version = "UNDEFINED"
	}
	if channel == "" {
		channel = "UNDEFINED"
	}
	if mode == "" {
		mode = "default"
	}
	return filepath.Join(dir, clean(version), fmt.Sprintf("%s-%s-%s-report.yaml", clean(channel), clean(r.Implementation.Version), clean(mode)))
}
