// Package apiwire holds what lbplane's push API sends and receives: push outcomes, errors, proxy sync states,
// diffs, certificates and versions. It imports nothing of the server, so a client (lbctl, a dashboard, a
// script) can decode answers without linking the store, the xDS server or Prometheus.
package apiwire

import (
	"cmp"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// Outcome of one policy in a push.
const (
	Created    = "created"
	Configured = "configured"
	Unchanged  = "unchanged"
	Deleted    = "deleted"
)

// ApplyResult answers a push.
type ApplyResult struct {
	Policies []AppliedPolicy `json:"policies"`
	DryRun   bool            `json:"dryRun,omitempty"`
	// Lagging are the Envoys (node ids) of the proxy groups the push changed that had not taken the change
	// (been given it and answered it) when the reply was sent, at most lbplane's --push-wait after the
	// change was published. They get it as they answer; no other Envoy waits for them.
	Lagging []string `json:"lagging,omitempty"`
	// LaggingTotal counts them: Lagging names the first MaxLagging, sorted.
	LaggingTotal int `json:"laggingTotal,omitempty"`
}

// MaxLagging bounds the node ids a push's reply names.
const MaxLagging = 100

// AppliedPolicy is one policy of a push.
type AppliedPolicy struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Outcome    string `json:"outcome"`
	Generation int64  `json:"generation"`
	// Warnings are lint findings: the policy is accepted, but probably does not do what is meant.
	Warnings []string `json:"warnings,omitempty"`
}

// ErrorBody is the body of every failed call.
type ErrorBody struct {
	Errors []string `json:"errors"`
}

// Sync states of a proxy.
const (
	Synced = "SYNCED" // acknowledged everything it was sent, and was sent the current config
	Stale  = "STALE"  // has not acknowledged the current config yet
	Nacked = "NACKED" // rejected the last response of some type
)

// TypeStatus is what one stream knows of one resource type.
type TypeStatus struct {
	TypeURL      string    `json:"typeUrl"`
	SentVersion  string    `json:"sentVersion"`
	AckedVersion string    `json:"ackedVersion,omitempty"`
	Nacked       bool      `json:"nacked,omitempty"`
	NackMessage  string    `json:"nackMessage,omitempty"`
	NackedAt     time.Time `json:"nackedAt,omitzero"`
	// NackedResources are the resources the NACK is put on: those the rejected response carried that the
	// proxy did not hold already, narrowed to the ones Envoy's message names when it names some. Empty
	// when that is unknown (or too many to list).
	NackedResources []string `json:"nackedResources,omitempty"`
	// NackedPolicies are the policies NackedResources came from, by the IR's sources, sorted.
	NackedPolicies []PolicyRef `json:"nackedPolicies,omitempty"`
	// Pending is true while the last response is neither acknowledged nor rejected.
	Pending bool `json:"pending,omitempty"`
}

// ProxyStatus describes one connected Envoy (one ADS stream).
type ProxyStatus struct {
	NodeID      string    `json:"nodeId"`
	Group       string    `json:"group"`
	API         string    `json:"api"` // "sotw" or "delta"
	ConnectedAt time.Time `json:"connectedAt"`
	State       string    `json:"state"`
	Version     string    `json:"version"` // the config version it last acknowledged
	// AckedAt is when it last acknowledged a response (of any type): while Version is a config's and
	// State not STALE, no later than when it had taken all of that config.
	AckedAt time.Time `json:"ackedAt,omitzero"`
	Current string    `json:"currentVersion"`
	Message string    `json:"message,omitempty"`
	// Address is the IP the Envoy connects from; StatsPort, from its node metadata (lbctl bootstrap
	// --stats-port), is where it serves stats and endpoint health there.
	Address   string `json:"address,omitempty"`
	StatsPort int    `json:"statsPort,omitempty"`
	// Zone is the Envoy's zone (node.locality.zone, lbctl bootstrap --zone): predictions of zone-aware
	// backends are for the Envoys' zones.
	Zone string `json:"zone,omitempty"`
	// Client is what kind of xDS client the node is: "envoy", or "grpc" for a proxyless gRPC client (told
	// apart by its user agent or its lbplane.io/client metadata), which is served the group's gRPC profile;
	// UserAgent is the node's user agent name and version ("envoy 1.40.0", "gRPC Go 1.85.0").
	Client    string `json:"client,omitempty"`
	UserAgent string `json:"userAgent,omitempty"`
	// Authenticated is true when the stream came over mTLS and its node id and group match its client
	// certificate. Only authenticated proxies are read by the stats poller and, when mTLS is required,
	// counted by settle waits.
	Authenticated bool `json:"authenticated"`
	// Unresponsive is true when a response has gone unanswered for longer than the tracker's AckTimeout: the
	// proxy is shown STALE and left out of settle waits until it answers, so it cannot hold a change back.
	Unresponsive bool `json:"unresponsive,omitempty"`
	// Responses counts the responses sent on the stream.
	Responses int64        `json:"responses"`
	Types     []TypeStatus `json:"types"`
}

// Change operations of a diff.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Change is one Envoy resource that differs.
type Change struct {
	Group string `json:"group"`
	// Type is the short type name: Cluster, ClusterLoadAssignment, Listener, RouteConfiguration, Secret.
	Type   string        `json:"type"`
	Name   string        `json:"name"`
	Op     string        `json:"op"`
	Fields []FieldChange `json:"fields,omitempty"`
}

// FieldChange is one leaf that differs; Old or New is empty when the field is absent on that side.
// Values are JSON.
type FieldChange struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// DiffResult answers POST /v1/diff.
type DiffResult struct {
	Policies []AppliedPolicy `json:"policies"`
	Changes  []Change        `json:"changes"`
}

// CertRequest asks for an Envoy's client certificate.
type CertRequest struct {
	NodeID     string `json:"nodeId"`
	ProxyGroup string `json:"proxyGroup"`
}

// Revocation cuts off a stolen or retired Envoy identity before its certificate expires (lbctl revoke): its
// xDS connections are closed at once and it cannot reconnect until every certificate it covers has expired.
type Revocation struct {
	// NodeID revokes every client certificate of this node id valid from before At: node certificates with
	// this common name, and group certificates claiming this node id. A certificate issued for the node later
	// is good again (lbplane back-dates its certificates by five minutes for clock skew, so one issued within
	// five minutes of the revocation is still refused).
	NodeID string `json:"nodeId,omitempty"`
	// Serial revokes one certificate, by its serial number in hex (as lbplane's log prints it when issuing).
	Serial string `json:"serial,omitempty"`
	// Group revokes every certificate of this proxy group that starts before the second of At: for keys the
	// group's Envoys may have lost. Envoys that get their certificates from lbplane with a credential of
	// their own (a Kubernetes pod's service account token, POST /v1/identity) are issued new ones at once.
	Group string `json:"group,omitempty"`
	// At is when it was revoked.
	At time.Time `json:"at"`
	// Until is when every certificate it covers has expired; it is forgotten then.
	Until time.Time `json:"until"`
	// Reason is the operator's note.
	Reason string `json:"reason,omitempty"`
}

// RevokeRequest asks for a revocation: exactly one of NodeID, Serial and Group.
type RevokeRequest struct {
	NodeID string `json:"nodeId,omitempty"`
	Serial string `json:"serial,omitempty"`
	Group  string `json:"group,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// IdentityRequest is what an Envoy pod's sidecar (lbctl envoy-sidecar --identity-url) sends to POST
// /v1/identity, with the pod's projected service account token as the bearer token, which says which pod
// it is: a certificate request (PEM) for a new certificate, or the certificate it holds (PEM), to learn
// whether it is still good.
type IdentityRequest struct {
	CSR         string `json:"csr,omitempty"`
	Certificate string `json:"certificate,omitempty"`
}

// IdentityResponse answers an IdentityRequest: a new certificate (with the CA that signs lbplane's), or
// whether the one held must be replaced (Renew, and why).
type IdentityResponse struct {
	NodeID      string    `json:"nodeId"`
	ProxyGroup  string    `json:"proxyGroup"`
	Certificate string    `json:"certificate,omitempty"`
	CA          string    `json:"ca,omitempty"`
	Serial      string    `json:"serial,omitempty"`
	NotAfter    time.Time `json:"notAfter,omitempty"`
	Renew       bool      `json:"renew,omitempty"`
	Reason      string    `json:"reason,omitempty"`
}

// RevokeResult answers a revocation: what is now in force, and how many connections it closed on the
// lbplane that answered.
type RevokeResult struct {
	Revocation Revocation `json:"revocation"`
	Closed     int        `json:"closedConnections"`
}

// CertResponse is an issued certificate, its private key and the CA that signed both it and lbplane's xDS
// certificate (what the Envoy must trust).
type CertResponse struct {
	Certificate string    `json:"certificate"`
	PrivateKey  string    `json:"privateKey"`
	CA          string    `json:"ca"`
	NotAfter    time.Time `json:"notAfter"`
}

// Version answers GET /v1/version: the build of the lbplane serving the API.
type Version struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion,omitempty"`
	// Settings are the server's settings that depart from the secure defaults (insecure modes, backend
	// address ranges re-admitted), as lbctl status lists them.
	Settings []string `json:"settings,omitempty"`
	// Store is the store this replica keeps policies in, when it is shared by several replicas (etcd).
	Store *StoreStatus `json:"store,omitempty"`
}

// StoreStatus is a replica's view of the store it shares with others (lbplane serve --store etcd).
type StoreStatus struct {
	Kind string `json:"kind"`
	// Replica is this replica's id; Role is "leader" (it does the single-writer work) or "follower".
	Replica string `json:"replica"`
	Role    string `json:"role"`
	// Stale is true while this replica cannot reach the store: it serves its last good state and takes no
	// pushes. StaleSince is when it lost it.
	Stale      bool      `json:"stale,omitempty"`
	StaleSince time.Time `json:"staleSince,omitzero"`
	// Versions is the config version this replica serves each proxy group (a hash of the content): every
	// replica serving the same records shows the same versions, so an Envoy moving between them gets nothing
	// new.
	Versions map[string]string `json:"versions,omitempty"`
	// Clients are the xDS clients (ADS streams) connected to each live replica, by replica id, as each last
	// published its Envoys in the store (every 2 s; a replica's report lapses 10 s after it stops). With a
	// maximum connection age (lbplane serve --xds-max-connection-age), a replica that restarted or was added
	// gets its share back within that age.
	Clients map[string]int `json:"clients,omitempty"`
	// Refused are the records under lbplane's prefix in the store that lbplane did not write (they do not
	// carry its authentication): they are not served.
	Refused []RefusedRecord `json:"refused,omitempty"`
}

// RefusedRecord is a record in the shared store that lbplane did not write, and so does not serve.
type RefusedRecord struct {
	Key         string    `json:"key"`
	ModRevision int64     `json:"modRevision"`
	Since       time.Time `json:"since"`
	Reason      string    `json:"reason"`
}

// LiveResult answers GET /v1/policies/{namespace}/{name}/live: the policy's backends as every Envoy of its
// group reports them, summed (as in status.backends) and per Envoy.
type LiveResult struct {
	Policy   string                   `json:"policy"`
	Backends []v1alpha1.BackendStatus `json:"backends"`
	Proxies  []ProxyLive              `json:"proxies"`
	// Down are the policy's endpoints ("address:port") its Envoys report down, and why, as lbctl trace,
	// whatif and diff --traffic model them; EnvoysByZone counts its proxy group's connected Envoys by zone
	// ("" for those without one), as those predictions weigh them.
	Down         map[string]string `json:"down,omitempty"`
	EnvoysByZone map[string]int    `json:"envoysByZone,omitempty"`
}

// ProxyLive is one Envoy's own view of a policy's backends.
type ProxyLive struct {
	NodeID   string                   `json:"nodeId"`
	Backends []v1alpha1.BackendStatus `json:"backends"`
}

// PolicyRef names a policy on the wire: {"namespace": ..., "name": ...}, as AppliedPolicy does. It converts
// to and from types.NamespacedName (the server's policy identity) as it is, so that nothing builds a
// "namespace/name" string to cut apart again.
type PolicyRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ComparePolicyRefs orders references by namespace, then name.
func ComparePolicyRefs(a, b PolicyRef) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
