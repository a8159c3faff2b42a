// Package metrics holds lbplane's Prometheus metrics. Every recording method works on a nil *Metrics, so
// components (and their tests) run the same with metrics off.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one registry of lbplane's metrics.
type Metrics struct {
	reg *prometheus.Registry

	pushes       *prometheus.CounterVec
	pushDuration *prometheus.HistogramVec
	acks         *prometheus.CounterVec
	nacks        *prometheus.CounterVec
	translation  prometheus.Histogram
	snapshot     *prometheus.GaugeVec
	storeOps     *prometheus.CounterVec
	apiRequests  *prometheus.CounterVec
}

// New returns metrics registered in a registry of their own, with the Go runtime and process collectors.
// proxies, called at each scrape, counts the connected Envoys by proxy group.
func New(proxies func() map[string]int) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.pushes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_xds_pushes_total",
		Help: "xDS responses sent to Envoys, by resource type."}, []string{"type"})
	m.pushDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lbplane_xds_push_duration_seconds",
		Help:    "Time from an xDS response sent to the Envoy's ACK or NACK of it, by resource type.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"type"})
	m.acks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_xds_acks_total",
		Help: "xDS responses Envoys acknowledged, by resource type."}, []string{"type"})
	m.nacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_xds_nacks_total",
		Help: "xDS responses Envoys rejected, by resource type."}, []string{"type"})
	m.translation = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lbplane_translation_duration_seconds",
		Help:    "Time to translate every policy and build every proxy group's resources.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14)})
	m.snapshot = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbplane_snapshot_bytes",
		Help: "Serialized size of a proxy group's current resources."}, []string{"group"})
	m.storeOps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_store_operations_total",
		Help: "Operations on the durable store, by operation and result (ok, error)."}, []string{"operation", "result"})
	m.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_api_requests_total",
		Help: "Push API requests, by method, route and status code."}, []string{"method", "route", "code"})
	m.reg.MustRegister(m.pushes, m.pushDuration, m.acks, m.nacks, m.translation, m.snapshot, m.storeOps, m.apiRequests,
		&proxyCollector{count: proxies},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Push records an xDS response of one type.
func (m *Metrics) Push(typ string) {
	if m != nil {
		m.pushes.WithLabelValues(typ).Inc()
	}
}

// Answer records an Envoy's ACK or NACK of a response sent at sent.
func (m *Metrics) Answer(typ string, nack bool, sent time.Time) {
	if m == nil {
		return
	}
	if nack {
		m.nacks.WithLabelValues(typ).Inc()
	} else {
		m.acks.WithLabelValues(typ).Inc()
	}
	if !sent.IsZero() {
		m.pushDuration.WithLabelValues(typ).Observe(time.Since(sent).Seconds())
	}
}

// Translation records one translate-and-build run.
func (m *Metrics) Translation(d time.Duration) {
	if m != nil {
		m.translation.Observe(d.Seconds())
	}
}

// Snapshot records the size of a group's resources; a removed group is deleted.
func (m *Metrics) Snapshot(group string, bytes int, removed bool) {
	if m == nil {
		return
	}
	if removed {
		m.snapshot.DeleteLabelValues(group)
		return
	}
	m.snapshot.WithLabelValues(group).Set(float64(bytes))
}

// StoreOp records one store operation.
func (m *Metrics) StoreOp(op string, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.storeOps.WithLabelValues(op, result).Inc()
}

// Instrument counts the requests h answers by method, matched route pattern and status code.
func (m *Metrics) Instrument(h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		// ServeMux sets the pattern it matched on the request; unmatched paths share one label value.
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.apiRequests.WithLabelValues(r.Method, route, strconv.Itoa(rec.code)).Inc()
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

type proxyCollector struct{ count func() map[string]int }

var proxiesDesc = prometheus.NewDesc("lbplane_connected_proxies", "Envoys connected over xDS, by proxy group.", []string{"group"}, nil)

func (c *proxyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- proxiesDesc }

func (c *proxyCollector) Collect(ch chan<- prometheus.Metric) {
	if c.count == nil {
		return
	}
	for group, n := range c.count() {
		ch <- prometheus.MustNewConstMetric(proxiesDesc, prometheus.GaugeValue, float64(n), group)
	}
}
