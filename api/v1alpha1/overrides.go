package v1alpha1

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndpointOverride is an operator's override of an endpoint's state, as HAProxy's runtime API's "set server
// state drain|maint|ready": set with lbctl endpoint drain|maintenance or the dashboard (admin token), kept by
// lbplane beside the policy rather than in its spec, so that it outlives pushes of the policy and restarts,
// until lbctl endpoint ready removes it. It composes with the spec's endpoint state: the stronger of the two
// applies (Active, then Draining, then Maintenance).
type EndpointOverride struct {
	// backend is the spec backend (spec.backends[].name) it applies to; empty: every backend of the policy
	// that has the endpoint.
	// +kubebuilder:validation:MaxLength=63
	Backend string `json:"backend,omitempty"`
	// endpoint is "address:port", or an address alone for every port of it ("[v6]:port" for IPv6). The
	// address is an IP address Envoy connects to, or a host name a static endpoint names (then every address
	// lbplane resolves it to).
	// +kubebuilder:validation:MaxLength=261
	Endpoint string `json:"endpoint"`
	// state is Draining (Envoy: LbEndpoint.health_status DRAINING; no new requests are sent to it, requests
	// and connections under way carry on) or Maintenance (left out of Envoy's load assignment: no traffic at
	// all, not even in panic mode, and no health checks; requests under way finish).
	State EndpointOverrideState `json:"state"`
	// since is when the override was set.
	Since metav1.Time `json:"since"`
}

// EndpointOverrideState is the state an EndpointOverride sets.
// +kubebuilder:validation:Enum=Draining;Maintenance
type EndpointOverrideState string

// Values of EndpointOverrideState.
const (
	OverrideDraining    EndpointOverrideState = "Draining"
	OverrideMaintenance EndpointOverrideState = "Maintenance"
)

// EndpointOverrideStatus is an override in force on the policy (status.endpointOverrides).
type EndpointOverrideStatus struct {
	EndpointOverride `json:",inline"`
	// endpoints counts the policy's endpoints it applies to now; 0 when none matches (an endpoint the spec no
	// longer has): the override stays until lbctl endpoint ready removes it, and applies again if the
	// endpoint comes back.
	Endpoints int32 `json:"endpoints"`
}

// MaxEndpointOverrides bounds the overrides one policy may hold.
const MaxEndpointOverrides = 256

// SplitEndpoint splits an override's endpoint into its host and port (0 for every port of the host).
func SplitEndpoint(endpoint string) (host string, port int32, err error) {
	if endpoint == "" {
		return "", 0, fmt.Errorf("endpoint: required, as ADDRESS or ADDRESS:PORT")
	}
	if len(endpoint) > 261 {
		return "", 0, fmt.Errorf("endpoint: longer than 261 characters")
	}
	if net.ParseIP(strings.Trim(endpoint, "[]")) != nil {
		return strings.Trim(endpoint, "[]"), 0, nil
	}
	h, p, err := net.SplitHostPort(endpoint)
	if err != nil {
		if strings.Count(endpoint, ":") == 0 && validHostName(endpoint) {
			return strings.ToLower(endpoint), 0, nil
		}
		return "", 0, fmt.Errorf("endpoint: %q is not ADDRESS or ADDRESS:PORT", endpoint)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("endpoint: port %q is not a number from 1 to 65535", p)
	}
	if net.ParseIP(h) == nil && !validHostName(h) {
		return "", 0, fmt.Errorf("endpoint: %q is neither an IP address nor a host name", h)
	}
	return strings.ToLower(h), int32(n), nil
}

// validHostName tells whether s is a DNS name a static endpoint could name.
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Validate checks an override's fields, naming the field and the reason.
func (o *EndpointOverride) Validate() error {
	switch o.State {
	case OverrideDraining, OverrideMaintenance:
	default:
		return fmt.Errorf("state: unsupported value %q; supported: %s, %s", o.State, OverrideDraining, OverrideMaintenance)
	}
	if len(o.Backend) > 63 {
		return fmt.Errorf("backend: longer than 63 characters")
	}
	_, _, err := SplitEndpoint(o.Endpoint)
	return err
}
