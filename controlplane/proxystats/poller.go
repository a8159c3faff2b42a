package proxystats

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// maxBody bounds one answer: /clusters of a thousand endpoints is well under 1 MiB, and a larger answer is
// refused rather than read, so a client that declared a stats port cannot make lbplane buffer much.
const maxBody = 4 << 20

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
	// Clusters, when set, is the config a proxy group is asked to serve: /clusters is then read in slices
	// of at most ClusterChunk (DefaultClusterChunk when 0; negative: in one request) of its clusters (see
	// pace.go).
	Clusters     func(group string) *xdscache.State
	ClusterChunk int
	// Busy, when set, tells whether a node was sent config lately or has some in flight: its stats are not
	// read meanwhile, for at most an Interval (see pace.go).
	Busy func(node string) bool

	paceState
	mu      sync.Mutex
	proxies map[string]*proxy
}

type proxy struct {
	group   string
	node    string
	samples []*Sample
	err     string
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
	type job struct{ key, group, node, base string }
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
			jobs = append(jobs, job{key, ps.Group, ps.NodeID, base})
		}
	}
	p.mu.Lock()
	if p.proxies == nil {
		p.proxies = map[string]*proxy{}
	}
	for k := range p.proxies {
		if !seen[k] {
			delete(p.proxies, k)
		}
	}
	p.mu.Unlock()

	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := p.read(ctx, j.base, j.group, j.node)
			p.add(j.key, j.group, j.node, s, err)
		}()
	}
	wg.Wait()
}

func (p *Poller) add(key, group, node string, s *Sample, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	px := p.proxies[key]
	if px == nil {
		px = &proxy{group: group}
		p.proxies[key] = px
	}
	px.group, px.node = group, node
	if err != nil {
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
	px.samples = append(px.samples, s)
	// Keep one sample older than the window, so that the window is covered from its start.
	cut := 0
	for i, old := range px.samples {
		if s.At.Sub(old.At) > p.Window {
			cut = i
		}
	}
	px.samples = px.samples[cut:]
}

// read reads one proxy: its clusters in slices, then the stats status uses, each request stepping aside
// for config pushed to the proxy (see pace.go).
func (p *Poller) read(ctx context.Context, base, group, node string) (*Sample, error) {
	deadline := time.Now().Add(p.Interval)
	if !p.stepAside(ctx, node, deadline) {
		return nil, ctx.Err()
	}
	at := time.Now()
	clusters := map[string]*Cluster{}
	filters := p.filters(group)
	if filters == nil {
		filters = []string{""}
	}
	for i, f := range filters {
		if i > 0 && !p.stepAside(ctx, node, deadline) {
			return nil, ctx.Err()
		}
		cb, err := p.get(ctx, clustersURL(base, f))
		if err != nil {
			return nil, err
		}
		part, err := ParseClusters(cb)
		if err != nil {
			return nil, err
		}
		for name, c := range part {
			clusters[name] = c
		}
	}
	if !p.stepAside(ctx, node, deadline) {
		return nil, ctx.Err()
	}
	sb, err := p.get(ctx, base+"/stats/prometheus?usedonly&filter="+url.QueryEscape(StatsFilter))
	if err != nil {
		return nil, err
	}
	if err := ParseStats(sb, clusters); err != nil {
		return nil, err
	}
	return &Sample{At: at, Clusters: clusters}, nil
}

func (p *Poller) get(ctx context.Context, u string) ([]byte, error) {
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
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("GET %s: answer over %d MiB, not read", u, maxBody>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return b, nil
}

// Health sums up what every proxy reported. Proxies whose last read failed, or is older than three
// intervals, are left out: their view is stale.
func (p *Poller) Health() Health {
	return SummarizeExpected(p.fresh(), p.Window, p.Expect)
}

// ByProxy is each proxy's own view, by node id, left out as Health leaves them out. A node id that more
// than one Envoy uses gets their views summed.
func (p *Poller) ByProxy() map[string]Health {
	byNode := map[string][]History{}
	for _, h := range p.fresh() {
		byNode[h.Node] = append(byNode[h.Node], h)
	}
	out := make(map[string]Health, len(byNode))
	for node, hs := range byNode {
		out[node] = SummarizeExpected(hs, p.Window, p.Expect)
	}
	return out
}

// fresh returns the histories of the proxies whose last read succeeded within three intervals. The samples
// are never changed once added, so the slices may be read without the lock.
func (p *Poller) fresh() []History {
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
	return hs
}
