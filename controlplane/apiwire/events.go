package apiwire

import "time"

// Health event types.
const (
	// EventEjected: an Envoy stopped sending new requests to an endpoint.
	EventEjected = "Ejected"
	// EventRecovered: an Envoy sends to it again, and something shows it answers (an active health check,
	// or requests to it after its ejection lapsed).
	EventRecovered = "Recovered"
	// EventUnknown: an outlier ejection lapsed on a backend with passive checks only; nothing shows yet
	// whether the endpoint answers.
	EventUnknown = "Unknown"
)

// HealthEvent is one ejection or recovery of an endpoint as one Envoy reported it (GET /v1/events).
type HealthEvent struct {
	// Seq numbers the events of one lbplane process, from 1; GET /v1/events?since=N answers the later ones.
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	Namespace string    `json:"namespace"`
	Policy    string    `json:"policy"`
	Backend   string    `json:"backend"`
	Endpoint  string    `json:"endpoint"`
	Node      string    `json:"node"`
	Group     string    `json:"group"`
	Reasons   []string  `json:"reasons,omitempty"`
}

// SeriesPoint is one reading of an endpoint: requests per second over the Envoys' last reading, and errors
// per second over the last minute, summed over the Envoys.
type SeriesPoint struct {
	Time              time.Time `json:"time"`
	RequestsPerSecond float64   `json:"requestsPerSecond"`
	ErrorsPerSecond   float64   `json:"errorsPerSecond"`
}

// LatencyPoint is one reading of a backend's 99th percentile latency, in milliseconds.
type LatencyPoint struct {
	Time         time.Time `json:"time"`
	LatencyP99Ms float64   `json:"latencyP99Ms"`
}

// EndpointSeries is an endpoint's readings over the last hour, oldest first.
type EndpointSeries struct {
	Address string        `json:"address"`
	Points  []SeriesPoint `json:"points"`
}

// BackendSeries is a backend's readings over the last hour.
type BackendSeries struct {
	Name       string           `json:"name"`
	LatencyP99 []LatencyPoint   `json:"latencyP99"`
	Endpoints  []EndpointSeries `json:"endpoints"`
}

// HistoryResult answers GET /v1/policies/{namespace}/{name}/history: the policy's health events and its
// backends' series, kept by the server for the last hour.
type HistoryResult struct {
	Policy   string          `json:"policy"`
	Events   []HealthEvent   `json:"events"`
	Backends []BackendSeries `json:"backends"`
}
