// Package v1alpha1 holds the LoadBalancerPolicy API (group lbplane.io, version v1alpha1).
//
// The same types serve the Kubernetes CRD and the standalone push API, so that one YAML document works on
// both paths.
//
// +kubebuilder:object:generate=true
// +groupName=lbplane.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	Group   = "lbplane.io"
	Version = "v1alpha1"
	Kind    = "LoadBalancerPolicy"
)

// AnnotationGateway names the Gateway ("namespace/name") a policy was made from: lbplane's Gateway API
// translator sets it on the policies it makes. Their Service backends share Envoy clusters: one per Service
// port and settings in a proxy group, however many routes and host names send to it.
const AnnotationGateway = "gateway.lbplane.io/gateway"

// APIVersion is the apiVersion every document must carry.
var APIVersion = Group + "/" + Version

// Duration fields carry a pattern: a string the schema lets through but Go cannot parse would make every
// lbplane replica fail to list policies, so one bad policy would freeze the updates of all the others.

// LoadBalancerPolicy describes one frontend (a listener) and the backends it balances over, as an nginx
// server + upstream or an HAProxy frontend + backend would.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lbp
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=".spec.listener.protocol"
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=".spec.listener.port"
// +kubebuilder:printcolumn:name="Algorithm",type=string,JSONPath=".status.algorithm"
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=".status.conditions[?(@.type==\"Accepted\")].status"
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=".status.conditions[?(@.type==\"Programmed\")].status"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type LoadBalancerPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LoadBalancerPolicySpec   `json:"spec"`
	Status LoadBalancerPolicyStatus `json:"status,omitempty"`
}

// LoadBalancerPolicyList is a list of policies.
//
// +kubebuilder:object:root=true
type LoadBalancerPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancerPolicy `json:"items"`
}

// LoadBalancerPolicySpec is what the user asks for.
type LoadBalancerPolicySpec struct {
	// proxyGroup selects the Envoys that serve this policy: those whose bootstrap node cluster equals it.
	// Defaults to "default".
	ProxyGroup string `json:"proxyGroup,omitempty"`

	// listener is the frontend: where Envoy accepts traffic.
	Listener Listener `json:"listener"`

	// routes (HTTP listeners only) send matching requests to weighted backends. Routes are tried in order; a
	// policy with no routes sends everything to all of its backends, equally weighted. No routes means one
	// route, prefix "/", to every backend with weight 1.
	// +kubebuilder:validation:MaxItems=1000
	Routes []Route `json:"routes,omitempty"`

	// backends are named sets of endpoints and how to balance over them.
	// +kubebuilder:validation:MaxItems=100
	Backends []Backend `json:"backends"`

	// debugHeaders (HTTP listeners) adds the x-lbplane-upstream response header, the address:port of the
	// endpoint that served the request, to every response of the policy's routes. lbctl trace --live reads it
	// to compare Envoy's pick with its offline answer. Off by default: it tells clients your endpoints'
	// addresses. HTTP and HTTPS only.
	DebugHeaders bool `json:"debugHeaders,omitempty"`

	// rollout makes a change of this policy reach the group's Envoys in stages, each judged on the Envoys'
	// own numbers and rolled back on a breach (docs/rollouts.md). Unset: a change reaches every Envoy at
	// once, unless the push asks for stages (lbctl push-config --rollout staged) or the server makes every
	// change staged (lbplane serve --rollout-default staged).
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// UpstreamHostHeader is the response header debugHeaders adds.
const UpstreamHostHeader = "x-lbplane-upstream"
