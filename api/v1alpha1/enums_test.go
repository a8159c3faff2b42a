package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func strs[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// TestEnumMarkersMatchValidation: the values the API server accepts (each type's kubebuilder Enum marker,
// which becomes the CRD's enum) are exactly the values Validate accepts (its supported* list), in the same
// order, for every enum type of the API's files. A value added to one and not the other fails here, not in a
// cluster where kubectl apply and lbctl push-config would disagree.
func TestEnumMarkersMatchValidation(t *testing.T) {
	supported := map[string][]string{
		"Protocol":               strs(supportedProtocols),
		"HeadersWithUnderscores": strs(supportedUnderscores),
		"EscapedSlashes":         strs(supportedEscapedSlashes),
		"TLSVersion":             strs(supportedTLSVersions),
		"RetryOn":                strs(supportedRetryOn),
		"SessionPersistenceType": strs(supportedSessionTypes),
		"DrainingSessions":       strs(supportedDrainingSessions),
		"PathMatchType":          strs(supportedPathTypes),
		"HeaderMatchType":        strs(supportedHeaderType),
		"QueryParamMatchType":    strs(supportedQueryTypes),
		"RedirectPathType":       strs(supportedRedirectPath),
		"UpstreamProtocol":       strs(supportedUpstreamProtocols),
		"HealthCheckType":        strs(supportedHealthTypes),
		"EndpointState":          strs(supportedEndpointStates),
		"Algorithm":              strs(supportedAlgorithms),
		"SameSite":               strs(supportedSameSite),
		"ProxyProtocolVersion":   strs(supportedProxyProtocolVersions),
		"DNSResolution":          strs(supportedDNSResolutions),
		"DNSLookupFamily":        strs(supportedDNSLookupFamilies),
		"AccessLogFormat":        strs(supportedAccessLogFormats),
		"DNSResolver":            strs(supportedDNSResolvers),
		// Written by lbplane into status, never validated from users: its values are its constants.
		"EndpointHealth": strs([]EndpointHealth{EndpointHealthy, EndpointEjected, EndpointUnknown}),
		// EndpointOverride.Validate accepts its constants, in a switch.
		"EndpointOverrideState": strs([]EndpointOverrideState{OverrideDraining, OverrideMaintenance}),
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	markers := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE || g.Doc == nil {
				continue
			}
			for _, c := range g.Doc.List {
				if v, ok := strings.CutPrefix(c.Text, "// +kubebuilder:validation:Enum="); ok {
					markers[g.Specs[0].(*ast.TypeSpec).Name.Name] = strings.Split(v, ";")
				}
			}
		}
	}
	if len(markers) == 0 {
		t.Fatal("no Enum markers found in the API's files")
	}
	for typ, values := range markers {
		want, ok := supported[typ]
		if !ok {
			t.Errorf("%s has an Enum marker but no supported list in this test: add its validate.go list", typ)
			continue
		}
		if !slices.Equal(values, want) {
			t.Errorf("%s: the Enum marker says %v, Validate accepts %v", typ, values, want)
		}
	}
	for typ := range supported {
		if _, ok := markers[typ]; !ok {
			t.Errorf("%s has a supported list but no Enum marker", typ)
		}
	}
}
