package proxystats

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Reading an Envoy's stats must not hold back its config. Envoy answers admin requests on its main thread,
// the thread that also applies xDS, and a change arriving during an answer waits for it. What an answer
// costs grows with every cluster the Envoy has, not with what it returns: at 3,000 clusters /clusters took
// 130 ms and /stats/prometheus 160-330 ms even with usedonly and a filter that left 12 KB of it (Envoy walks
// every stat to filter), while /clusters?filter= for a few clusters costs next to nothing. So the poller
//   - reads everything (every cluster of lbplane's, and the stats status uses: usedonly, filter=) only as
//     often as keeps those reads within FullReadShare of the Envoy's main thread, going by how long the
//     last full read took (every Interval at small scale, and always for an Envoy with at most
//     MinPartialClusters clusters; never more than two Windows apart);
//   - in between, reads /clusters?filter= for the busy clusters alone: those whose endpoints' counters
//     moved, with requests in flight, or with an endpoint not taking traffic at the last read (hotClusters),
//     and those lbplane changed in the last two intervals (noteChanges), and carries every other cluster,
//     and every cluster's latency histogram and ejection counters, from the read before (carry);
//   - starts no request to an Envoy while a response is in flight to it or for Quiet after one (Busy), and
//     looks again between requests: a read steps aside for a push, for at most one Interval;
//   - starts a full read, which at 10,000 clusters holds the main thread for about a second, only once no
//     config was sent to the Envoy for twice as long as the last one took (fullQuiet): changes come in
//     bursts, and one that meets a full read waits for it. Until then, and for at most two Windows after
//     the last full read, the busy clusters are read instead;
//   - can read /clusters in slices of at most ClusterChunk clusters (admin's /clusters?filter=, a regular
//     expression over cluster names, made of the names' prefixes), off by default: slices hold the main
//     thread more often for the same total.
// What a partial read misses until the next full one: a cluster that starts taking traffic or whose idle
// endpoints change health, and every cluster's latency and which detector ejected an endpoint. Latency
// over a window in which no full read came is measured from the full read before (latencyBase), whose
// sample the poller keeps for that.

// latencyBase is the sample whose latency histograms a window from base to cur is measured against: base,
// unless both carry them from the same full read (there was none in the window); then the last sample with
// older ones, so that the latency covers from the full read before, more than the window.
func latencyBase(samples []*Sample, base, cur *Sample) *Sample {
	if base == cur || !base.StatsAt.Equal(cur.StatsAt) {
		return base
	}
	out := base
	for _, s := range samples {
		if s.StatsAt.Before(cur.StatsAt) {
			out = s
		}
	}
	return out
}

// DefaultFullReadShare is the share of an Envoy's main thread full reads may take.
const DefaultFullReadShare = 0.01

// DefaultMinPartialClusters: an Envoy with at most this many clusters is read in full every Interval. Such
// a read takes a few milliseconds of its main thread; between full reads, latency and an idle cluster's
// health would only show later, and on a busy machine its measured cost could put full reads far apart.
const DefaultMinPartialClusters = 256

func (p *Poller) minPartial() int {
	if p.MinPartialClusters <= 0 {
		return DefaultMinPartialClusters
	}
	return p.MinPartialClusters
}

// fullCost is cost when the read was full, 0 otherwise (see Poller.add).
func fullCost(full bool, cost time.Duration) time.Duration {
	if !full {
		return 0
	}
	return max(cost, time.Nanosecond)
}

// bodyLimit is the most lbplane reads of one answer from a group's Envoy: maxBody, or bodyPerResource for
// each cluster and endpoint lbplane serves the group when that is more.
func (p *Poller) bodyLimit(group string) int {
	if p.Clusters == nil {
		return maxBody
	}
	s := p.Clusters(group)
	if s == nil {
		return maxBody
	}
	p.chunksMu.Lock()
	defer p.chunksMu.Unlock()
	if c, ok := p.limits[group]; ok && c.state == s {
		return c.limit
	}
	n := len(s.Names(resource.ClusterType))
	for _, m := range s.Resources(resource.EndpointType) {
		if cla, ok := m.(*endpointv3.ClusterLoadAssignment); ok {
			for _, l := range cla.GetEndpoints() {
				n += len(l.GetLbEndpoints())
			}
		}
	}
	limit := max(maxBody, n*bodyPerResource)
	if p.limits == nil {
		p.limits = map[string]limitCache{}
	}
	p.limits[group] = limitCache{state: s, limit: limit}
	return limit
}

type limitCache struct {
	state *xdscache.State
	limit int
}

// maxHotFilter bounds the regular expression of a partial read.
const maxHotFilter = 8 << 10

func (p *Poller) fullShare() float64 {
	if p.FullReadShare <= 0 {
		return DefaultFullReadShare
	}
	return p.FullReadShare
}

// fullEvery is the time from one full read to the next, for a full read that took cost: cost/share, at
// least an Interval and at most two Windows. Half an Interval is taken off, so that a read due at the next
// tick is not put off by the ticker's jitter.
func (p *Poller) fullEvery(cost time.Duration) time.Duration {
	every := time.Duration(float64(cost) / p.fullShare())
	if p.Window > 0 {
		every = min(every, 2*p.Window)
	}
	return max(every, p.Interval) - p.Interval/2
}

// hotClusters names the clusters of cur that a partial read asks for: those with an endpoint whose counters
// moved since prev (or that prev did not have), with requests in flight, or not taking new traffic. With no
// prev (a first read), only the last two.
func hotClusters(prev, cur *Sample) []string {
	var hot []string
	for name, c := range cur.Clusters {
		var pc *Cluster
		if prev != nil {
			pc = prev.Clusters[name]
		}
		if pc == c {
			continue // carried: nothing moved
		}
		for _, h := range c.Hosts {
			busy := h.Active > 0 || len(h.Reasons) > 0
			if prev != nil {
				ph := findHost(pc, h.Address)
				// New connections count too: a TCP listener's endpoints take connections, not requests.
				busy = busy || ph == nil || ph.Total != h.Total || ph.Errors != h.Errors || ph.CxTotal != h.CxTotal
			}
			if busy {
				hot = append(hot, name)
				break
			}
		}
	}
	slices.Sort(hot)
	return hot
}

// keepUnchanged gives each cluster of cur that was read again exactly as prev had it prev's pointer, as
// partial reads do for the clusters they carry: the summaries keep the status of a cluster whose pointer
// did not change over the window (see SummaryCache), and a full read makes every cluster anew. Called after
// hotClusters, which tells a cluster read again from one carried by the pointer.
func keepUnchanged(prev, cur *Sample) {
	if prev == nil {
		return
	}
	for name, c := range cur.Clusters {
		if pc := prev.Clusters[name]; pc != nil && pc != c && sameCluster(pc, c) {
			cur.Clusters[name] = pc
		}
	}
}

// sameCluster tells whether two reads of a cluster say the same; a list or map read empty is the same as
// one not read.
func sameCluster(a, b *Cluster) bool {
	return slices.EqualFunc(a.Hosts, b.Hosts, func(x, y Host) bool {
		return x.Address == y.Address && slices.Equal(x.Reasons, y.Reasons) && x.Outlier == y.Outlier && x.Total == y.Total &&
			x.Errors == y.Errors && x.Active == y.Active && x.Weight == y.Weight && x.Priority == y.Priority &&
			x.CxTotal == y.CxTotal && x.CxConnectFail == y.CxConnectFail && x.Timeouts == y.Timeouts && x.CxActive == y.CxActive
	}) && slices.Equal(a.Latency, b.Latency) && maps.Equal(a.Ejections, b.Ejections) && a.Counters == b.Counters
}

// hotFilter is the /clusters filter for the clusters in hot, as many of them as fit in maxHotFilter, first
// come first; "" for none (no request). The ones left out wait for the next full read: a partial read
// never grows into a full one.
func hotFilter(hot []string) string {
	names := namesPattern(hot)
	if names == "" {
		return ""
	}
	return "^" + names + "$"
}

// namesPattern matches any of names, as many of them as fit in maxHotFilter, first come first; "" for none.
func namesPattern(names []string) string {
	var quoted []string
	n := 0
	for _, name := range names {
		q := regexp.QuoteMeta(name)
		if n+len(q)+1 > maxHotFilter {
			break
		}
		quoted = append(quoted, q)
		n += len(q) + 1
	}
	if len(quoted) == 0 {
		return ""
	}
	return "(?:" + strings.Join(quoted, "|") + ")"
}

// carry is a partial read at at: the clusters read, with prev's latency, ejection and request counters,
// every other cluster of prev as it was, and the request counters read of the watched clusters (counters).
func carry(prev *Sample, at time.Time, read map[string]*Cluster, counters map[string]*Cluster) *Sample {
	s := &Sample{At: at, StatsAt: prev.StatsAt, Clusters: maps.Clone(prev.Clusters), partial: make(map[string]bool, len(read))}
	for name, c := range read {
		s.partial[name] = true
		if pc := prev.Clusters[name]; pc != nil {
			c.Latency, c.Ejections, c.Counters = pc.Latency, pc.Ejections, pc.Counters
		}
		s.Clusters[name] = c
	}
	for name, rc := range counters {
		c := s.Clusters[name]
		if c == nil {
			continue // not a cluster of this Envoy's (any more)
		}
		if c == prev.Clusters[name] {
			cp := *c // prev's samples are never changed
			c = &cp
			s.Clusters[name] = c
		}
		c.Counters = rc.Counters
	}
	return s
}

// countersFilter is the /stats/prometheus filter for the request counters (Counters) of the clusters in
// watched, as many as fit in maxHotFilter; "" for none.
func countersFilter(watched []string) string {
	names := namesPattern(watched)
	if names == "" {
		return ""
	}
	return `^cluster\.` + names + `\.(?:` + countersPattern + `)$`
}

// DefaultClusterChunk is how many clusters one /clusters request asks for at most.
const DefaultClusterChunk = 500

// fullQuiet is how long config must have been quiet for a full read that took cost: twice as long, at
// least Quiet, at most maxFullQuiet.
func fullQuiet(cost time.Duration) time.Duration {
	return min(max(2*cost, DefaultQuiet), maxFullQuiet)
}

// maxFullQuiet bounds fullQuiet: a full read that costs more would otherwise wait for a quiet that changes
// every few seconds never leave.
const maxFullQuiet = 5 * time.Second

// putOffFull tells whether a full read due now gives way to a partial one: config was sent to the node
// within fullQuiet of the last full read's cost, and that read is less than two Windows old.
func (p *Poller) putOffFull(node string, fullAt time.Time, cost time.Duration, now time.Time) bool {
	if cost <= 0 || fullAt.IsZero() || p.Window <= 0 || now.Sub(fullAt) >= 2*p.Window {
		return false
	}
	return p.busy(node, fullQuiet(cost))
}

// DefaultQuiet is how long after a push to an Envoy its stats are not read.
const DefaultQuiet = 250 * time.Millisecond

// filters returns the /clusters filters (regular expressions) that together cover the clusters of a
// group's state, each at most chunk clusters; nil when the poller does not know the group's clusters
// (then one request asks for all). They are computed once per state.
func (p *Poller) filters(group string) []string {
	if p.Clusters == nil || p.ClusterChunk < 0 {
		return nil
	}
	s := p.Clusters(group)
	if s == nil {
		return nil
	}
	p.chunksMu.Lock()
	defer p.chunksMu.Unlock()
	if c, ok := p.chunks[group]; ok && c.state == s {
		return c.filters
	}
	chunk := p.ClusterChunk
	if chunk <= 0 {
		chunk = DefaultClusterChunk
	}
	f := prefixFilters(s.Names(resource.ClusterType), chunk)
	if p.chunks == nil {
		p.chunks = map[string]chunkCache{}
	}
	p.chunks[group] = chunkCache{state: s, filters: f}
	return f
}

type chunkCache struct {
	state   *xdscache.State
	filters []string
}

// prefixFilters splits sorted names into groups of at most max names that share prefixes, and returns one
// anchored regular expression per group: a choice of the groups' longest common prefixes (a group of one
// name, or a name that is a prefix of others, matches exactly, with $). Any name with one of the prefixes matches, so a cluster added since the
// names were taken is read when it shares a prefix, and otherwise at the next state.
func prefixFilters(names []string, max int) []string {
	if len(names) == 0 {
		return []string{"^$"} // nothing of lbplane's: ask for nothing
	}
	var out []string
	var cur []string
	n := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, "^(?:"+strings.Join(cur, "|")+")")
			cur, n = nil, 0
		}
	}
	add := func(pattern string, count int) {
		if n+count > max {
			flush()
		}
		cur = append(cur, pattern)
		n += count
	}
	var split func(names []string, depth int)
	split = func(names []string, depth int) {
		// names share their first depth bytes.
		prefix := names[0][:depth]
		if len(names) == 1 {
			add(regexp.QuoteMeta(names[0])+"$", 1)
			return
		}
		if len(names) <= max {
			// Sorted: the first and the last share what all of them share.
			first, last := names[0], names[len(names)-1]
			n := depth
			for n < len(first) && n < len(last) && first[n] == last[n] {
				n++
			}
			add(regexp.QuoteMeta(first[:n]), len(names))
			return
		}
		i := 0
		if len(names[0]) == depth {
			add(regexp.QuoteMeta(prefix)+"$", 1)
			i = 1
		}
		for i < len(names) {
			j := i + 1
			for j < len(names) && names[j][depth] == names[i][depth] {
				j++
			}
			split(names[i:j], depth+1)
			i = j
		}
	}
	split(names, 0)
	flush()
	return out
}

// clustersURL is the /clusters request for one filter ("" for all).
func clustersURL(base, filter string) string {
	u := base + "/clusters?format=json"
	if filter != "" {
		u += "&filter=" + url.QueryEscape(filter)
	}
	return u
}

// errPutOff: the read was not made, as config was sent to the proxy lately; the next interval's read makes
// it.
var errPutOff = errors.New("put off: config was sent to the proxy lately")

// overdueAfter is how old a proxy's last read may be before the next is no longer put off for config sent
// lately: one and a half Intervals, so that with config sent at every tick a proxy is still read every
// other Interval, within the three Intervals after which its view counts as stale (see fresh).
func (p *Poller) overdueAfter() time.Duration { return p.Interval + p.Interval/2 }

// busy is Busy, false when unset.
func (p *Poller) busy(node string, quiet time.Duration) bool {
	return p.Busy != nil && p.Busy(node, quiet)
}

// waitWhileBusy waits while config is on its way to the Envoy or was sent within quiet (Busy), at most
// until deadline; it returns false when ctx ended.
func (p *Poller) waitWhileBusy(ctx context.Context, node string, quiet time.Duration, deadline time.Time) bool {
	for p.busy(node, quiet) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return ctx.Err() == nil
}

// paceState is the poller's part that only pace.go uses.
type paceState struct {
	chunksMu sync.Mutex
	chunks   map[string]chunkCache
	// changes are, per group, the last state seen and when each of its clusters last changed in it.
	changes map[string]*groupChanges
	limits  map[string]limitCache
}

type groupChanges struct {
	state   *xdscache.State
	changed map[string]time.Time
}

// noteChanges compares a group's state with the one seen last, and keeps when each cluster whose cluster
// or endpoint resources changed did (for a Window): a partial read asks for them too, as a changed cluster
// is where traffic and health move, and what a rollout judges.
func (p *Poller) noteChanges(group string, now time.Time) {
	if p.Clusters == nil {
		return
	}
	s := p.Clusters(group)
	p.chunksMu.Lock()
	defer p.chunksMu.Unlock()
	if p.changes == nil {
		p.changes = map[string]*groupChanges{}
	}
	g := p.changes[group]
	if g == nil {
		g = &groupChanges{changed: map[string]time.Time{}}
		p.changes[group] = g
	}
	if s == g.state {
		return
	}
	if g.state != nil && s != nil {
		for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
			for _, name := range xdscache.Changed(g.state, s, typ) {
				if _, ok := s.ResourceVersion(typ, name); ok {
					g.changed[name] = now
				}
			}
		}
	}
	g.state = s
	for name, at := range g.changed {
		if now.Sub(at) > p.Window {
			delete(g.changed, name)
		}
	}
}

// changedSince names a group's clusters that changed at or after since.
func (p *Poller) changedSince(group string, since time.Time) []string {
	p.chunksMu.Lock()
	defer p.chunksMu.Unlock()
	var out []string
	if g := p.changes[group]; g != nil {
		for name, at := range g.changed {
			if !at.Before(since) {
				out = append(out, name)
			}
		}
	}
	return out
}
