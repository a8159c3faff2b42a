package ir

import (
	"encoding/json"
	"reflect"
	"time"
)

// clusterJSON and endpointJSON are Cluster and Endpoint as written: their fields in the order the golden
// files and every reader of the IR's JSON have always seen, whatever the order in memory (which packs the
// fields: see Cluster and Endpoint). TestJSONMirrorsHaveEveryField keeps them in step.
type clusterJSON struct {
	Name            string          `json:"name,omitempty"`
	Source          Source          `json:"source,omitempty"`
	Algorithm       Algorithm       `json:"algorithm,omitempty"`
	ChoiceCount     uint32          `json:"choiceCount,omitempty"`
	ConnectTimeout  time.Duration   `json:"connectTimeout,omitempty"`
	CircuitBreakers CircuitBreakers `json:"circuitBreakers,omitempty"`
	Endpoints       []Endpoint      `json:"endpoints,omitempty"`

	RingHash                 *RingHashSize  `json:"ringHash,omitempty"`
	MaglevTableSize          uint64         `json:"maglevTableSize,omitempty"`
	SlowStart                *SlowStart     `json:"slowStart,omitempty"`
	HealthCheck              *HealthCheck   `json:"healthCheck,omitempty"`
	Outlier                  *Outlier       `json:"outlier,omitempty"`
	PanicThreshold           *float64       `json:"panicThreshold,omitempty"`
	ZoneFailover             []string       `json:"zoneFailover,omitempty"`
	HTTP2                    bool           `json:"http2,omitempty"`
	MaxRequestsPerConnection uint32         `json:"maxRequestsPerConnection,omitempty"`
	IdleTimeout              *time.Duration `json:"idleTimeout,omitempty"`
	TCPKeepalive             *TCPKeepalive  `json:"tcpKeepalive,omitempty"`
	TLS                      *UpstreamTLS   `json:"tls,omitempty"`
	BufferBytes              uint32         `json:"bufferBytes,omitempty"`

	ProxyProtocol          string         `json:"proxyProtocol,omitempty"`
	PerEndpointStats       bool           `json:"perEndpointStats,omitempty"`
	MaxConnectionDuration  *time.Duration `json:"maxConnectionDuration,omitempty"`
	ActiveRequestBias      *float64       `json:"activeRequestBias,omitempty"`
	Utilization            *Utilization   `json:"utilization,omitempty"`
	HashBalanceFactor      uint32         `json:"hashBalanceFactor,omitempty"`
	OverprovisioningFactor uint32         `json:"overprovisioningFactor,omitempty"`
	ZoneAware              *ZoneAware     `json:"zoneAware,omitempty"`
	ZoneWeights            []ZoneWeight   `json:"zoneWeights,omitempty"`
	DNS                    *DNS           `json:"dns,omitempty"`
}

type endpointJSON struct {
	Address         string `json:"address,omitempty"`
	Port            uint32 `json:"port,omitempty"`
	Weight          uint32 `json:"weight,omitempty"`
	Draining        bool   `json:"draining,omitempty"`
	HealthCheckPort uint32 `json:"healthCheckPort,omitempty"`
	HealthCheckHost string `json:"healthCheckHost,omitempty"`
	Zone            string `json:"zone,omitempty"`
	Hostname        string `json:"hostname,omitempty"`
	Backup          bool   `json:"backup,omitempty"`
}

// MarshalJSON writes c as clusterJSON.
func (c Cluster) MarshalJSON() ([]byte, error) { return marshalAs[clusterJSON](c) }

// MarshalJSON writes e as endpointJSON.
func (e Endpoint) MarshalJSON() ([]byte, error) { return marshalAs[endpointJSON](e) }

// marshalAs copies v's fields into a W by name and marshals that.
func marshalAs[W any](v any) ([]byte, error) {
	var w W
	dst, src := reflect.ValueOf(&w).Elem(), reflect.ValueOf(v)
	for i := range dst.NumField() {
		dst.Field(i).Set(src.FieldByName(dst.Type().Field(i).Name))
	}
	return json.Marshal(w)
}
