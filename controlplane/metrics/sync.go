package metrics

import (
	"bufio"
	"cmp"
	"io"
	"iter"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ProxySync is one connected Envoy's sync state, as lbctl status shows it: SYNCED, STALE or NACKED.
type ProxySync struct {
	Node, Group, State string
}

// DefaultMaxProxySeries bounds lbplane_proxy_sync: one replica reports at most this many Envoys one by one.
const DefaultMaxProxySeries = 1000

// Sync states, as apiwire names them (metrics is below apiwire and cannot import it).
const (
	stateSynced = "SYNCED"
	stateStale  = "STALE"
	stateNacked = "NACKED"
)

// ProxiesSync sets the function that lists this replica's Envoys at each scrape, for lbplane_proxy_sync
// (one series per Envoy, at most max of them: the ones not SYNCED first) and lbplane_proxy_sync_omitted
// (how many were left out). max <= 0 means DefaultMaxProxySeries.
func (m *Metrics) ProxiesSync(list func() []ProxySync, max int) {
	if m == nil {
		return
	}
	if max <= 0 {
		max = DefaultMaxProxySeries
	}
	m.sync.max.Store(int64(max))
	m.sync.list.Store(&list)
}

type syncCollector struct {
	list atomic.Pointer[func() []ProxySync]
	max  atomic.Int64
}

var (
	proxySyncDesc = prometheus.NewDesc("lbplane_proxy_sync",
		"Always 1: one series per Envoy connected to this replica, labelled with its node id, proxy group and sync state (SYNCED: it acknowledged the current config; STALE: it has not yet; NACKED: it rejected some of it). At most --metrics-max-proxies Envoys, those not SYNCED first; lbplane_proxy_sync_omitted counts the others.",
		[]string{"node", "group", "state"}, nil)
	proxySyncOmittedDesc = prometheus.NewDesc("lbplane_proxy_sync_omitted",
		"Envoys connected to this replica left out of lbplane_proxy_sync by its bound (--metrics-max-proxies), by sync state.",
		[]string{"state"}, nil)
)

func (c *syncCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- proxySyncDesc
	ch <- proxySyncOmittedDesc
}

// rank orders states for the bound: a NACKED Envoy is reported before a STALE one, and both before the
// SYNCED ones, so that the series alerts look at are the ones kept.
func rank(state string) int {
	switch state {
	case stateNacked:
		return 0
	case stateStale:
		return 1
	case stateSynced:
		return 3
	}
	return 2
}

func (c *syncCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.list.Load()
	if f == nil {
		return
	}
	// An Envoy with two streams (state of the world and delta) is one Envoy: its worst state counts.
	worst := map[string]ProxySync{}
	for _, p := range (*f)() {
		if p.Node == "" {
			continue
		}
		if w, ok := worst[p.Node]; !ok || rank(p.State) < rank(w.State) {
			worst[p.Node] = p
		}
	}
	list := make([]ProxySync, 0, len(worst))
	for _, p := range worst {
		list = append(list, p)
	}
	slices.SortFunc(list, func(a, b ProxySync) int {
		return cmp.Or(cmp.Compare(rank(a.State), rank(b.State)), cmp.Compare(a.Node, b.Node))
	})
	limit := min(int(c.max.Load()), len(list))
	for _, p := range list[:limit] {
		ch <- prometheus.MustNewConstMetric(proxySyncDesc, prometheus.GaugeValue, 1, p.Node, p.Group, p.State)
	}
	omitted := map[string]int{stateSynced: 0, stateStale: 0, stateNacked: 0}
	for _, p := range list[limit:] {
		omitted[p.State]++
	}
	for state, n := range omitted {
		ch <- prometheus.MustNewConstMetric(proxySyncOmittedDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// ClusterInfo says which policy and backend an Envoy cluster was built from (the IR's source), for
// lbplane_cluster_info: alerts and dashboards join Envoy's per-cluster stats with it to add up a policy's
// clusters, and nothing has to take the cluster's name apart.
type ClusterInfo struct {
	Cluster         string
	Namespace, Name string
	// Backend is empty for a route's session cluster, which merges the route's backends.
	Backend string
}

// Clusters sets the function that lists the clusters of every proxy group at each scrape, one at a time,
// for lbplane_cluster_info: see writeClusters.
func (m *Metrics) Clusters(list func() iter.Seq[ClusterInfo]) {
	if m != nil {
		m.clusters.Store(&list)
	}
}

const clusterInfoHelp = "Always 1: one series per Envoy cluster lbplane serves, labelled with its name as Envoy's stats carry it (envoy_cluster_name) and the policy (namespace, name) and backend it was built from (backend is empty for a route's session cluster). Join Envoy's envoy_cluster_* series on envoy_cluster_name to add them up by policy."

// writeClusters writes lbplane_cluster_info in the text format as clusters lists them, one series per
// cluster (the first row of a cluster that two proxy groups serve), each written as it comes: only the
// names written are kept, to leave out a second row.
func writeClusters(w io.Writer, clusters iter.Seq[ClusterInfo]) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	seen := map[string]struct{}{}
	var line []byte
	for ci := range clusters {
		if _, dup := seen[ci.Cluster]; dup {
			continue
		}
		if len(seen) == 0 {
			bw.WriteString(familyHeader("lbplane_cluster_info", clusterInfoHelp))
		}
		seen[ci.Cluster] = struct{}{}
		line = sample(line[:0], "lbplane_cluster_info", 1, "backend", ci.Backend, "envoy_cluster_name", ci.Cluster, "name", ci.Name, "namespace", ci.Namespace)
		bw.Write(line)
	}
	return bw.Flush()
}
