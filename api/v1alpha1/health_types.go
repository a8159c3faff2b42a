// Health: active health checks, outlier detection (passive) and the panic threshold.

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// HealthCheck takes failing endpoints out of rotation.
type HealthCheck struct {
	// active probes every endpoint on a schedule.
	Active *ActiveHealthCheck `json:"active,omitempty"`
	// passive ejects endpoints that fail real traffic (outlier detection). Unset, an endpoint is ejected at
	// its first local-origin failure (a refused or timed-out connect, a reset), at most half of the endpoints
	// at once (with backup endpoints: all the primaries, never the last endpoint): a dead endpoint then costs
	// one retried request, not a retry per request until the active checks notice. Set passive to choose the
	// detectors, or passive.disabled to have none. Unset, Envoy's outlier detection has
	// split_external_local_origin_errors with consecutive_local_origin_failure 1 and max_ejection_percent 50
	// (with backups: 100 x primaries / endpoints, rounded up), every other detector off.
	Passive *PassiveHealthCheck `json:"passive,omitempty"`
	// panicThreshold is the percentage of healthy endpoints under which Envoy stops trusting health and
	// balances over every endpoint. Defaults to Envoy's 50; 0 disables panic mode.
	PanicThreshold *int32 `json:"panicThreshold,omitempty"`
}

// HealthCheckType is the kind of active probe.
// +kubebuilder:validation:Enum=HTTP;TCP;GRPC
// +kubebuilder:validation:MaxLength=32
type HealthCheckType string

const (
	HealthCheckHTTP HealthCheckType = "HTTP"
	HealthCheckTCP  HealthCheckType = "TCP"
	HealthCheckGRPC HealthCheckType = "GRPC"
)

// ActiveHealthCheck probes each endpoint.
type ActiveHealthCheck struct {
	// type is HTTP, TCP or GRPC.
	Type HealthCheckType `json:"type"`
	// interval between probes of one endpoint. Defaults to 5s. Endpoints that get no traffic are probed at the
	// same interval.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// timeout of one probe. Defaults to 1s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// jitter adds up to this much random delay to each interval. Defaults to 0.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Jitter *metav1.Duration `json:"jitter,omitempty"`
	// healthyThreshold probes must pass in a row to mark an endpoint healthy. Defaults to 2.
	HealthyThreshold *int32 `json:"healthyThreshold,omitempty"`
	// unhealthyThreshold probes must fail in a row to mark an endpoint unhealthy. Defaults to 3.
	UnhealthyThreshold *int32 `json:"unhealthyThreshold,omitempty"`
	// port probes this port instead of the endpoint's.
	Port *int32 `json:"port,omitempty"`
	// http settings (type HTTP).
	HTTP *HTTPHealthCheck `json:"http,omitempty"`
	// tcp settings (type TCP).
	TCP *TCPHealthCheck `json:"tcp,omitempty"`
	// grpc settings (type GRPC).
	GRPC *GRPCHealthCheck `json:"grpc,omitempty"`
}

// HTTPHealthCheck is an HTTP probe.
type HTTPHealthCheck struct {
	// path probed. Defaults to "/".
	Path string `json:"path,omitempty"`
	// method of the probe. Defaults to GET.
	Method string `json:"method,omitempty"`
	// host sent in the probe's Host header. Defaults to the endpoint's own "address:port", never the hostnames
	// the policy serves: a probe tests the endpoint, not a virtual host.
	Host string `json:"host,omitempty"`
	// expectedStatuses are the status ranges that pass. Defaults to 200-399 (inclusive). Envoy gets them as
	// half-open ranges.
	// +kubebuilder:validation:MaxItems=20
	ExpectedStatuses []StatusRange `json:"expectedStatuses,omitempty"`
	// expectedBody must appear in the first 1 KiB of the response body.
	ExpectedBody string `json:"expectedBody,omitempty"`
}

// StatusRange is an inclusive range of HTTP statuses.
type StatusRange struct {
	// start is the first status of the range.
	Start int32 `json:"start"`
	// end is the last status of the range (inclusive).
	End int32 `json:"end"`
}

// TCPHealthCheck connects, optionally sends a payload and expects one back. Without payloads a completed
// connection passes.
type TCPHealthCheck struct {
	// send is a payload written after connecting (text; sent hex-encoded).
	Send string `json:"send,omitempty"`
	// receive must come back for the probe to pass.
	Receive string `json:"receive,omitempty"`
}

// GRPCHealthCheck calls grpc.health.v1.Health/Check, with the endpoint's "address:port" as authority.
type GRPCHealthCheck struct {
	// serviceName asked about; empty asks about the server as a whole.
	ServiceName string `json:"serviceName,omitempty"`
}

// PassiveHealthCheck ejects endpoints that fail real requests (Envoy outlier detection). Each detector is on
// only when its field is set.
type PassiveHealthCheck struct {
	// consecutive5xx responses (or connection failures) eject an endpoint. Off unless set. Always enforced
	// (enforcing 100).
	Consecutive5xx *int32 `json:"consecutive5xx,omitempty"`
	// consecutiveGatewayErrors (502, 503, 504, connection failures) eject an endpoint. Off unless set. Always
	// enforced (enforcing 100).
	ConsecutiveGatewayErrors *int32 `json:"consecutiveGatewayErrors,omitempty"`
	// consecutiveLocalOriginFailures (connect failures, timeouts, resets seen by Envoy itself) eject an
	// endpoint; they then no longer count as 5xx. Off unless set.
	ConsecutiveLocalOriginFailures *int32 `json:"consecutiveLocalOriginFailures,omitempty"`
	// successRate ejects endpoints whose success rate is far below the others'. Off unless set.
	SuccessRate *SuccessRateEjection `json:"successRate,omitempty"`
	// failurePercentage ejects endpoints whose failure rate is above a threshold. Off unless set. Always
	// enforced (enforcing 100).
	FailurePercentage *FailurePercentageEjection `json:"failurePercentage,omitempty"`
	// interval between ejection sweeps. Defaults to 10s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
	// baseEjectionTime is how long a first ejection lasts; it grows with each ejection. Defaults to 30s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	BaseEjectionTime *metav1.Duration `json:"baseEjectionTime,omitempty"`
	// maxEjectionPercent caps the share of endpoints ejected at once. Defaults to 10 (at least one endpoint
	// can always be ejected).
	MaxEjectionPercent *int32 `json:"maxEjectionPercent,omitempty"`
	// maxEjectionTime caps how long an ejection lasts as it grows with repeated ejections. Defaults to Envoy's
	// 300s. Not below baseEjectionTime.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|-?([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+)$`
	MaxEjectionTime *metav1.Duration `json:"maxEjectionTime,omitempty"`
	// alwaysEjectOneEndpoint ejects a failing endpoint even when maxEjectionPercent of the endpoints is less
	// than one endpoint. Defaults to false.
	AlwaysEjectOneEndpoint bool `json:"alwaysEjectOneEndpoint,omitempty"`
	// disabled turns outlier detection off, the default ejection of endpoints that refuse connections
	// included. No detector may be set with it.
	Disabled bool `json:"disabled,omitempty"`
}

// SuccessRateEjection ejects endpoints whose success rate is below mean - stdevFactor * stdev.
type SuccessRateEjection struct {
	// stdevFactor, as a decimal string. Defaults to "1.9".
	StdevFactor string `json:"stdevFactor,omitempty"`
	// minimumHosts with enough requests for the detector to run. Defaults to 5.
	MinimumHosts *int32 `json:"minimumHosts,omitempty"`
	// requestVolume an endpoint needs in an interval to be judged. Defaults to 100.
	RequestVolume *int32 `json:"requestVolume,omitempty"`
}

// FailurePercentageEjection ejects endpoints whose failure percentage is at or above threshold.
type FailurePercentageEjection struct {
	// threshold percentage. Defaults to 85.
	Threshold *int32 `json:"threshold,omitempty"`
	// minimumHosts with enough requests for the detector to run. Defaults to 5.
	MinimumHosts *int32 `json:"minimumHosts,omitempty"`
	// requestVolume an endpoint needs in an interval to be judged. Defaults to 50.
	RequestVolume *int32 `json:"requestVolume,omitempty"`
}
