package apiwire

import "github.com/lbplane/lbplane/api/v1alpha1"

// StateReady is the state of an EndpointStateRequest that removes an override: the endpoint is as its spec
// says again.
const StateReady = "Ready"

// EndpointStateRequest is the body of POST /v1/policies/{namespace}/{name}/endpoint-state (admin token):
// set an endpoint's state as HAProxy's "set server state" does. State is Draining, Maintenance or Ready.
type EndpointStateRequest struct {
	// Endpoint is "address:port", or an address alone for every port of it.
	Endpoint string `json:"endpoint"`
	// Backend limits it to one backend of the policy; empty: every backend that has the endpoint.
	Backend string `json:"backend,omitempty"`
	State   string `json:"state"`
}

// EndpointStateResult answers an EndpointStateRequest: the policy's overrides after it, how many endpoints
// the request applies to now, and, for a Ready, the ones the spec itself drains (a Ready does not undo the
// spec).
type EndpointStateResult struct {
	Policy string `json:"policy"`
	// Changed is false when the endpoint was in that state already.
	Changed bool `json:"changed"`
	// Endpoints counts the policy's endpoints the request names.
	Endpoints int32 `json:"endpoints"`
	// SpecDraining lists the endpoints the request names that the spec drains (state: Draining) or that
	// Kubernetes terminates: they stay Draining after a Ready.
	SpecDraining []string `json:"specDraining,omitempty"`
	// Overrides are the policy's overrides in force after the request.
	Overrides []v1alpha1.EndpointOverrideStatus `json:"overrides"`
	// Lagging and LaggingTotal name the Envoys of the policy's group that had not taken the change when the
	// answer was sent (see ApplyResult).
	Lagging      []string `json:"lagging,omitempty"`
	LaggingTotal int      `json:"laggingTotal,omitempty"`
}

// PolicyOverrides are one policy's overrides (GET /v1/endpoint-overrides).
type PolicyOverrides struct {
	Namespace string                            `json:"namespace"`
	Name      string                            `json:"name"`
	Overrides []v1alpha1.EndpointOverrideStatus `json:"overrides"`
}
