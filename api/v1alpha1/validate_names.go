package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The name checks are apimachinery's, so that a name lbplane accepts is one Kubernetes accepts too (a
// policy, Secret or Service name; a namespace) and the rules are not restated here.

// isDNSLabel: RFC 1123 label, at most 63 characters (namespaces, backend and route names).
func isDNSLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

// isDNSSubdomain: RFC 1123 subdomain, at most 253 characters (object names, host names without a wildcard).
func isDNSSubdomain(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }

// isHostname: a lowercase DNS name, optionally starting with "*." as Envoy's virtual-host domains allow.
func isHostname(s string) bool {
	if strings.HasPrefix(s, "*.") {
		return len(validation.IsWildcardDNS1123Subdomain(s)) == 0
	}
	return isDNSSubdomain(s)
}
