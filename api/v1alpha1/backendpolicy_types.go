// BackendLoadBalancerPolicy: lbplane's load balancing for the Services that Gateway API routes send to.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// BackendLoadBalancerPolicy says how Envoy balances over a Service and connects to its endpoints when a
// Gateway API route (an HTTPRoute's backendRefs) sends to it: the algorithm and hashing, health checks,
// outlier detection, slow start, zones, circuit breakers, connections and upstream TLS that a
// LoadBalancerPolicy backend says. It is a direct policy attached to the Service, as Gateway API's policy
// attachment (GEP-713) describes: it lives in the Service's namespace and names the Service in targetRefs.
// Every route of every Gateway that sends to the Service uses it. A LoadBalancerPolicy that names the
// Service in its own backends is not affected: it says its own.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=blbp
// +kubebuilder:printcolumn:name="Algorithm",type=string,JSONPath=".spec.backend.loadBalancing.algorithm"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type BackendLoadBalancerPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackendLoadBalancerPolicySpec `json:"spec"`
	// status has an entry per Gateway whose routes send to a target Service: whether the policy is applied
	// there (Accepted), as Gateway API's policy status (ancestors) says; and each target Service port's
	// endpoints as the Envoys see them (backends).
	Status BackendLoadBalancerPolicyStatus `json:"status,omitempty"`
}

// BackendLoadBalancerPolicyStatus is Gateway API's policy status, and what the Envoys report of the Services
// the policy applies to.
type BackendLoadBalancerPolicyStatus struct {
	gwv1.PolicyStatus `json:",inline"`
	// backends has an entry per target Service port that a Gateway's route sends to, where the policy
	// applies: named "<service>:<port>", with its endpoints' health and load as the Envoys report them, as
	// a LoadBalancerPolicy's status.backends says of its backends. Every route of the Gateways' proxy group
	// that sends to the port shares its one Envoy cluster, so this is every route's view of it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Backends []BackendStatus `json:"backends,omitempty"`
}

// BackendLoadBalancerPolicySpec names the Services and says how to balance over them.
type BackendLoadBalancerPolicySpec struct {
	// targetRefs are what the policy applies to, in the policy's namespace: Services (group "", kind
	// Service), whose sectionName names one port (the port's name; without it, every port); and HTTPRoutes
	// (group gateway.networking.k8s.io, kind HTTPRoute), whose sectionName names one rule (the rule's name;
	// without it, every rule). A route's rule sends to its Services with the settings of the policy that
	// targets the rule, or else its route, whatever policy targets the Services: its backends then have an
	// Envoy cluster of their own. When two policies target one Service port or one rule, one with a
	// sectionName wins over one without; otherwise the older wins (then the first by name), and the other is
	// Conflicted there.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	TargetRefs []gwv1.LocalPolicyTargetReferenceWithSectionName `json:"targetRefs"`
	// backend is how Envoy balances over the target Services' endpoints and connects to them: the fields of
	// a LoadBalancerPolicy backend (spec.backends[]) other than its name, endpoints, service and dns. A
	// client certificate (tls.clientCertificate) is not supported here: its Secret would be read in the
	// Gateway's namespace, not the Service's.
	// +kubebuilder:default={}
	Backend BackendSettings `json:"backend,omitempty"`
	// sessionPersistence keeps each client on one endpoint (a cookie or header that names it) on the routes
	// of the HTTPRoutes and rules the policy targets, as a LoadBalancerPolicy route's sessionPersistence
	// does: a draining endpoint, a terminating pod's included, keeps its sessions and gets no new client
	// (backend.drainingSessions: Move moves them). A session is a route's, so a policy with it targets
	// HTTPRoutes only.
	// +optional
	SessionPersistence *SessionPersistence `json:"sessionPersistence,omitempty"`
}

// BackendLoadBalancerPolicyList is a list of BackendLoadBalancerPolicies.
//
// +kubebuilder:object:root=true
type BackendLoadBalancerPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackendLoadBalancerPolicy `json:"items"`
}
