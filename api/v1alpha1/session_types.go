// Sessions: a client kept on one endpoint, and what happens to its session when that endpoint drains.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SessionPersistenceType says where the session lives.
// +kubebuilder:validation:Enum=Cookie;Header
// +kubebuilder:validation:MaxLength=32
type SessionPersistenceType string

const (
	SessionCookie SessionPersistenceType = "Cookie"
	SessionHeader SessionPersistenceType = "Header"
)

// SessionPersistence pins a client to an endpoint with Envoy's stateful session filter: the endpoint is
// recorded in a cookie or header that the client sends back. A client without one, or whose endpoint is
// gone, is balanced as usual (and by the backend's hash keys when it hashes).
type SessionPersistence struct {
	// type is Cookie or Header. Defaults to Cookie.
	Type SessionPersistenceType `json:"type,omitempty"`
	// name of the cookie or header. Defaults to "lbplane-session".
	Name string `json:"name,omitempty"`
	// ttl of the cookie; unset makes a session cookie. Envoy's session states have an absolute TTL only, no
	// idle timeout (Gateway API's idleTimeout has no equivalent).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// path of the cookie. Defaults to "/".
	Path string `json:"path,omitempty"`
	// acrossBackends also keeps a client on the same backend of a weighted route, while new clients are still
	// spread by the weights. The route's backends are served as one Envoy cluster (each endpoint weighted by
	// its backend's share) with the first backend's load-balancing, health and connection settings, because
	// Envoy can pin a session only within the cluster its router picked.
	AcrossBackends bool `json:"acrossBackends,omitempty"`
}

// DrainingSessions says what happens to the sessions of a draining endpoint.
// +kubebuilder:validation:Enum=Keep;Move
// +kubebuilder:validation:MaxLength=32
type DrainingSessions string

const (
	DrainingSessionsKeep DrainingSessions = "Keep"
	DrainingSessionsMove DrainingSessions = "Move"
)
