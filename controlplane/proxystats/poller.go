package proxystats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// maxBody bounds one answer: /clusters of a thousand endpoints is well under 1 MiB, and a larger answer is
// refused rather than read, so a client that declared a stats port cannot make lbplane buffer much. An
// Envoy served more clusters and endpoints may answer more: bodyPerResource for each (/clusters?format=json
// took 1.3 KB per cluster of one endpoint at 3,000), so that lbplane buffers at most in proportion to what
// it serves (see bodyLimit).
const (
	maxBody         = 4 << 20
	bodyPerResource = 4 << 10
)

// Poller reads every proxy's stats port every Interval and keeps Window of history per proxy.
type Poller struct {
	// Proxies lists the Envoys to read: those with a stats port.
	Proxies func(context.Context) []xdsserver.ProxyStatus
	// TrustUnauthenticated also reads proxies that did not authenticate with a client certificate (xDS
	// served with --xds-insecure). Otherwise a client could declare any stats port and have lbplane read
	// from it and report what it says as backend health.
	TrustUnauthenticated bool
	Interval             time.Duration
	Window               time.Duration
	Client               *http.Client
	Log                  *slog.Logger
	// Metrics counts failed reads (lbplane_errors_total{component="stats_poll"}).
	Metrics *metrics.Metrics
	// Expect, when set, gives each endpoint's expected share from the traffic model (see perEndpoint).
	Expect ExpectFunc
	// ExpectKey, when set, returns a comparable value that changes whenever Expect's answers may: the
	// summaries (Health, ByProxy) are kept until it changes or a read is added.
	ExpectKey func() any
	// Clusters, when set, is the config a proxy group is asked to serve: /clusters is then read in slices
	// of at most ClusterChunk (DefaultClusterChunk when 0; negative: in one request) of its clusters (see
	// pace.go).
	Clusters     func(group string) *xdscache.State
	ClusterChunk int
	// Busy, when set, tells whether config is on its way to a node (sent, not yet acknowledged) or was sent
	// to it within quiet: a read then waits for the next Interval, or for the config to arrive when the
	// node's stats are overdue (see pace.go).
	Busy func(node string, quiet time.Duration) bool
	// FullReadShare is the share of an Envoy's main thread that full reads (every cluster and the stats) may
	// take, going by how long the last one took (DefaultFullReadShare when 0; 1 or more: every read is
	// full). Between full reads only the busy clusters are read (see pace.go).
	FullReadShare float64
	// MinPartialClusters: an Envoy with at most this many clusters is read in full every Interval
	// (DefaultMinPartialClusters when 0).
	MinPartialClusters int
	// Yield, when set, is called every few hundred clusters while the Envoys' stats are summed up, and may
	// wait: a summary of 10,000 clusters is tens of milliseconds of CPU, which a config change should not
	// have to share (see SummaryCache.Yield).
	Yield func()
	// Watched, when set, names a group's clusters whose request counters (Counters) a partial read reads
	// too (a full read reads every cluster's): those a staged rollout is judging.
	Watched func(group string) []string

	paceState
	mu      sync.Mutex
	proxies map[string]*proxy
	// gen counts the changes to proxies' samples and errors: the summaries are kept per gen.
	gen uint64

	sumMu sync.Mutex
	sums  summaries
	// kept are the clusters' statuses kept from one summary to the next, for Health and per node for
	// ByProxy (see SummaryCache).
	kept       SummaryCache
	keptByNode map[string]*SummaryCache
}

// summaries are Health and ByProxy as last computed, for the samples of gen, fresh proxies and expect
// (see Poller.summariesLocked).
type summaries struct {
	gen     uint64
	fresh   int
	expect  any
	health  Health
	byProxy map[string]Health
}

type proxy struct {
	group   string
	node    string
	samples []*Sample
	err     string
	// nextFull is when the next read reads everything; hot are the clusters a read in between asks for.
	nextFull time.Time
	hot      []string
	// retryAt is, after a full read failed, when the next may start: a failing full read costs Envoy as
	// much as one that succeeds.
	retryAt time.Time
	// fullAt and fullCost are the start and cost of the last full read that succeeded (see fullQuiet).
	fullAt   time.Time
	fullCost time.Duration
	// lastRead is when each cluster's hosts were last read (see markJoined).
	lastRead map[string]time.Time
	// started is when the Envoy started, from its last full read's uptime.
	started time.Time
}

// Target is the base URL of a proxy's stats port, or "" when it has none.
func Target(p xdsserver.ProxyStatus) string {
	if p.StatsPort == 0 || p.Address == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(p.Address, strconv.Itoa(p.StatsPort))
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.PollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PollOnce reads every proxy once, at most 16 at a time, and forgets proxies that are gone.
func (p *Poller) PollOnce(ctx context.Context) {
	type job struct {
		key, group, node, base string
		prev                   *Sample
		hot, watched           []string
		full                   bool
		// overdue: the last read that succeeded started before overdueAfter (or there was none).
		overdue bool
		// fullAt and fullCost: the proxy's last full read (see fullQuiet).
		fullAt   time.Time
		fullCost time.Duration
	}
	var jobs []job
	seen := map[string]bool{}
	for _, ps := range p.Proxies(ctx) {
		base := Target(ps)
		if base == "" || (!ps.Authenticated && !p.TrustUnauthenticated) {
			continue
		}
		key := ps.NodeID + " " + base
		if !seen[key] {
			seen[key] = true
			jobs = append(jobs, job{key: key, group: ps.Group, node: ps.NodeID, base: base})
		}
	}
	p.mu.Lock()
	if p.proxies == nil {
		p.proxies = map[string]*proxy{}
	}
	for k := range p.proxies {
		if !seen[k] {
			delete(p.proxies, k)
			p.gen++
		}
	}
	now := time.Now()
	ready := jobs[:0]
	for _, j := range jobs {
		j.full = true
		px := p.proxies[j.key]
		j.overdue = px == nil || len(px.samples) == 0 || now.Sub(px.samples[len(px.samples)-1].At) >= p.overdueAfter()
		if px != nil && px.err != "" && now.Before(px.retryAt) {
			continue
		}
		if px != nil && px.err == "" && len(px.samples) > 0 && p.fullShare() < 1 {
			j.prev, j.hot = px.samples[len(px.samples)-1], px.hot
			j.full = !now.Before(px.nextFull)
			j.fullAt, j.fullCost = px.fullAt, px.fullCost
		}
		ready = append(ready, j)
	}
	jobs = ready
	p.mu.Unlock()
	groups := map[string]bool{}
	watched := map[string][]string{}
	for i := range jobs {
		j := &jobs[i]
		if !groups[j.group] {
			groups[j.group] = true
			p.noteChanges(j.group, now)
			if p.Watched != nil {
				watched[j.group] = p.Watched(j.group)
			}
		}
		if j.full && j.prev != nil && p.putOffFull(j.node, j.fullAt, j.fullCost, now) {
			// Config was sent too lately for a read this long: the busy clusters now, everything once config
			// has been quiet for long enough.
			j.full = false
			p.Log.Debug("a proxy's full stats read waits for quiet config: its busy clusters are read instead", "proxy", j.key, "last full read", j.fullAt, "took", j.fullCost)
		}
		if !j.full {
			// The busy clusters, then those changed in the last two intervals, unless a full read came after
			// the change (an interval late, for the Envoy to apply it): read once after a change, a cluster
			// taking traffic or with an endpoint out stays busy. When not all fit in one request, the rest
			// waits for the next full read.
			since := j.prev.StatsAt.Add(-p.Interval)
			if recent := now.Add(-2 * p.Interval); recent.After(since) {
				since = recent
			}
			hot := slices.Clone(j.hot)
			for _, name := range p.changedSince(j.group, since) {
				if _, found := slices.BinarySearch(j.hot, name); !found {
					hot = append(hot, name)
				}
			}
			j.hot, j.watched = hot, watched[j.group]
		}
	}

	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, cost, err := p.read(ctx, j.base, j.group, j.node, j.prev, j.hot, j.watched, j.full, j.overdue)
			if errors.Is(err, errPutOff) {
				p.Log.Debug("a proxy's stats read waits for the next interval: config was sent to it lately", "proxy", j.key, "full", j.full)
				return
			}
			p.add(j.key, j.group, j.node, s, cost, err)
		}()
	}
	wg.Wait()
}

// envoyStatsFlush is Envoy's default stats flush interval, which its uptime gauge lags by at most.
const envoyStatsFlush = 5 * time.Second

// add records a read; cost is how long it held the Envoy when it was a full read (that succeeded or
// failed), 0 otherwise.
func (p *Poller) add(key, group, node string, s *Sample, cost time.Duration, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	px := p.proxies[key]
	if px == nil {
		px = &proxy{group: group}
		p.proxies[key] = px
	}
	px.group, px.node = group, node
	if err != nil {
		if cost > 0 {
			px.retryAt = time.Now().Add(p.fullEvery(cost))
		}
		p.Metrics.Error(metrics.StatsPoll)
		if px.err != err.Error() {
			p.Log.Warn("reading a proxy's stats port", "proxy", key, "error", err)
		}
		px.err = err.Error()
		return
	}
	px.err = ""
	var prev *Sample
	if n := len(px.samples); n > 0 {
		prev = px.samples[n-1]
	}
	Attribute(prev, s)
	p.noteJoins(px, prev, s)
	px.hot = hotClusters(prev, s)
	keepUnchanged(prev, s)
	if prev == nil && !s.Started.IsZero() && s.At.Sub(s.Started)+envoyStatsFlush <= p.Window {
		// The Envoy started within the window: what its counters hold was counted in it. Its first read
		// counts from an empty sample at its start, not from itself (requests served before lbplane first
		// read an Envoy would otherwise never show).
		px.samples = append(px.samples, &Sample{At: s.Started, StatsAt: s.Started, Clusters: map[string]*Cluster{}})
	}
	px.samples = append(px.samples, s)
	if cost > 0 {
		px.fullAt, px.fullCost = s.At, cost
		px.nextFull = time.Time{}
		if len(s.Clusters) > p.minPartial() {
			px.nextFull = s.At.Add(p.fullEvery(cost))
		}
		p.Log.Debug("read a proxy's stats in full", "proxy", key, "clusters", len(s.Clusters), "took", cost, "next", px.nextFull)
	}
	// Keep one sample older than the window, so that the window is covered from its start, and the last one
	// whose latency is older than s's (see latencyBase).
	cut := 0
	for i, old := range px.samples {
		if s.At.Sub(old.At) > p.Window {
			cut = i
		}
	}
	for i := cut - 1; i >= 0; i-- {
		if px.samples[i].StatsAt.Before(s.StatsAt) {
			if !px.samples[cut].StatsAt.Before(s.StatsAt) {
				cut = i
			}
			break
		}
	}
	px.samples = px.samples[cut:]
}

// noteJoins sets s.Joined: when the Envoy started each endpoint's slow-start ramp, to within half the time
// between two reads of its cluster (markJoined). An Envoy that started again since prev (its uptime says so)
// is read as for the first time: it added every endpoint anew.
func (p *Poller) noteJoins(px *proxy, prev, s *Sample) {
	if !s.Started.IsZero() {
		if prev != nil && !px.started.IsZero() && s.Started.Sub(px.started) > 2*envoyStatsFlush {
			prev, px.lastRead = nil, nil
		}
		px.started = s.Started
	}
	listedAt := px.fullAt
	if prev == nil {
		listedAt = s.Started // no cluster before the Envoy started
	}
	if px.lastRead == nil {
		px.lastRead = map[string]time.Time{}
	}
	// A cluster changed lately is read every interval; one read late waits for the next full read.
	markJoined(prev, s, px.lastRead, listedAt, 2*p.Interval+envoyStatsFlush)
}

// read reads one proxy: all of its clusters and the stats status uses when full, otherwise the clusters in
// hot alone and the request counters of those in watched, with everything else carried from prev (see
// pace.go). A read is put off to the next interval
// (errPutOff) when config was sent to the proxy lately, unless it is overdue: then it waits only for config
// in flight to arrive. Each further request steps aside for config pushed to the proxy. cost is how long a
// full read's requests took, 0 for a partial read.
func (p *Poller) read(ctx context.Context, base, group, node string, prev *Sample, hot, watched []string, full, overdue bool) (*Sample, time.Duration, error) {
	deadline := time.Now().Add(p.Interval)
	if !overdue && p.busy(node, DefaultQuiet) {
		return nil, 0, errPutOff
	}
	if !p.waitWhileBusy(ctx, node, 0, deadline) {
		return nil, 0, ctx.Err()
	}
	at := time.Now()
	var filters []string
	if f := hotFilter(hot); !full && f != "" {
		filters = []string{f}
	}
	if full {
		if filters = p.filters(group); filters == nil {
			filters = []string{""}
		}
	}
	var cost time.Duration
	limit := maxBody // a partial read asks for a few clusters
	if full {
		limit = p.bodyLimit(group)
	}
	timed := func(u string) ([]byte, error) {
		t := time.Now()
		b, err := p.get(ctx, u, limit)
		cost += time.Since(t)
		return b, err
	}
	// A full read reads the stats first: an ejection then shows in the hosts no earlier than in its counter,
	// so that the next read at the latest names its detector (see Attribute).
	var sb []byte
	if full {
		var err error
		if sb, err = timed(base + "/stats/prometheus?usedonly&filter=" + url.QueryEscape(StatsFilter)); err != nil {
			return nil, fullCost(true, cost), err
		}
	}
	clusters := map[string]*Cluster{}
	for i, f := range filters {
		if (i > 0 || full) && !p.waitWhileBusy(ctx, node, DefaultQuiet, deadline) {
			return nil, 0, ctx.Err()
		}
		cb, err := timed(clustersURL(base, f))
		if err != nil {
			return nil, fullCost(full, cost), err
		}
		part, err := ParseClusters(cb)
		if err != nil {
			return nil, 0, err
		}
		for name, c := range part {
			clusters[name] = c
		}
	}
	if !full {
		var counters map[string]*Cluster
		if f := countersFilter(watched); f != "" {
			if !p.waitWhileBusy(ctx, node, DefaultQuiet, deadline) {
				return nil, 0, ctx.Err()
			}
			sb, err := timed(base + "/stats/prometheus?usedonly&filter=" + url.QueryEscape(f))
			if err != nil {
				return nil, 0, err
			}
			counters = map[string]*Cluster{}
			if _, err := ParseStats(sb, counters); err != nil {
				return nil, 0, err
			}
		}
		p.Log.Debug("read a proxy's busy clusters", "node", node, "clusters", len(hot), "watched", len(watched), "started", at, "took", cost)
		return carry(prev, at, clusters, counters), 0, nil
	}
	uptime, err := ParseStats(sb, clusters)
	if err != nil {
		return nil, 0, err
	}
	s := &Sample{At: at, StatsAt: at, Clusters: clusters}
	if uptime >= 0 {
		s.Started = at.Add(-uptime)
	}
	return s, max(cost, time.Nanosecond), nil
}

func (p *Poller) get(ctx context.Context, u string, limit int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("GET %s: answer over %.1f MiB, not read", u, float64(limit)/(1<<20))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return b, nil
}

// Health sums up what every proxy reported. Proxies whose last read failed, or is older than three
// intervals, are left out: their view is stale. The answer is shared with every caller until the next
// read: it must not be changed.
func (p *Poller) Health() Health {
	hs, gen := p.fresh()
	p.sumMu.Lock()
	defer p.sumMu.Unlock()
	s := p.summariesLocked(hs, gen)
	if s.health == nil {
		if len(s.byProxy) == 1 && len(hs) > 0 && allOneNode(hs) {
			// One Envoy's view is the sum of one: the same summary from the same samples.
			s.health = s.byProxy[hs[0].Node]
		} else {
			t := time.Now()
			p.kept.Yield = p.Yield
			s.health = SummarizeCached(hs, p.Window, p.Expect, &p.kept)
			p.Log.Debug("summed the Envoys' stats up", "envoys", len(hs), "kept", p.kept.Kept, "computed", p.kept.Computed, "took", time.Since(t))
		}
	}
	return s.health
}

// ByProxy is each proxy's own view, by node id, left out as Health leaves them out. A node id that more
// than one Envoy uses gets their views summed. Like Health's, the answer must not be changed.
func (p *Poller) ByProxy() map[string]Health {
	hs, gen := p.fresh()
	p.sumMu.Lock()
	defer p.sumMu.Unlock()
	s := p.summariesLocked(hs, gen)
	if s.byProxy == nil {
		byNode := map[string][]History{}
		for _, h := range hs {
			byNode[h.Node] = append(byNode[h.Node], h)
		}
		s.byProxy = make(map[string]Health, len(byNode))
		if p.keptByNode == nil {
			p.keptByNode = map[string]*SummaryCache{}
		}
		for node := range p.keptByNode {
			if byNode[node] == nil {
				delete(p.keptByNode, node)
			}
		}
		for node, nhs := range byNode {
			if len(byNode) == 1 && s.health != nil {
				s.byProxy[node] = s.health
				continue
			}
			c := p.keptByNode[node]
			if c == nil {
				c = &SummaryCache{Steps: Steps{Yield: p.Yield}}
				p.keptByNode[node] = c
			}
			t := time.Now()
			s.byProxy[node] = SummarizeCached(nhs, p.Window, p.Expect, c)
			p.Log.Debug("summed an Envoy's stats up", "node", node, "kept", c.Kept, "computed", c.Computed, "took", time.Since(t))
		}
	}
	return s.byProxy
}

// summariesLocked returns the kept summaries when they are those of hs, gen and the current ExpectKey,
// and otherwise empties them. Summing 10,000 clusters up is tens of milliseconds: status, history, the
// dashboard and metrics all ask for it, and the samples change once per Interval. Caller holds sumMu.
func (p *Poller) summariesLocked(hs []History, gen uint64) *summaries {
	var expect any
	if p.ExpectKey != nil {
		expect = p.ExpectKey()
	}
	if s := &p.sums; s.gen != gen || s.fresh != len(hs) || s.expect != expect {
		*s = summaries{gen: gen, fresh: len(hs), expect: expect}
	}
	return &p.sums
}

func allOneNode(hs []History) bool {
	for _, h := range hs {
		if h.Node != hs[0].Node {
			return false
		}
	}
	return true
}

// fresh returns the histories of the proxies whose last read succeeded within three intervals, and gen. The samples
// are never changed once added, so the slices may be read without the lock.
func (p *Poller) fresh() ([]History, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var hs []History
	for _, px := range p.proxies {
		n := len(px.samples)
		if px.err != "" || n == 0 || time.Since(px.samples[n-1].At) > 3*p.Interval {
			continue
		}
		hs = append(hs, History{Group: px.group, Node: px.node, Samples: slices.Clip(px.samples)})
	}
	// In one order from call to call, as the kept summaries compare each Envoy's clusters in turn.
	slices.SortFunc(hs, func(a, b History) int {
		return cmp.Or(strings.Compare(a.Node, b.Node), strings.Compare(a.Group, b.Group))
	})
	return hs, p.gen
}
