// Load balancing: the algorithm, hash keys, slow start and utilization-aware weights.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Algorithm is a load-balancing algorithm.
// +kubebuilder:validation:Enum=RoundRobin;LeastRequest;Random;RingHash;Maglev;BackendUtilization
// +kubebuilder:validation:MaxLength=32
type Algorithm string

const (
	AlgorithmRoundRobin   Algorithm = "RoundRobin"
	AlgorithmLeastRequest Algorithm = "LeastRequest"
	AlgorithmRandom       Algorithm = "Random"
	AlgorithmRingHash     Algorithm = "RingHash"
	AlgorithmMaglev       Algorithm = "Maglev"
	// AlgorithmBackendUtilization weighs endpoints by the load they report (ORCA), see BackendUtilization.
	AlgorithmBackendUtilization Algorithm = "BackendUtilization"
)

// LoadBalancing chooses how requests (or connections, on TCP listeners) are spread over endpoints.
//
// +kubebuilder:validation:XValidation:rule="!has(self.slowStart) || !has(self.algorithm) || self.algorithm in ['RoundRobin', 'LeastRequest']",message="slowStart is only allowed with algorithm RoundRobin or LeastRequest",fieldPath=".slowStart"
// +kubebuilder:validation:XValidation:rule="!has(self.hashKeys) || size(self.hashKeys) == 0 || (has(self.algorithm) && self.algorithm in ['RingHash', 'Maglev'])",message="hashKeys are only allowed with algorithm RingHash or Maglev",fieldPath=".hashKeys"
// +kubebuilder:validation:XValidation:rule="!has(self.leastRequest) || (has(self.algorithm) && self.algorithm == 'LeastRequest')",message="leastRequest is only allowed with algorithm LeastRequest",fieldPath=".leastRequest"
// +kubebuilder:validation:XValidation:rule="!has(self.zoneAware) || !has(self.algorithm) || self.algorithm in ['RoundRobin', 'LeastRequest', 'Random']",message="zoneAware is only allowed with algorithm RoundRobin, LeastRequest or Random",fieldPath=".zoneAware"
// +kubebuilder:validation:XValidation:rule="!has(self.zoneAware) || !has(self.zoneFailover) || size(self.zoneFailover) == 0",message="zoneAware is not allowed with zoneFailover",fieldPath=".zoneAware"
// +kubebuilder:validation:XValidation:rule="!has(self.zoneWeights) || size(self.zoneWeights) == 0 || (!has(self.zoneAware) && (!has(self.zoneFailover) || size(self.zoneFailover) == 0) && (!has(self.algorithm) || self.algorithm != 'BackendUtilization'))",message="zoneWeights is not allowed with zoneAware, zoneFailover or algorithm BackendUtilization",fieldPath=".zoneWeights"
type LoadBalancing struct {
	// algorithm is RoundRobin (weighted), LeastRequest, Random, RingHash, Maglev or BackendUtilization.
	// Defaults to RoundRobin. Each is the Envoy load balancing policy of that name; BackendUtilization is
	// client_side_weighted_round_robin.
	// +kubebuilder:default=RoundRobin
	Algorithm Algorithm `json:"algorithm,omitempty"`
	// leastRequest tunes LeastRequest.
	LeastRequest *LeastRequest `json:"leastRequest,omitempty"`
	// ringHash tunes RingHash.
	RingHash *RingHash `json:"ringHash,omitempty"`
	// maglev tunes Maglev.
	Maglev *Maglev `json:"maglev,omitempty"`
	// hashKeys (RingHash, Maglev) are what a request is hashed on, tried in order; the hashes of the keys a
	// request has are combined. Defaults to the client's address. On a TCP listener, tcp_proxy hashes the
	// source IP.
	// +kubebuilder:validation:MaxItems=8
	HashKeys []HashKey `json:"hashKeys,omitempty"`
	// slowStart (RoundRobin, LeastRequest) ramps a new endpoint's share up over a window.
	SlowStart *SlowStart `json:"slowStart,omitempty"`
	// zoneFailover lists zones in order of preference: all traffic goes to the endpoints of the first zone
	// that has any, and spills to the next as the first one's healthy share drops below about 71 % (Envoy's
	// priority levels with its default overprovisioning factor of 1.4). Endpoints of unlisted zones come last.
	// Failover needs to know what is unhealthy: pair it with healthCheck.passive (outlier detection) and,
	// ideally, healthCheck.active. Listed zones are priorities 0, 1, ... in order, unlisted zones the last,
	// without gaps.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	ZoneFailover []string `json:"zoneFailover,omitempty"`
	// backendUtilization tunes BackendUtilization.
	BackendUtilization *BackendUtilization `json:"backendUtilization,omitempty"`
	// hashBalanceFactor (RingHash, Maglev) bounds the load of any endpoint to this percentage of the mean,
	// plus one request, since Envoy still picks an endpoint that is exactly full (consistent hashing with
	// bounded loads): a request whose endpoint already has more requests in flight goes to the next one on the
	// ring, so one hot key cannot overload one endpoint. 150 allows 1.5 times the mean; the lower, the more
	// keys move under load. Unset: no bound (Envoy's and nginx's default; HAProxy's hash-balance-factor).
	// Measured (e2e/boundedload_test.go): one hot user among 24, busiest endpoint 3.1 times the mean without,
	// 1.6 times with 150.
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=10000
	HashBalanceFactor *int32 `json:"hashBalanceFactor,omitempty"`
	// failoverThreshold is the percentage of healthy endpoints in a priority level (the non-backup endpoints,
	// then the backups; or the zones of zoneFailover) below which traffic starts to spill to the next level,
	// in proportion. 100 spills as soon as one endpoint is unhealthy. Defaults to Envoy's 71 (an
	// overprovisioning factor of 1.4). Needs backup endpoints or zoneFailover. Envoy's overprovisioning factor
	// is 10000 / threshold.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	FailoverThreshold *int32 `json:"failoverThreshold,omitempty"`
	// zoneAware (RoundRobin, LeastRequest, Random) keeps an Envoy's requests in its own zone while that zone
	// has capacity (see ZoneAware), as Envoy Gateway's zoneAware.preferLocal and Istio's locality failover do.
	// Needs endpoints with a zone and Envoys bootstrapped with one.
	ZoneAware *ZoneAware `json:"zoneAware,omitempty"`
	// zoneWeights splits the backend's traffic over zones by weight, whatever the Envoy's own zone (Istio's
	// localityLbSetting.distribute). Endpoints of zones not listed, and endpoints without a zone, get no
	// traffic. Not with zoneAware, zoneFailover or algorithm BackendUtilization.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=zone
	ZoneWeights []ZoneWeight `json:"zoneWeights,omitempty"`
}

// LeastRequest tunes the LeastRequest algorithm (power of N choices).
type LeastRequest struct {
	// choiceCount is how many random endpoints are compared per pick. Defaults to 2.
	ChoiceCount *int32 `json:"choiceCount,omitempty"`
	// activeRequestBias, a decimal string, is how strongly endpoints with more requests in flight are avoided
	// when endpoints have different weights: 0 ignores the requests (weighted round robin), 1 divides the
	// weight by the requests in flight. Defaults to "1.0".
	ActiveRequestBias string `json:"activeRequestBias,omitempty"`
}

// RingHash tunes the ring (Ketama) consistent hash. Leave it unset unless you need Envoy's own sizing: by
// default every endpoint gets 160 ring entries per unit of weight (as nginx and ketama do), so that removing
// one of N endpoints remaps only its 1/N of the keys. Envoy divides a fixed ring among the endpoints instead,
// which moves about half as many keys again (measured: 32 % instead of 20 % when 1 of 5 leaves). The price of
// the default: the ring size, and so the cluster, changes with the number of endpoints.
type RingHash struct {
	// minimumRingSize in entries. Defaults to 1024 when ringHash is set.
	MinimumRingSize *int64 `json:"minimumRingSize,omitempty"`
	// maximumRingSize in entries. Defaults to 8388608.
	MaximumRingSize *int64 `json:"maximumRingSize,omitempty"`
}

// Maglev tunes the Maglev consistent hash.
type Maglev struct {
	// tableSize, a prime. Defaults to 65537.
	TableSize *int64 `json:"tableSize,omitempty"`
}

// HashKey is one input of a consistent hash. Exactly one of header, cookie, sourceIP, queryParameter, path
// and host.
//
// +kubebuilder:validation:XValidation:rule="(has(self.header) ? 1 : 0) + (has(self.cookie) ? 1 : 0) + (has(self.sourceIP) ? 1 : 0) + (has(self.queryParameter) ? 1 : 0) + (has(self.path) ? 1 : 0) + (has(self.host) ? 1 : 0) == 1",message="set exactly one of header, cookie, sourceIP, queryParameter, path and host"
type HashKey struct {
	// header hashes a request header.
	Header *HeaderHashKey `json:"header,omitempty"`
	// cookie hashes a cookie, which Envoy can set.
	Cookie *CookieHashKey `json:"cookie,omitempty"`
	// sourceIP hashes the client's address.
	SourceIP *SourceIPHashKey `json:"sourceIP,omitempty"`
	// queryParameter hashes a query parameter.
	QueryParameter *QueryParameterHashKey `json:"queryParameter,omitempty"`
	// terminal stops at this key when the request has it: later keys are not hashed. Defaults to false.
	Terminal bool `json:"terminal,omitempty"`
	// path (HTTP) hashes the request path, as HAProxy's "balance uri" and nginx's "hash $uri consistent" do: a
	// cache per path. The query string is left out unless withQuery.
	Path *PathHashKey `json:"path,omitempty"`
	// host (HTTP) hashes the Host header (:authority), as HAProxy's "balance hdr(host)" does.
	Host *HostHashKey `json:"host,omitempty"`
}

// PathHashKey hashes the request path.
type PathHashKey struct {
	// withQuery also hashes the query string (nginx's $request_uri). Defaults to false: /a?x=1 and /a?x=2
	// land on the same endpoint.
	WithQuery bool `json:"withQuery,omitempty"`
}

// HostHashKey hashes the Host header.
type HostHashKey struct{}

// HeaderHashKey hashes a request header.
type HeaderHashKey struct {
	// name of the header.
	Name string `json:"name"`
}

// QueryParameterHashKey hashes a query parameter.
type QueryParameterHashKey struct {
	// name of the query parameter.
	Name string `json:"name"`
}

// SourceIPHashKey hashes the client's address.
type SourceIPHashKey struct{}

// SameSite is a cookie's SameSite attribute.
// +kubebuilder:validation:Enum=Strict;Lax;None
// +kubebuilder:validation:MaxLength=32
type SameSite string

const (
	SameSiteStrict SameSite = "Strict"
	SameSiteLax    SameSite = "Lax"
	SameSiteNone   SameSite = "None"
)

// CookieHashKey hashes a cookie, and can have Envoy set it when the request has none.
type CookieHashKey struct {
	// name of the cookie.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// generate has Envoy set the cookie on responses to requests that lack it. Envoy always adds HttpOnly.
	Generate *GeneratedCookie `json:"generate,omitempty"`
}

// GeneratedCookie says how Envoy sets a hash cookie. Envoy derives the value from the client's IP address, so
// new clients behind one NAT or proxy start on the same endpoint; session persistence does not have this
// limit.
type GeneratedCookie struct {
	// ttl of the cookie; "0s" makes a session cookie. Defaults to 0s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// path of the cookie. Defaults to "/".
	Path string `json:"path,omitempty"`
	// secure sends the cookie over HTTPS only. Defaults to false.
	Secure bool `json:"secure,omitempty"`
	// sameSite is Strict, Lax or None (None needs secure). Defaults to Lax.
	SameSite SameSite `json:"sameSite,omitempty"`
}

// SlowStart ramps a new endpoint's share of traffic up over a window, so that a cold cache or JIT is not
// hit with a full share at once.
type SlowStart struct {
	// window over which the share ramps up.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Window metav1.Duration `json:"window"`
	// aggression, a decimal string: 1.0 ramps linearly, more is faster at first. Defaults to "1.0".
	Aggression string `json:"aggression,omitempty"`
	// minWeightPercent is the share an endpoint starts with. Defaults to 10.
	MinWeightPercent *int32 `json:"minWeightPercent,omitempty"`
}

// BackendUtilization weighs each endpoint by the load it reports in its responses (ORCA: the
// endpoint-load-metrics header): weight = requests per second / utilization, so busier endpoints get less.
// Endpoints that report nothing get the mean weight.
type BackendUtilization struct {
	// blackoutPeriod is how long an endpoint's reports are ignored after it starts reporting, so that a new
	// endpoint is not flooded on its first low figures. Defaults to 10s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	BlackoutPeriod *metav1.Duration `json:"blackoutPeriod,omitempty"`
	// weightUpdatePeriod is how often weights are recomputed. Defaults to 1s; at least 100ms.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	WeightUpdatePeriod *metav1.Duration `json:"weightUpdatePeriod,omitempty"`
	// weightExpirationPeriod drops the weight of an endpoint that has not reported for this long. Defaults to
	// 3m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	WeightExpirationPeriod *metav1.Duration `json:"weightExpirationPeriod,omitempty"`
	// errorUtilizationPenalty, a decimal string, counts errors per second as extra utilization. Defaults to
	// "1.0".
	ErrorUtilizationPenalty string `json:"errorUtilizationPenalty,omitempty"`
}
