package apiwire

// TraceRequest asks where one request to a policy goes (POST /v1/policies/{namespace}/{name}/trace).
type TraceRequest struct {
	// Path is the request's path, with its query string.
	Path string `json:"path"`
	// Headers by lower-case name; "host" is the Host header, "cookie" the cookies.
	Headers  map[string][]string `json:"headers,omitempty"`
	ClientIP string              `json:"clientIP,omitempty"`
	Predict
}

// WhatIfRequest asks where a policy's traffic goes with more endpoints down (POST
// /v1/policies/{namespace}/{name}/whatif).
type WhatIfRequest struct {
	Predict
}

// Predict is what every prediction may be told.
type Predict struct {
	// Down takes more endpoints down: "zone=NAME" or "endpoint=ADDRESS[:PORT]".
	Down []string `json:"down,omitempty"`
	// Zone, when set, predicts for an Envoy in this zone ("" for one without a zone); unset, for the Envoys
	// of the policy's proxy group that are connected, each taken to send as many requests.
	Zone *string `json:"zone,omitempty"`
	// Joined names endpoints that joined a slow-starting backend At ago ("zone=NAME" or
	// "endpoint=ADDRESS[:PORT]"): their shares are those of the ramp (Envoy's slow start) at that age.
	Joined []string `json:"joined,omitempty"`
	// At is how long ago the Joined endpoints joined, a duration ("30s"); empty is 0s.
	At string `json:"at,omitempty"`
}

// TraceTarget is where a traced request enters Envoy, for sending it there (lbctl trace --live): the
// policy's listener, and whether Envoy names the endpoint it chose (spec.debugHeaders).
type TraceTarget struct {
	Address      string `json:"address,omitempty"`
	Port         int32  `json:"port"`
	Protocol     string `json:"protocol"`
	DebugHeaders bool   `json:"debugHeaders,omitempty"`
}
