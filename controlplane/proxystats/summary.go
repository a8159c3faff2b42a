package proxystats

import (
	"cmp"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// MaxEjectedListed bounds the endpoints a backend's status lists by name.
const MaxEjectedListed = 20

// MaxBusiestListed is how many endpoints a backend's perEndpoint lists by load; the ones not taking
// traffic (at most MaxEjectedListed) come on top.
const MaxBusiestListed = 10

// History is what was read from one Envoy, oldest sample first.
type History struct {
	Group   string
	Node    string
	Samples []*Sample
}

// Health is, per proxy group and cluster name, what the group's Envoys report.
type Health map[string]map[string]v1alpha1.BackendStatus

// Backend returns one cluster's status, named name.
func (h Health) Backend(group, cluster, name string) (v1alpha1.BackendStatus, bool) {
	b, ok := h[group][cluster]
	b.Name = name
	return b, ok
}

type acc struct {
	// nodes are the Envoys (node ids) that report the cluster.
	nodes     map[string]bool
	requests  uint64
	errors    uint64
	latency   []Bucket
	windowSec float64
	eps       map[string]*endpointAcc
	// counters are the clusters' counters over the window (Counters), summed over the Envoys; read tells
	// whether some Envoy's window covered them.
	counters Counters
	read     bool
}

// endpointAcc sums one endpoint over the proxies.
type endpointAcc struct {
	weight           uint32
	priority         uint32
	requests, errors uint64
	// rate is requests per second over each proxy's last interval, summed.
	rate   float64
	active uint64
	// cxActive is open connections at the last reading; cx, cxFail and timeouts are over the window.
	cxActive, cx, cxFail, timeouts uint64
	reasons                        []string
	// joined is the latest time an Envoy started the endpoint's slow-start ramp, as far as the reads show
	// (Sample.Joined); zero when none is known.
	joined time.Time
	// on are the nodes that have the endpoint, ejectedBy those of them that take no new traffic to it.
	on, ejectedBy map[string]bool
}

// counted is the view status counts: ejected when more than half of the Envoys that have the endpoint take
// no traffic to it. One Envoy (or one client certificate of the group serving made-up stats) cannot take an
// endpoint out for the others; what it says shows in its own row and as a mismatch.
func (ep *endpointAcc) counted() bool { return 2*len(ep.ejectedBy) > len(ep.on) }

// mismatched tells whether the Envoys that have the endpoint disagree on it.
func (ep *endpointAcc) mismatched() bool {
	return len(ep.ejectedBy) > 0 && len(ep.ejectedBy) < len(ep.on)
}

// MaxNodesListed bounds the node ids listed per endpoint.
const MaxNodesListed = 16

// MaxProxiesListed bounds a backend's perProxy rows.
const MaxProxiesListed = 32

// Expected is what the traffic model predicts for one endpoint of a backend: its share of the backend's
// requests, and where it sits (zone, priority level, backup).
type Expected struct {
	Share    float64
	Zone     string
	Priority int
	Backup   bool
	// Caveats are what the prediction of the endpoint's backend leaves out (trafficmodel.Caveats), the
	// same for each of its endpoints.
	Caveats []string
	// Warming, set when the backend has slow start, is the part of its weight Envoy gives an endpoint whose
	// ramp started age ago (the built cluster's trafficmodel.Ramp.Fraction): 1 once the window has passed.
	Warming func(age time.Duration) float64
}

// ExpectFunc predicts every endpoint ("address:port") of a group's cluster from what was built, with the
// endpoints in down (address: reason) taking no traffic; nil when the cluster is not known.
type ExpectFunc func(group, cluster string, down map[string]string) map[string]Expected

// Summarize sums each Envoy's last window up per group and cluster. Health is per Envoy (node id; the
// streams of one node are one view): each Envoy's ejections are in its own perProxy row, and an endpoint
// counts as ejected only when more than half of the Envoys that have it take no new traffic to it; the
// endpoints they disagree on are listed as mismatches. Requests, errors and latency are over the window (or
// since the oldest sample, when there is less history), summed over the Envoys.
func Summarize(histories []History, window time.Duration) Health {
	return SummarizeExpected(histories, window, nil)
}

// SummarizeExpected is Summarize with each endpoint's expected share from expect (see perEndpoint).
func SummarizeExpected(histories []History, window time.Duration, expect ExpectFunc) Health {
	return SummarizeCached(histories, window, expect, nil)
}

// SummaryCache keeps, from one SummarizeCached to the next, the status of each cluster computed from the
// same *Cluster in each Envoy's last sample, the one before, the window's first and the latency base (see
// latencyBase): partial reads carry the clusters they do not read by pointer, and the poller keeps the
// pointer of a cluster read again unchanged. Such a status depends only on those clusters and the expected
// shares, as long as the cluster did not move between the last two reads (an endpoint's rate is over the
// time between them); its WindowSeconds is set anew. So at 10,000 clusters of which a few take traffic, a
// summary costs what moved. The zero value is ready; one cache serves one sequence of summaries of the
// same Envoys, from one goroutine at a time.
type SummaryCache struct {
	gen uint64
	m   map[clusterKey]*kept
	// Kept and Computed count the clusters of the last summary whose status was kept, and computed.
	Kept, Computed int
	// Steps' Yield, when set, is called every yieldEvery clusters a summary goes through, and may wait:
	// work that can wait (a summary) lets a config change have the machine.
	Steps
}

// yieldEvery is how many clusters a summary goes through between two calls of Yield: at 10,000 clusters
// a summary takes tens of milliseconds, about a millisecond per yieldEvery.
const yieldEvery = 512

// Steps calls Yield every yieldEvery steps (never when Yield is nil): long work over every cluster (a
// summary, the health history) counts a step per cluster and lets a config change go first. One goroutine
// at a time.
type Steps struct {
	Yield func()
	n     int
}

// Step counts one cluster gone through, calling Yield every yieldEvery.
func (s *Steps) Step() {
	if s.Yield == nil {
		return
	}
	if s.n++; s.n%yieldEvery == 0 {
		s.Yield()
	}
}

type clusterKey struct{ group, name string }

// kept is one cluster's status with what it was computed from; next, nextWindow and timeless are gathered
// for the current summary.
type kept struct {
	gen        uint64
	curs, next []*Cluster
	nextWindow float64
	timeless   bool
	valid      bool
	reuse      bool
	down       map[string]string
	exp        map[string]Expected
	out        v1alpha1.BackendStatus
}

// mark marks the clusters of c whose kept status holds for histories, and forgets those no Envoy
// reports any more.
func (c *SummaryCache) mark(histories []History, window time.Duration, expect ExpectFunc) {
	c.gen++
	if c.m == nil {
		c.m = map[clusterKey]*kept{}
	}
	for _, h := range histories {
		if len(h.Samples) == 0 {
			continue
		}
		cur, base := windowOf(h.Samples, window)
		lat := latencyBase(h.Samples, base, cur)
		var last *Sample
		if n := len(h.Samples); n > 1 {
			last = h.Samples[n-2]
		}
		for name, cl := range cur.Clusters {
			c.Step()
			k := clusterKey{h.Group, name}
			e := c.m[k]
			if e == nil {
				e = &kept{}
				c.m[k] = e
			}
			if e.gen != c.gen {
				e.gen, e.next, e.timeless, e.nextWindow = c.gen, e.next[:0], true, 0
			}
			var lc, bc *Cluster
			if last != nil {
				lc = last.Clusters[name]
			}
			if base != cur {
				bc = base.Clusters[name]
			}
			e.next = append(e.next, cl, lc, bc, lat.Clusters[name])
			// The time between the last two reads counts (an endpoint's rate) unless the cluster did not move.
			e.timeless = e.timeless && (lc == nil || lc == cl)
			e.nextWindow = max(e.nextWindow, cur.At.Sub(base.At).Seconds())
		}
	}
	c.Kept, c.Computed = 0, 0
	for k, e := range c.m {
		c.Step()
		if e.gen != c.gen {
			delete(c.m, k)
			continue
		}
		e.reuse = e.valid && e.timeless && slices.Equal(e.curs, e.next)
		if e.reuse && expect != nil {
			exp := expect(k.group, k.name, e.down)
			e.reuse = reflect.ValueOf(exp).UnsafePointer() == reflect.ValueOf(e.exp).UnsafePointer()
		}
		if e.reuse {
			c.Kept++
		} else {
			c.Computed++
		}
	}
}

// windowOf returns a history's last sample and the first within window of it.
func windowOf(samples []*Sample, window time.Duration) (cur, base *Sample) {
	cur = samples[len(samples)-1]
	base = cur
	for _, s := range samples {
		if !s.At.Before(cur.At.Add(-window)) {
			base = s
			break
		}
	}
	return cur, base
}

// SummarizeCached is SummarizeExpected with the status of each cluster whose samples and expected shares
// are those it was last computed from kept in cache (nil: none kept).
func SummarizeCached(histories []History, window time.Duration, expect ExpectFunc, cache *SummaryCache) Health {
	if cache != nil {
		cache.mark(histories, window, expect)
	}
	accs := map[string]map[string]*acc{}
	// now is the last read's time: how far into its slow-start window an endpoint is, as the reads show it.
	var now time.Time
	for _, h := range histories {
		if n := len(h.Samples); n > 0 && h.Samples[n-1].At.After(now) {
			now = h.Samples[n-1].At
		}
	}
	for _, h := range histories {
		if len(h.Samples) == 0 {
			continue
		}
		cur, base := windowOf(h.Samples, window)
		latBase := latencyBase(h.Samples, base, cur)
		g := accs[h.Group]
		if g == nil {
			g = map[string]*acc{}
			accs[h.Group] = g
		}
		for name, c := range cur.Clusters {
			if cache != nil {
				if cache.Step(); cache.m[clusterKey{h.Group, name}].reuse {
					continue
				}
			}
			a := g[name]
			if a == nil {
				a = &acc{nodes: map[string]bool{}, eps: map[string]*endpointAcc{}}
				g[name] = a
			}
			a.nodes[h.Node] = true
			var bc, lc *Cluster // the window's base and the sample before cur
			if n := len(h.Samples); n > 1 {
				lc = h.Samples[n-2].Clusters[name]
			}
			var lastSec float64
			if n := len(h.Samples); n > 1 {
				lastSec = cur.At.Sub(h.Samples[n-2].At).Seconds()
			}
			if base != cur {
				bc = base.Clusters[name]
				a.windowSec = max(a.windowSec, cur.At.Sub(base.At).Seconds())
			}
			for _, host := range c.Hosts {
				ep := a.eps[host.Address]
				if ep == nil {
					ep = &endpointAcc{weight: host.Weight, priority: host.Priority, on: map[string]bool{}, ejectedBy: map[string]bool{}}
					a.eps[host.Address] = ep
				}
				ep.on[h.Node] = true
				if t := cur.Joined[name][host.Address]; t.After(ep.joined) {
					ep.joined = t
				}
				ep.weight, ep.priority = max(ep.weight, host.Weight), min(ep.priority, host.Priority)
				ep.active += host.Active
				ep.cxActive += host.CxActive
				if len(host.Reasons) > 0 {
					ep.ejectedBy[h.Node] = true
					for _, r := range host.Reasons {
						if !slices.Contains(ep.reasons, r) {
							ep.reasons = append(ep.reasons, r)
						}
					}
				}
				if lh := findHost(lc, host.Address); lh != nil && lastSec > 0 && lh.Total <= host.Total {
					ep.rate += float64(host.Total-lh.Total) / lastSec
				}
				if base == cur {
					continue
				}
				var b0 Host
				if bh := findHost(bc, host.Address); bh != nil && bh.Total <= host.Total {
					b0 = *bh
				}
				a.requests += host.Total - b0.Total
				a.errors += sub(host.Errors, b0.Errors)
				ep.requests += host.Total - b0.Total
				ep.errors += sub(host.Errors, b0.Errors)
				ep.cx += sub(host.CxTotal, b0.CxTotal)
				ep.cxFail += sub(host.CxConnectFail, b0.CxConnectFail)
				ep.timeouts += sub(host.Timeouts, b0.Timeouts)
			}
			if base != cur {
				a.latency = AddBuckets(a.latency, deltaBuckets(c.Latency, latBase.Clusters[name]))
				a.counters = a.counters.plus(c.Counters.since(latBase.Clusters[name]))
				a.read = true
			}
		}
	}
	out := Health{}
	for group, g := range accs {
		out[group] = map[string]v1alpha1.BackendStatus{}
		for name, a := range g {
			b := v1alpha1.BackendStatus{Name: name, Proxies: int32(len(a.nodes)), Requests: int64(a.requests), Errors: int64(a.errors),
				WindowSeconds: int32(math.Round(a.windowSec))}
			b.Endpoints.Total = int32(len(a.eps))
			for addr, ep := range a.eps {
				if ep.counted() {
					b.Endpoints.Ejected++
					b.Ejected = append(b.Ejected, v1alpha1.EjectedEndpoint{Address: addr, Reasons: ep.reasons,
						Proxies: int32(len(ep.ejectedBy)), Nodes: sortedNodes(ep.ejectedBy, nil)})
				}
				if ep.mismatched() {
					b.Endpoints.Mismatched++
					b.Mismatches = append(b.Mismatches, v1alpha1.EndpointMismatch{Address: addr, Reasons: ep.reasons, Counted: ep.counted(),
						EjectedOn: sortedNodes(ep.ejectedBy, nil), HealthyOn: sortedNodes(ep.on, ep.ejectedBy)})
				}
			}
			b.Endpoints.Healthy = b.Endpoints.Total - b.Endpoints.Ejected
			slices.SortFunc(b.Ejected, func(x, y v1alpha1.EjectedEndpoint) int { return strings.Compare(x.Address, y.Address) })
			slices.SortFunc(b.Mismatches, func(x, y v1alpha1.EndpointMismatch) int { return strings.Compare(x.Address, y.Address) })
			b.Ejected = b.Ejected[:min(len(b.Ejected), MaxEjectedListed)]
			b.Mismatches = b.Mismatches[:min(len(b.Mismatches), MaxEjectedListed)]
			b.PerProxy = perProxy(a)
			b.LatencyP99Ms = QuantileMs(a.latency, 0.99)
			traffic(&b, a)
			var exp map[string]Expected
			var down map[string]string
			if expect != nil {
				down = map[string]string{}
				for addr, ep := range a.eps {
					if ep.counted() {
						down[addr] = strings.Join(ep.reasons, ", ")
					}
				}
				exp = expect(group, name, down)
			}
			b.PerEndpoint, b.Skew = perEndpoint(a, exp, now)
			for _, e := range exp {
				b.ExpectedCaveats = e.Caveats
				break
			}
			out[group][name] = b
			if cache != nil {
				e := cache.m[clusterKey{group, name}]
				e.curs, e.next = e.next, e.curs
				// A warming endpoint's percentage moves with time alone: its status is computed anew each time.
				e.valid = e.timeless && !warming(b.PerEndpoint)
				e.down, e.exp, e.out = nil, exp, b
				if expect != nil {
					e.down = down
				}
			}
		}
	}
	if cache != nil {
		for k, e := range cache.m {
			cache.Step()
			if !e.reuse {
				continue
			}
			if out[k.group] == nil {
				out[k.group] = map[string]v1alpha1.BackendStatus{}
			}
			b := e.out
			b.WindowSeconds = int32(math.Round(e.nextWindow)) // the window moves; nothing in it did
			out[k.group][k.name] = b
		}
	}
	return out
}

// sortedNodes lists the node ids in m and not in except, sorted, at most MaxNodesListed.
func sortedNodes(m, except map[string]bool) []string {
	out := []string{}
	for n := range m {
		if !except[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), MaxNodesListed)]
}

// perProxy is each Envoy's own counts of a backend's endpoints, those that differ from the counted view
// first, then by node id.
func perProxy(a *acc) []v1alpha1.ProxyBackendHealth {
	out := make([]v1alpha1.ProxyBackendHealth, 0, len(a.nodes))
	for node := range a.nodes {
		r := v1alpha1.ProxyBackendHealth{Node: node}
		for _, ep := range a.eps {
			if !ep.on[node] {
				continue
			}
			r.Endpoints.Total++
			if ep.ejectedBy[node] {
				r.Endpoints.Ejected++
			}
			if ep.mismatched() {
				r.Endpoints.Mismatched++
			}
			r.Mismatch = r.Mismatch || ep.ejectedBy[node] != ep.counted()
		}
		r.Endpoints.Healthy = r.Endpoints.Total - r.Endpoints.Ejected
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y v1alpha1.ProxyBackendHealth) int {
		if x.Mismatch != y.Mismatch {
			if x.Mismatch {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Node, y.Node)
	})
	return out[:min(len(out), MaxProxiesListed)]
}

func sub(a, b uint64) uint64 {
	if b > a {
		return a // the counter restarted (a new Envoy, or the host left and came back)
	}
	return a - b
}

// deltaBuckets is cur minus what base had of the same cluster; a counter that went back means Envoy
// restarted, and then all of cur counts.
func deltaBuckets(cur []Bucket, base *Cluster) []Bucket {
	out := slices.Clone(cur)
	if base == nil || len(base.Latency) != len(cur) {
		return out
	}
	for i := range out {
		if base.Latency[i].UpperMs != out[i].UpperMs || base.Latency[i].Count > out[i].Count {
			return slices.Clone(cur)
		}
		out[i].Count -= base.Latency[i].Count
	}
	return out
}

// AddBuckets merges two cumulative histograms (two Envoys', two clusters'); it may return a or b itself.
func AddBuckets(a, b []Bucket) []Bucket {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	m := map[float64]uint64{}
	for _, x := range a {
		m[x.UpperMs] += x.Count
	}
	for _, x := range b {
		m[x.UpperMs] += x.Count
	}
	out := make([]Bucket, 0, len(m))
	for ub, n := range m {
		out = append(out, Bucket{UpperMs: ub, Count: n})
	}
	slices.SortFunc(out, func(x, y Bucket) int { return cmp.Compare(x.UpperMs, y.UpperMs) })
	// Envoys with different bucket bounds would make the merged counts non-cumulative; keep them monotone.
	for i := 1; i < len(out); i++ {
		out[i].Count = max(out[i].Count, out[i-1].Count)
	}
	return out
}

// QuantileMs estimates the q-quantile of cumulative buckets in milliseconds (linear within a bucket, as
// Prometheus's histogram_quantile does), rounded as a person reads it (0.1 ms under 10 ms, 1 ms under a
// second, 10 ms above); nil without requests. Past the last finite bound (an hour by Envoy's default
// buckets) it is that bound: the quantile is at least that.
func QuantileMs(bs []Bucket, q float64) *float64 {
	if len(bs) == 0 || bs[len(bs)-1].Count == 0 {
		return nil
	}
	rank := q * float64(bs[len(bs)-1].Count)
	lower, below := 0.0, uint64(0)
	for _, b := range bs {
		if float64(b.Count) >= rank {
			if math.IsInf(b.UpperMs, 1) {
				return ptr(roundMs(lower))
			}
			ms := b.UpperMs
			if b.Count > below {
				ms = lower + (b.UpperMs-lower)*(rank-float64(below))/float64(b.Count-below)
			}
			return ptr(roundMs(ms))
		}
		lower, below = b.UpperMs, b.Count
	}
	return nil
}

func roundMs(ms float64) float64 {
	switch {
	case ms < 10:
		return round(ms, 1)
	case ms < 1000:
		return round(ms, 0)
	default:
		return round(ms, -1)
	}
}

// round rounds x to digits decimals (negative: tens, ...), dividing last so that the result prints as the
// decimal it stands for.
func round(x float64, digits int) float64 {
	if digits < 0 {
		p := math.Pow10(-digits)
		return math.Round(x/p) * p
	}
	p := math.Pow10(digits)
	return math.Round(x*p) / p
}

// fraction is a share rounded to four decimals (0.01 %), so that a status does not change with noise.
func fraction(x float64) float64 { return round(x, 4) }

func ptr[T any](v T) *T { return &v }

// perEndpoint lists a backend's endpoints (the busiest MaxBusiestListed, and those not taking traffic or
// warming up, at most MaxEjectedListed of each) with their expected and observed shares, and the skew of
// the spread.
//
// An endpoint warms up while it is inside its backend's slow-start window at now: its warmingPercent is
// what exp's Warming (the built cluster's ramp) gives for the time since the latest ramp start an Envoy
// reported for it (the lowest percentage over the Envoys).
//
// The expected share is the traffic model's (exp: what was built, with the endpoints
// counted as ejected down: priorities, overprovisioning, zone weights, the algorithm's spread). Without it,
// it is by weight over the endpoints not counted as ejected at the lowest priority that has any. The
// skew is the coefficient of variation of observed/expected over the endpoints expected to get traffic:
// with equal shares, that of the per-endpoint share.
func perEndpoint(a *acc, exp map[string]Expected, now time.Time) ([]v1alpha1.EndpointStatus, *float64) {
	prio, found := uint32(math.MaxUint32), false
	for _, ep := range a.eps {
		if !ep.counted() {
			prio, found = min(prio, ep.priority), true
		}
	}
	var weights uint64
	for _, ep := range a.eps {
		if found && !ep.counted() && ep.priority == prio {
			weights += uint64(max(ep.weight, 1))
		}
	}
	byWeight := func(ep *endpointAcc) float64 {
		if weights == 0 || ep.counted() || ep.priority != prio {
			return 0
		}
		return float64(max(ep.weight, 1)) / float64(weights)
	}
	modelled := exp != nil
	for addr := range a.eps {
		_, ok := exp[addr]
		modelled = modelled && ok
	}
	expected := func(addr string) float64 {
		if modelled {
			return exp[addr].Share
		}
		return byWeight(a.eps[addr])
	}
	var skew *float64
	if a.requests > 0 {
		var ratios []float64
		for addr, ep := range a.eps {
			if e := expected(addr); e > 0 {
				ratios = append(ratios, float64(ep.requests)/float64(a.requests)/e)
			}
		}
		if len(ratios) > 1 {
			skew = ptr(round(cv(ratios), 2))
		}
	}
	addrs := make([]string, 0, len(a.eps))
	warm := map[string]int32{}
	for addr, ep := range a.eps {
		addrs = append(addrs, addr)
		if e := exp[addr]; !ep.joined.IsZero() && e.Warming != nil {
			if f := e.Warming(now.Sub(ep.joined)); f < 1 {
				warm[addr] = int32(math.Floor(100 * f))
			}
		}
	}
	// Not taking traffic first, then warming up, then by requests, then by address, so that the list is
	// stable.
	slices.SortFunc(addrs, func(x, y string) int {
		ex, ey := a.eps[x], a.eps[y]
		if ux, uy := len(ex.ejectedBy) > 0, len(ey.ejectedBy) > 0; ux != uy {
			if ux {
				return -1
			}
			return 1
		}
		_, wx := warm[x]
		if _, wy := warm[y]; wx != wy {
			if wx {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(ey.requests, ex.requests); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	var out []v1alpha1.EndpointStatus
	unhealthy, warmingUp, busiest := 0, 0, 0
	for _, addr := range addrs {
		ep := a.eps[addr]
		_, warms := warm[addr]
		switch {
		case len(ep.ejectedBy) > 0 && unhealthy < MaxEjectedListed:
			unhealthy++
		case len(ep.ejectedBy) == 0 && warms && warmingUp < MaxEjectedListed:
			warmingUp++
		case len(ep.ejectedBy) == 0 && busiest < MaxBusiestListed:
			busiest++
		default:
			continue
		}
		es := v1alpha1.EndpointStatus{Address: addr, Weight: int32(min(ep.weight, math.MaxInt32)), Requests: int64(ep.requests),
			Errors: int64(ep.errors), ActiveRequests: int64(ep.active), Reasons: ep.reasons,
			ConnectionsActive: int64(ep.cxActive), Connections: int64(ep.cx), ConnectFailures: int64(ep.cxFail), Timeouts: int64(ep.timeouts),
			EjectedOn: int32(len(ep.ejectedBy)), ReportedBy: int32(len(ep.on)), Health: v1alpha1.EndpointHealthy,
			RequestsPerSecond: round(ep.rate, 1), ExpectedShare: fraction(expected(addr)), Priority: int32(min(ep.priority, math.MaxInt32))}
		if ep.counted() {
			es.Health = v1alpha1.EndpointEjected
		}
		if pct, ok := warm[addr]; ok && len(ep.ejectedBy) == 0 {
			es.WarmingPercent = ptr(pct)
		}
		if e, ok := exp[addr]; ok && modelled {
			es.Zone, es.Priority, es.Backup = e.Zone, int32(e.Priority), e.Backup
		}
		if a.requests > 0 {
			es.ObservedShare = ptr(fraction(float64(ep.requests) / float64(a.requests)))
		}
		if ep.requests > 0 {
			es.ErrorRate = ptr(fraction(float64(ep.errors) / float64(ep.requests)))
		}
		out = append(out, es)
	}
	return out, skew
}

// warming tells whether an endpoint of l is warming up (warmingPercent).
func warming(l []v1alpha1.EndpointStatus) bool {
	return slices.ContainsFunc(l, func(e v1alpha1.EndpointStatus) bool { return e.WarmingPercent != nil })
}

// cv is the coefficient of variation (population standard deviation over mean).
func cv(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	if mean == 0 {
		return 0
	}
	var sq float64
	for _, x := range xs {
		sq += (x - mean) * (x - mean)
	}
	return math.Sqrt(sq/float64(len(xs))) / mean
}

// fields are c's counters, each once.
func (c *Counters) fields() []*uint64 {
	return []*uint64{&c.Completed, &c.Errors5xx, &c.Errors4xx, &c.PendingFailed, &c.NoneHealthy, &c.Informational, &c.Success,
		&c.Redirection, &c.RxBytes, &c.TxBytes}
}

// since is c less what base (the same cluster, earlier) had; a counter that went back means the cluster or
// the Envoy started again, and then all of c counts.
func (c Counters) since(base *Cluster) Counters {
	if base == nil {
		return c
	}
	b := base.Counters
	cf, bf := c.fields(), b.fields()
	for i := range cf {
		if *bf[i] > *cf[i] {
			return c
		}
	}
	out := c
	of := out.fields()
	for i := range of {
		*of[i] -= *bf[i]
	}
	return out
}

func (c Counters) plus(d Counters) Counters {
	out := c
	of, df := out.fields(), d.fields()
	for i := range of {
		*of[i] += *df[i]
	}
	return out
}

// traffic sets a backend's responses by class, its client-facing error rate, connections and bytes from a.
func traffic(b *v1alpha1.BackendStatus, a *acc) {
	var cx v1alpha1.ConnectionCounts
	for _, ep := range a.eps {
		cx.Active += int64(ep.cxActive)
		cx.Opened += int64(ep.cx)
		cx.ConnectFailures += int64(ep.cxFail)
	}
	b.Connections = &cx
	if !a.read {
		return
	}
	c := a.counters
	b.Bytes = &v1alpha1.ByteCounts{Received: int64(c.RxBytes), Sent: int64(c.TxBytes)}
	b.NoHealthyEndpoint = int64(c.NoneHealthy)
	r := v1alpha1.ResponseCounts{Informational: int64(c.Informational), Success: int64(c.Success), Redirection: int64(c.Redirection),
		ClientError: int64(c.Errors4xx), ServerError: int64(c.Errors5xx)}
	if n := r.Total(); n > 0 {
		b.Responses = &r
		b.ClientErrorRate = ptr(fraction(float64(r.ServerError) / float64(n)))
	}
}
