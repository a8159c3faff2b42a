// Package metrics holds lbplane's Prometheus metrics. Every recording method works on a nil *Metrics, so
// components (and their tests) run the same with metrics off.
package metrics

import (
	"compress/gzip"
	"context"
	"iter"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/version"
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
	pushGroups   prometheus.Histogram
	apiRequests  *prometheus.CounterVec
	apiDuration  *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	closed       *prometheus.CounterVec
	changes      *prometheus.CounterVec
	versions     *prometheus.CounterVec
	policies     atomic.Pointer[func() iter.Seq[PolicyConditions]]
	certs        *certCollector
	sync         *syncCollector
	clusters     atomic.Pointer[func() iter.Seq[ClusterInfo]]
	refused      atomic.Pointer[func() int]
	revocations  atomic.Pointer[func() int]
	// types are the xDS resource types (KnownTypes) whose NACK series each proxy group gets at 0.
	types atomic.Pointer[[]string]
}

// Components whose failures are counted in lbplane_errors_total.
const (
	// StatusWrite: a policy status the API server refused (conflicts, retried on the next pass, are not
	// counted).
	StatusWrite = "status_write"
	// StatsPoll: a read of an Envoy's stats port that failed.
	StatsPoll = "stats_poll"
	// ConfigDirReload: a reload of --config-dir that failed as a whole, or a file in it that was refused.
	ConfigDirReload = "config_dir_reload"
)

// Reasons lbplane closes an xDS connection, counted in lbplane_xds_connections_closed_total.
const (
	// ClosedMaxAge: the connection's stream reached its maximum age (lbplane serve --xds-max-connection-age)
	// and had answered everything it was sent.
	ClosedMaxAge = "max_age"
)

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
		Help: "xDS responses Envoys rejected, by proxy group and resource type."}, []string{"group", "type"})
	m.translation = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lbplane_translation_duration_seconds",
		Help:    "Time to translate every policy and build every proxy group's resources.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14)})
	m.snapshot = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbplane_snapshot_bytes",
		Help: "Serialized size of a proxy group's current resources."}, []string{"group"})
	m.storeOps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_store_operations_total",
		Help: "Operations on the durable store, by operation and result (ok, error)."}, []string{"operation", "result"})
	m.pushGroups = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lbplane_push_group_size",
		Help:    "Pushes written in one store transaction: pushes of different policies that arrive while another is written are written, and translated, together.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64}})
	m.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_api_requests_total",
		Help: "Push API requests, by method, route and status code."}, []string{"method", "route", "code"})
	m.apiDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lbplane_api_request_duration_seconds",
		Help: "Push API request latency, by method and route.", Buckets: prometheus.DefBuckets}, []string{"method", "route"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_errors_total",
		Help: "Failures of lbplane's own work, by component: status_write, stats_poll, config_dir_reload."}, []string{"component"})
	for _, c := range []string{StatusWrite, StatsPoll, ConfigDirReload} {
		m.errors.WithLabelValues(c) // present at 0, so that rate() and alerts see the series from the start
	}
	m.closed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_xds_connections_closed_total",
		Help: "xDS connections lbplane closed, by reason: max_age (its stream reached --xds-max-connection-age with every response answered; the client reconnects, possibly to another replica)."}, []string{"reason"})
	m.closed.WithLabelValues(ClosedMaxAge)
	m.changes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_source_changes_total",
		Help: "Changes the sources received, by source (kubernetes, store, config_dir) and kind: objects added, updated or deleted in Kubernetes, policies pushed or deleted, files reloaded. A burst of them becomes fewer config versions (lbplane_config_versions_total)."},
		[]string{"source", "kind"})
	m.versions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbplane_config_versions_total",
		Help: "Versions of each proxy group's config published: translations that changed what the group is served. Each reaches each of its Envoys as one xDS response per type it changes and make-before-break step (lbplane_xds_pushes_total)."},
		[]string{"group"})
	m.certs = &certCollector{}
	m.sync = &syncCollector{}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbplane_build_info",
		Help: "Always 1; the labels say which build of lbplane this is."}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(version.Version, version.Revision(), runtime.Version()).Set(1)
	refused := countFunc("lbplane_store_refused_records",
		"Records under lbplane's etcd prefix that lbplane did not write (they do not carry its authentication): refused, never served.",
		&m.refused)
	revocations := countFunc("lbplane_revocations_in_force",
		"Envoy identities (nodes, certificate serials, proxy groups) this replica refuses (lbctl revoke): a revocation made through another replica counts once this one has read it.",
		&m.revocations)
	m.reg.MustRegister(m.pushes, m.pushDuration, m.acks, m.nacks, m.translation, m.snapshot, m.storeOps, m.pushGroups, m.apiRequests,
		m.apiDuration, m.errors, m.closed, m.changes, m.versions, m.certs, m.sync, build, refused, revocations, &proxyCollector{count: proxies})
	// controller-runtime's registry, served alongside, has the Go and process collectors once its controller
	// package is linked in (as it is in lbplane); two of each would make every scrape fail as duplicates.
	if !hasMetric(ctrlmetrics.Registry, "go_goroutines") {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// countFunc is a gauge read at each scrape from the function f holds; 0 until one is set.
func countFunc(name, help string, f *atomic.Pointer[func() int]) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		if count := f.Load(); count != nil {
			return float64((*count)())
		}
		return 0
	})
}

func hasMetric(g prometheus.Gatherer, name string) bool {
	fams, _ := g.Gather()
	for _, f := range fams {
		if f.GetName() == name {
			return true
		}
	}
	return false
}

// Handler serves lbplane's metrics and, from controller-runtime's registry, the Kubernetes client's
// (rest_client_*), the controllers' work queues (workqueue_*) and leader election
// (leader_election_master_status), in one exposition. Those live in controller-runtime's global registry
// because client-go reports to it from package init; gathering both here keeps one scrape target.
//
// The policies' families (writePolicies) and lbplane_cluster_info (writeClusters) follow the registries' in
// the text format, written as they are listed, one policy or cluster at a time: through the registry, each
// of the 400,000 series of 100,000 policies was an object of its own, all held until the scrape was
// written, 380–387 MiB of heap for the scrape (BenchmarkScrape100000Policies); so was each cluster's.
func (m *Metrics) Handler() http.Handler {
	registries := promhttp.HandlerFor(prometheus.Gatherers{m.reg, ctrlmetrics.Registry},
		promhttp.HandlerOpts{Registry: m.reg, DisableCompression: true})
	// InstrumentMetricHandler: promhttp_metric_handler_requests_total, Prometheus's own count of scrapes.
	return promhttp.InstrumentMetricHandler(m.reg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The text format, whatever the scraper offers to take, as the policies' families are appended in it.
		r = r.Clone(r.Context())
		r.Header.Del("Accept")
		out := &exposition{ResponseWriter: w, body: w}
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Add("Vary", "Accept-Encoding")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out.body = gz
		}
		registries.ServeHTTP(out, r)
		if out.status != 0 && out.status != http.StatusOK {
			return
		}
		// An error here is the scraper gone; there is no one to tell.
		if f := m.policies.Load(); f != nil {
			_ = writePolicies(out.body, (*f)())
		}
		if f := m.clusters.Load(); f != nil {
			_ = writeClusters(out.body, (*f)())
		}
	}))
}

// Certificates sets the function that lists, at each scrape, when each certificate lbplane holds expires
// ("ca", "xds-serving", "envoy-group/<group>"), for lbplane_certificate_expiry_timestamp_seconds.
func (m *Metrics) Certificates(list func() map[string]time.Time) {
	if m != nil {
		m.certs.list.Store(&list)
	}
}

// RefusedRecords sets the function that counts, at each scrape, the records in the shared store that
// lbplane refused as not its own (lbplane_store_refused_records).
func (m *Metrics) RefusedRecords(count func() int) {
	if m != nil {
		m.refused.Store(&count)
	}
}

// RevocationsInForce sets the function that counts, at each scrape, the revocations this replica enforces
// (lbplane_revocations_in_force).
func (m *Metrics) RevocationsInForce(count func() int) {
	if m != nil {
		m.revocations.Store(&count)
	}
}

// KnownTypes makes the xDS series of each resource type (the short names, "Cluster") present at 0 from the
// start, so that rate() and alerts on lbplane_xds_nacks_total see them before the first rejection: the NACK
// series of a proxy group appear at 0 when the group is first seen (Group).
func (m *Metrics) KnownTypes(types ...string) {
	if m == nil {
		return
	}
	for _, t := range types {
		m.pushes.WithLabelValues(t)
		m.acks.WithLabelValues(t)
	}
	m.types.Store(&types)
}

// Error counts one failure of a component (StatusWrite, StatsPoll, ConfigDirReload).
func (m *Metrics) Error(component string) {
	if m != nil {
		m.errors.WithLabelValues(component).Inc()
	}
}

// PolicyConditions are one policy's conditions (Accepted, ResolvedRefs, Programmed, and RolledBack once it
// had a staged rollout), as its status has them, and its rollout (nil when it never had one).
type PolicyConditions struct {
	Policy     types.NamespacedName
	Conditions []metav1.Condition
	Rollout    *v1alpha1.RolloutStatus
}

// Policies sets the function that lists every policy's conditions at each scrape, one policy at a time,
// for lbplane_policies (counts by condition), lbplane_policy_condition (one series per policy and
// condition) and lbplane_policy_rollout_stage and _stages (one series each per policy with a rollout):
// see writePolicies.
func (m *Metrics) Policies(list func() iter.Seq[PolicyConditions]) {
	if m != nil {
		m.policies.Store(&list)
	}
}

// Push records an xDS response of one type.
func (m *Metrics) Push(typ string) {
	if m != nil {
		m.pushes.WithLabelValues(typ).Inc()
	}
}

// Source names of lbplane_source_changes_total.
const (
	SourceKubernetes = "kubernetes"
	SourceStore      = "store"
	SourceConfigDir  = "config_dir"
)

// SourceChange counts n changes a source received of objects of kind.
func (m *Metrics) SourceChange(source, kind string, n int) {
	if m != nil && n > 0 {
		m.changes.WithLabelValues(source, kind).Add(float64(n))
	}
}

// ConfigVersion counts a version of group's config published.
func (m *Metrics) ConfigVersion(group string) {
	if m != nil {
		m.versions.WithLabelValues(group).Inc()
	}
}

// Answer records an Envoy's ACK or NACK of a response sent at sent, for an Envoy of proxy group group.
func (m *Metrics) Answer(group, typ string, nack bool, sent time.Time) {
	if m == nil {
		return
	}
	if nack {
		m.nacks.WithLabelValues(group, typ).Inc()
	} else {
		m.acks.WithLabelValues(typ).Inc()
	}
	if !sent.IsZero() {
		m.pushDuration.WithLabelValues(typ).Observe(time.Since(sent).Seconds())
	}
}

// ConnectionClosed records an xDS connection lbplane closed, for reason (ClosedMaxAge).
func (m *Metrics) ConnectionClosed(reason string) {
	if m != nil {
		m.closed.WithLabelValues(reason).Inc()
	}
}

// Translation records one translate-and-build run.
func (m *Metrics) Translation(d time.Duration) {
	if m != nil {
		m.translation.Observe(d.Seconds())
	}
}

// Snapshot records the size of a group's resources; a removed group is deleted. A group's NACK series are
// made present at 0 with its first snapshot (see Group).
func (m *Metrics) Snapshot(group string, bytes int, removed bool) {
	if m == nil {
		return
	}
	if removed {
		m.snapshot.DeleteLabelValues(group)
		return
	}
	m.snapshot.WithLabelValues(group).Set(float64(bytes))
	m.Group(group)
}

// Group makes a proxy group's NACK series (one per KnownTypes type) present at 0, so that rate() and alerts
// see its first NACK: called when the group's config is first built and when an Envoy of it connects,
// before any Envoy of it can reject anything. The series stay while lbplane runs (a counter that vanished
// and came back would look reset).
func (m *Metrics) Group(group string) {
	if m == nil {
		return
	}
	if types := m.types.Load(); types != nil {
		for _, t := range *types {
			m.nacks.WithLabelValues(group, t)
		}
	}
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

// PushGroup records n pushes written in one store transaction.
func (m *Metrics) PushGroup(n int) {
	if m != nil {
		m.pushGroups.Observe(float64(n))
	}
}

// Instrument counts the requests h answers by method, matched route pattern and status code, and times
// them, with promhttp's instrumentation (which writes methods in lower case, as Prometheus's own handlers do).
func (m *Metrics) Instrument(h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	// The route label is the ServeMux pattern the request matched, which ServeMux sets on the request only
	// while h runs: a holder filled inside is read by the label function after h returns.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		holder := &routeHolder{route: "unmatched"}
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			if r.Pattern != "" {
				holder.route = r.Pattern
			}
		})
		m.instrumentWith(holder, inner).ServeHTTP(w, r)
	})
}

type routeHolder struct{ route string }

func (m *Metrics) instrumentWith(holder *routeHolder, h http.Handler) http.Handler {
	label := promhttp.WithLabelFromCtx("route", func(context.Context) string { return holder.route })
	return promhttp.InstrumentHandlerDuration(m.apiDuration, promhttp.InstrumentHandlerCounter(m.apiRequests, h, label), label)
}

type certCollector struct {
	list atomic.Pointer[func() map[string]time.Time]
}

var certDesc = prometheus.NewDesc("lbplane_certificate_expiry_timestamp_seconds",
	"When a certificate lbplane holds expires, in Unix seconds: its CA (ca), its xDS and push API serving certificate (xds-serving), and the Envoy group certificates it keeps in Secrets (envoy-group/<group>).",
	[]string{"certificate"}, nil)

func (c *certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certDesc }

func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.list.Load()
	if f == nil {
		return
	}
	for name, t := range (*f)() {
		ch <- prometheus.MustNewConstMetric(certDesc, prometheus.GaugeValue, float64(t.Unix()), name)
	}
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
