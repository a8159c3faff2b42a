// Package proxystats reads what each connected Envoy knows of its backends (endpoint health, requests,
// errors, latency) from the read-only stats port of the bootstrap lbplane renders, and sums it up per
// backend over the last minute.
//
// Why admin's /clusters and /stats/prometheus rather than a push mechanism: /clusters carries each
// endpoint's health flags (failed active check, outlier ejection, draining, pending first check), which is
// exactly what Envoy balances on. LRS reports load per endpoint but neither health nor latency; Envoy 1.40's
// only health-check and outlier event sinks write to local files; HDS would run checks of its own beside the
// cluster's. Outlier ejections are attributed to a detector (consecutive 5xx, success rate, ...) by which
// ejections_enforced_* counter moved when the endpoint was ejected.
package proxystats

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Host is one endpoint of a cluster as one Envoy sees it.
type Host struct {
	Address string
	// Reasons why it takes no new traffic; empty when it does.
	Reasons []string
	// Outlier is set while outlier detection has it ejected.
	Outlier bool
	// Total and Errors are Envoy's cumulative rq_total and rq_error for the host.
	Total, Errors uint64
	// Active is the rq_active gauge: requests in flight to the host now.
	Active uint64
	// CxTotal, CxConnectFail and Timeouts are Envoy's cumulative cx_total, cx_connect_fail and rq_timeout
	// for the host; CxActive is the cx_active gauge (connections open to it now).
	CxTotal, CxConnectFail, Timeouts uint64
	CxActive                         uint64
	// Weight is the load balancing weight Envoy holds for the host (1 when the policy sets none), and
	// Priority its priority level (0 is used first).
	Weight   uint32
	Priority uint32
}

// Bucket is one cumulative upstream_rq_time bucket: Count requests took at most UpperMs.
type Bucket struct {
	UpperMs float64
	Count   uint64
}

// Cluster is one Envoy's view of one cluster.
type Cluster struct {
	Hosts []Host
	// Latency holds upstream_rq_time's cumulative buckets, ordered by bound, the last one +Inf.
	Latency []Bucket
	// Ejections counts enforced outlier ejections by detector (consecutive_5xx, success_rate, ...).
	Ejections map[string]uint64
	// Counters are the cluster's own counters, which count what its clients saw, including the requests
	// that never reached an endpoint, and the bytes to and from its endpoints.
	Counters Counters
}

// Counters are a cluster's own cumulative counters (not its endpoints'), from /stats/prometheus:
//   - Completed and Errors5xx: HTTP requests answered (upstream_rq_completed) and those answered with a 5xx
//     (upstream_rq_5xx), the answers Envoy makes itself included: 503 for a refused or reset connection
//     (UF, UR) or no healthy upstream (UH), 504 for a timeout (UT). Measured on Envoy 1.40: a closed port,
//     a TLS mismatch and a name that does not resolve count in both, and never in an endpoint's rq_total.
//     Both are the router's dynamic stats (lbplane serve --router-dynamic-stats).
//   - Errors4xx: HTTP requests answered with a 4xx (upstream_rq_4xx): a backend that wants TLS answers
//     plain HTTP with 400.
//   - Informational, Success and Redirection: those answered with a 1xx, 2xx and 3xx (upstream_rq_1xx to
//     _3xx); with Errors4xx and Errors5xx, the responses clients got by class.
//   - PendingFailed: requests or, for TCP, connections failed for want of a connection
//     (upstream_rq_pending_failure_eject: refused, reset or timed out while connecting).
//   - NoneHealthy: requests and connections that found no healthy endpoint (upstream_cx_none_healthy).
//   - RxBytes and TxBytes: bytes received from and sent to the endpoints (upstream_cx_rx_bytes_total,
//     upstream_cx_tx_bytes_total).
type Counters struct {
	Completed, Errors5xx, Errors4xx, PendingFailed, NoneHealthy uint64
	Informational, Success, Redirection                         uint64
	RxBytes, TxBytes                                            uint64
}

// Sample is everything read from one Envoy at one time.
type Sample struct {
	At time.Time
	// StatsAt is when the clusters' Latency and Ejections were read: At for a full read, an earlier
	// full read's time for a partial one, which carries them (see pace.go).
	StatsAt  time.Time
	Clusters map[string]*Cluster
	// Started is when the Envoy started, from its uptime (a full read's; zero when unknown): its counters
	// count from zero since then.
	Started time.Time
	// Joined says, per cluster and endpoint ("address:port"), when this Envoy started the endpoint's
	// slow-start ramp, as far as its reads show it (see markJoined); an endpoint not in it started its ramp
	// before lbplane could tell when, or is not healthy. Shared from sample to sample while nothing changes.
	Joined map[string]map[string]time.Time
	// partial names the clusters whose hosts a partial read read (nil for a full read: every cluster).
	partial map[string]bool
}

// Dead tells whether c has endpoints and every one failed its last active health checks (one not checked
// yet has not).
func (c *Cluster) Dead() bool {
	for _, h := range c.Hosts {
		failed := slices.Contains(h.Reasons, reasonActiveFailed) || slices.Contains(h.Reasons, reasonActiveTimedOut)
		if !failed || slices.Contains(h.Reasons, reasonActivePending) {
			return false
		}
	}
	return len(c.Hosts) > 0
}

// count is a JSON number that Envoy may print as a string (protojson's uint64).
type count uint64

func (c *count) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseUint(s, 10, 64)
	*c = count(v)
	return err
}

type clustersJSON struct {
	ClusterStatuses []struct {
		Name         string `json:"name"`
		HostStatuses []struct {
			Address struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue uint32 `json:"port_value"`
				} `json:"socket_address"`
			} `json:"address"`
			Stats []struct {
				Name  string `json:"name"`
				Value count  `json:"value"`
			} `json:"stats"`
			HealthStatus map[string]any `json:"health_status"`
			Weight       uint32         `json:"weight"`
			Priority     uint32         `json:"priority"`
		} `json:"host_statuses"`
	} `json:"cluster_statuses"`
}

// Reasons of a host that failed its active health checks, and of one that has not been checked yet (Envoy
// marks a new host failed until its first check).
const (
	reasonActiveFailed   = "active health check failed"
	reasonActiveTimedOut = "active health check timed out"
	reasonActivePending  = "waiting for its first health check"
)

// healthFlags maps admin's health_status flags to what a user reads, most telling first.
var healthFlags = []struct{ key, reason string }{
	{"failed_active_health_check", reasonActiveFailed},
	{"active_hc_timeout", reasonActiveTimedOut},
	{"failed_outlier_check", "outlier detection"},
	{"excluded_via_immediate_hc_fail", "asked to be removed (x-envoy-immediate-health-check-fail)"},
	{"pending_active_hc", reasonActivePending},
	{"pending_dynamic_removal", "being removed"},
}

// ParseClusters reads admin's /clusters?format=json.
func ParseClusters(b []byte) (map[string]*Cluster, error) {
	var doc clustersJSON
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("/clusters: %w", err)
	}
	out := make(map[string]*Cluster, len(doc.ClusterStatuses))
	for _, cs := range doc.ClusterStatuses {
		c := &Cluster{}
		for _, hs := range cs.HostStatuses {
			sa := hs.Address.SocketAddress
			h := Host{Address: net.JoinHostPort(sa.Address, strconv.Itoa(int(sa.PortValue))), Weight: hs.Weight, Priority: hs.Priority}
			for _, st := range hs.Stats {
				switch st.Name {
				case "rq_total":
					h.Total = uint64(st.Value)
				case "rq_error":
					h.Errors = uint64(st.Value)
				case "rq_active":
					h.Active = uint64(st.Value)
				case "rq_timeout":
					h.Timeouts = uint64(st.Value)
				case "cx_total":
					h.CxTotal = uint64(st.Value)
				case "cx_connect_fail":
					h.CxConnectFail = uint64(st.Value)
				case "cx_active":
					h.CxActive = uint64(st.Value)
				}
			}
			for _, f := range healthFlags {
				if set, _ := hs.HealthStatus[f.key].(bool); set {
					h.Reasons = append(h.Reasons, f.reason)
					h.Outlier = h.Outlier || f.key == "failed_outlier_check"
				}
			}
			switch eds, _ := hs.HealthStatus["eds_health_status"].(string); eds {
			case "", "HEALTHY", "UNKNOWN":
			case "DRAINING":
				h.Reasons = append(h.Reasons, ReasonDraining)
			default:
				h.Reasons = append(h.Reasons, "control plane says "+strings.ToLower(eds))
			}
			c.Hosts = append(c.Hosts, h)
		}
		out[cs.Name] = c
	}
	return out, nil
}

// ReasonDraining is the reason of an endpoint Envoy holds DRAINING because the control plane sent it so.
const ReasonDraining = "draining"

// StatsFilter is the regular expression lbplane asks /stats/prometheus to filter on: the latency histogram,
// the enforced-ejection counters and the clusters' own counters (Counters), instead of every stat of every
// cluster. Envoy walks every stat whatever the filter; what the counters add is the answer's lines, a dozen
// per cluster that took traffic (usedonly).
// Envoy's uptime (server.uptime) tells when its counters started from zero (Stats.Started).
const StatsFilter = `(upstream_rq_time|outlier_detection\.ejections_enforced_|` + countersPattern + `|^server\.uptime$)`

// countersPattern matches the stats of Counters.
const countersPattern = `upstream_rq_completed|upstream_rq_[1-5]xx|upstream_rq_pending_failure_eject|upstream_cx_none_healthy|upstream_cx_[rt]x_bytes_total`

const (
	latencyFamily   = "envoy_cluster_upstream_rq_time"
	ejectionsPrefix = "envoy_cluster_outlier_detection_ejections_enforced_"
	uptimeFamily    = "envoy_server_uptime"
	clusterLabel    = "envoy_cluster_name"
	classLabel      = "envoy_response_code_class"
)

// counterFamilies are the Prometheus names of Counters' stats (upstream_rq_5xx and 4xx are upstream_rq_xx, of
// class 5 and 4).
var counterFamilies = map[string]func(*Counters) *uint64{
	"envoy_cluster_upstream_rq_completed":             func(c *Counters) *uint64 { return &c.Completed },
	"envoy_cluster_upstream_rq_pending_failure_eject": func(c *Counters) *uint64 { return &c.PendingFailed },
	"envoy_cluster_upstream_cx_none_healthy":          func(c *Counters) *uint64 { return &c.NoneHealthy },
	"envoy_cluster_upstream_cx_rx_bytes_total":        func(c *Counters) *uint64 { return &c.RxBytes },
	"envoy_cluster_upstream_cx_tx_bytes_total":        func(c *Counters) *uint64 { return &c.TxBytes },
}

// ParseStats reads /stats/prometheus into clusters (adding to those /clusters returned), and returns Envoy's
// uptime when the answer holds it, -1 otherwise. Envoy updates the gauge when it flushes its stats (every 5 s
// unless its bootstrap says otherwise): the Envoy has run for uptime and at most one flush interval more.
func ParseStats(b []byte, clusters map[string]*Cluster) (uptime time.Duration, err error) {
	uptime = -1
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("/stats/prometheus: %w", err)
	}
	if f := families[uptimeFamily]; f != nil && len(f.GetMetric()) == 1 && f.GetMetric()[0].GetGauge() != nil {
		uptime = time.Duration(f.GetMetric()[0].GetGauge().GetValue()) * time.Second
	}
	get := func(name string) *Cluster {
		c := clusters[name]
		if c == nil {
			c = &Cluster{}
			clusters[name] = c
		}
		return c
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			cluster, class := "", ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case clusterLabel:
					cluster = l.GetValue()
				case classLabel:
					class = l.GetValue()
				}
			}
			if cluster == "" {
				continue
			}
			if field := counterFamilies[name]; field != nil && m.GetCounter() != nil {
				*field(&get(cluster).Counters) = uint64(m.GetCounter().GetValue())
				continue
			}
			if name == "envoy_cluster_upstream_rq_xx" && m.GetCounter() != nil {
				c, v := &get(cluster).Counters, uint64(m.GetCounter().GetValue())
				switch class {
				case "1":
					c.Informational = v
				case "2":
					c.Success = v
				case "3":
					c.Redirection = v
				case "4":
					c.Errors4xx = v
				case "5":
					c.Errors5xx = v
				}
				continue
			}
			switch {
			case name == latencyFamily && m.GetHistogram() != nil:
				var bs []Bucket
				for _, b := range m.GetHistogram().GetBucket() {
					bs = append(bs, Bucket{UpperMs: b.GetUpperBound(), Count: b.GetCumulativeCount()})
				}
				// Envoy prints the +Inf bucket itself; a parser may leave it out. One +Inf bucket: two would be
				// summed into one with twice the requests when histograms are merged (AddBuckets), and every
				// p99 over two Envoys would read as the last finite bound (an hour).
				if n := len(bs); n == 0 || !math.IsInf(bs[n-1].UpperMs, 1) {
					bs = append(bs, Bucket{UpperMs: math.Inf(1), Count: m.GetHistogram().GetSampleCount()})
				}
				slices.SortStableFunc(bs, func(a, b Bucket) int { return cmp.Compare(a.UpperMs, b.UpperMs) })
				get(cluster).Latency = bs
			case strings.HasPrefix(name, ejectionsPrefix) && name != ejectionsPrefix+"total" && m.GetCounter() != nil:
				c := get(cluster)
				if c.Ejections == nil {
					c.Ejections = map[string]uint64{}
				}
				c.Ejections[strings.TrimPrefix(name, ejectionsPrefix)] = uint64(m.GetCounter().GetValue())
			}
		}
	}
	return uptime, nil
}

// Attribute names the outlier detector behind each ejected host of cur: the one whose enforced-ejection
// counter moved since prev, when the host was not ejected in prev; otherwise what prev said. A host ejected
// in the first sample, or when no counter moved, keeps the plain "outlier detection". When prev named no
// detector, the counters that moved since are looked at again: the ejection may have happened after prev's
// counters were read (a full read reads them before the hosts, a partial read carries them from the last
// full read). Clusters cur carries from prev unchanged are left as they are.
func Attribute(prev, cur *Sample) {
	for name, c := range cur.Clusters {
		var pc *Cluster
		if prev != nil {
			pc = prev.Clusters[name]
		}
		if c == pc {
			continue
		}
		for i := range c.Hosts {
			h := &c.Hosts[i]
			if !h.Outlier {
				continue
			}
			ph := findHost(pc, h.Address)
			detail := ""
			if ph != nil && ph.Outlier {
				detail = outlierReason(ph.Reasons)
			}
			if pc != nil && (ph == nil || !ph.Outlier || detail == "outlier detection") {
				var moved []string
				for kind, n := range c.Ejections {
					if n > pc.Ejections[kind] {
						moved = append(moved, strings.ReplaceAll(kind, "_", " "))
					}
				}
				slices.Sort(moved)
				if len(moved) > 0 {
					detail = "outlier detection: " + strings.Join(moved, " or ")
				}
			}
			if detail == "" {
				continue
			}
			for j, r := range h.Reasons {
				if r == "outlier detection" {
					h.Reasons[j] = detail
				}
			}
		}
	}
}

func findHost(c *Cluster, addr string) *Host {
	if c == nil {
		return nil
	}
	for i := range c.Hosts {
		if c.Hosts[i].Address == addr {
			return &c.Hosts[i]
		}
	}
	return nil
}

func outlierReason(reasons []string) string {
	for _, r := range reasons {
		if strings.HasPrefix(r, "outlier detection") {
			return r
		}
	}
	return ""
}
