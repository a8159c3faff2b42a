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

// TrafficPoint is one reading of a backend, summed over the Envoys: responses per second by status class,
// the share of them that were 5xx (unset without responses), connections open, and bytes per second to
// and from its endpoints. The rates are over the backend's window (the last minute).
type TrafficPoint struct {
	Time            time.Time `json:"time"`
	Success         float64   `json:"2xx"`
	Redirection     float64   `json:"3xx"`
	ClientError     float64   `json:"4xx"`
	ServerError     float64   `json:"5xx"`
	ClientErrorRate *float64  `json:"clientErrorRate,omitempty"`
	// ConnectionsActive are open at the reading; BytesReceived and BytesSent are per second.
	ConnectionsActive int64   `json:"connectionsActive"`
	BytesReceived     float64 `json:"bytesReceived"`
	BytesSent         float64 `json:"bytesSent"`
}

// Downtime is a span in which an endpoint's counted health was not Healthy (ejected, or unknown after a
// lapsed passive ejection); To is unset while it lasts.
type Downtime struct {
	From   time.Time  `json:"from"`
	To     *time.Time `json:"to,omitempty"`
	Health string     `json:"health"`
}

// EndpointSeries is an endpoint's readings over the last hour, oldest first, its spans of downtime in
// that hour, and when lbplane last read its health from the Envoys (the outcome of their health checks
// and outlier detection: Envoy keeps no time of its own checks).
type EndpointSeries struct {
	Address   string        `json:"address"`
	Points    []SeriesPoint `json:"points"`
	Downtime  []Downtime    `json:"downtime"`
	LastCheck *time.Time    `json:"lastCheck,omitempty"`
}

// BackendSeries is a backend's readings over the last hour.
type BackendSeries struct {
	Name       string           `json:"name"`
	LatencyP99 []LatencyPoint   `json:"latencyP99"`
	Traffic    []TrafficPoint   `json:"traffic"`
	Endpoints  []EndpointSeries `json:"endpoints"`
}

// HistoryResult answers GET /v1/policies/{namespace}/{name}/history: the policy's health events and its
// backends' series, kept by the server for the last hour.
type HistoryResult struct {
	Policy   string          `json:"policy"`
	Events   []HealthEvent   `json:"events"`
	Backends []BackendSeries `json:"backends"`
}
