package v1alpha1

// ResponseCounts counts the responses Envoy sent clients for a backend, by status class, over the backend's
// windowSeconds: the backend's own and Envoy's for it (503 with no healthy endpoint or past a circuit
// breaker, 504 on a timeout). Envoy: cluster.<name>.upstream_rq_<n>xx.
type ResponseCounts struct {
	Informational int64 `json:"1xx,omitempty"`
	Success       int64 `json:"2xx"`
	Redirection   int64 `json:"3xx"`
	ClientError   int64 `json:"4xx"`
	ServerError   int64 `json:"5xx"`
}

// Total is every response counted.
func (r *ResponseCounts) Total() int64 {
	return r.Informational + r.Success + r.Redirection + r.ClientError + r.ServerError
}

// ConnectionCounts are a backend's connections to its endpoints, summed over the proxies.
type ConnectionCounts struct {
	// active are open at the last reading (cx_active).
	Active int64 `json:"active"`
	// opened over windowSeconds (cx_total).
	Opened int64 `json:"opened"`
	// connectFailures over windowSeconds: connections an endpoint refused or did not answer in time
	// (cx_connect_fail).
	ConnectFailures int64 `json:"connectFailures,omitempty"`
}

// ByteCounts are the bytes Envoy exchanged with a backend's endpoints over windowSeconds.
type ByteCounts struct {
	// received from the endpoints (upstream_cx_rx_bytes_total).
	Received int64 `json:"received"`
	// sent to the endpoints (upstream_cx_tx_bytes_total).
	Sent int64 `json:"sent"`
}
