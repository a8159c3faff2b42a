package proxystats

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Reading an Envoy's stats must not hold back its config. Envoy answers admin requests on its main thread,
// the thread that also applies xDS: a /clusters dump of 10,000 clusters took it hundreds of milliseconds,
// and a change arriving meanwhile waited (one change in 40-60 took 435-631 ms instead of about 20, with
// 10,000 policies on one Envoy). So the poller
//   - asks only for lbplane's clusters, in slices of at most ClusterChunk (admin's /clusters?filter=, a
//     regular expression over cluster names, made of the names' prefixes): each slice holds the main thread
//     briefly, so a change waits for one slice at most, not for the whole dump;
//   - asks /stats/prometheus only for the stats status reads, of the stats in use (usedonly, filter=);
//   - starts no request to an Envoy while a response is in flight to it or for Quiet after one (Busy), and
//     looks again between slices: a read steps aside for a push, for at most one Interval.

// DefaultClusterChunk is how many clusters one /clusters request asks for at most.
const DefaultClusterChunk = 500

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

// stepAside waits while the Envoy is busy with a push (Busy), at most until deadline; it returns false
// when ctx ended.
func (p *Poller) stepAside(ctx context.Context, node string, deadline time.Time) bool {
	if p.Busy == nil {
		return ctx.Err() == nil
	}
	for p.Busy(node) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return ctx.Err() == nil
}

// paceState is the poller's part that only pace.go uses.
type paceState struct {
	chunksMu sync.Mutex
	chunks   map[string]chunkCache
}
