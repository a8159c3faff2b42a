// DNS: how backends' host-name endpoints are resolved.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DNSResolution says what the addresses a name resolves to become.
// +kubebuilder:validation:Enum=Strict;Logical
// +kubebuilder:validation:MaxLength=32
type DNSResolution string

const (
	// DNSStrict: every address of every answer is an endpoint, balanced like static ones (Envoy STRICT_DNS,
	// nginx "resolve", HAProxy server-template). Addresses gone from the answer leave the backend.
	DNSStrict DNSResolution = "Strict"
	// DNSLogical: the name is one endpoint; new connections go to the first address of the latest answer
	// (Envoy LOGICAL_DNS). For large external names (CDNs, cloud APIs) whose answers rotate through many
	// addresses, where one endpoint per address would churn connection pools.
	DNSLogical DNSResolution = "Logical"
)

// DNSLookupFamily says which address records Envoy asks for.
// +kubebuilder:validation:Enum=V4Preferred;V4;V6;Auto;All
// +kubebuilder:validation:MaxLength=32
type DNSLookupFamily string

const (
	// DNSV4Preferred: A records, and AAAA only when the name has no A record.
	DNSV4Preferred DNSLookupFamily = "V4Preferred"
	// DNSV4: A records only.
	DNSV4 DNSLookupFamily = "V4"
	// DNSV6: AAAA records only.
	DNSV6 DNSLookupFamily = "V6"
	// DNSAuto: AAAA records, and A only when the name has no AAAA record (Envoy's own default).
	DNSAuto DNSLookupFamily = "Auto"
	// DNSAll: A and AAAA records both.
	DNSAll DNSLookupFamily = "All"
)

// DNSResolver says who resolves a backend's host names.
// +kubebuilder:validation:Enum=Lbplane;Envoy
// +kubebuilder:validation:MaxLength=32
type DNSResolver string

const (
	// DNSResolverLbplane: lbplane resolves the names (its /etc/hosts, then lbplane serve --dns-resolver or
	// its /etc/resolv.conf), checks every address of every answer against the server's backend address
	// rules, and sends the Envoys the addresses it allowed as endpoints (EDS). A name that later answers a
	// forbidden address (DNS rebinding) never reaches the Envoys.
	DNSResolverLbplane DNSResolver = "Lbplane"
	// DNSResolverEnvoy: each Envoy resolves the names itself (Envoy's DNS cluster), with its own resolver;
	// lbplane never sees the addresses, so nothing checks them. Allowed only where the operator opts in
	// (lbplane serve --allow-envoy-dns), for Envoys whose resolver sees other answers than lbplane's.
	DNSResolverEnvoy DNSResolver = "Envoy"
)

// BackendDNS tunes the resolution of a backend's host-name endpoints. lbplane resolves them by default
// (resolver), with the operator's resolvers: an operator's choice, so that a policy means the same on every
// proxy group.
type BackendDNS struct {
	// resolver is Lbplane (the default: lbplane resolves the names, checks every answer against the server's
	// backend address rules and sends the allowed addresses as endpoints) or Envoy (each Envoy resolves them
	// with its own resolver and nothing checks the answers; refused unless lbplane serve --allow-envoy-dns).
	Resolver DNSResolver `json:"resolver,omitempty"`
	// resolution is Strict (each address is an endpoint) or Logical (the name is one endpoint; exactly one
	// endpoint allowed). Defaults to Strict.
	Resolution DNSResolution `json:"resolution,omitempty"`
	// refreshInterval is how often the names are resolved again; traffic follows a changed answer within it.
	// Defaults to 5s. At least 100ms.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
	// respectTTL resolves again when the answer's TTL runs out instead of every refreshInterval (as nginx does
	// without valid=), no sooner than 5s (or refreshInterval when shorter) and no later than an hour. Defaults
	// to false.
	RespectTTL bool `json:"respectTTL,omitempty"`
	// lookupFamily is V4Preferred, V4, V6, Auto (IPv6 first) or All. Defaults to V4Preferred: a name with both
	// records is reached over IPv4, which every host can route. Envoy names them V4_PREFERRED, V4_ONLY,
	// V6_ONLY, AUTO and ALL.
	LookupFamily DNSLookupFamily `json:"lookupFamily,omitempty"`
}
