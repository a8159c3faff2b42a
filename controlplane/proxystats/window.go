package proxystats

import "time"

// Histories returns what was read from each proxy whose last read succeeded lately, oldest sample first
// (the samples are never changed once added).
func (p *Poller) Histories() []History {
	hs, _ := p.fresh()
	return hs
}

// Window is what one Envoy served for a set of clusters between two of its samples.
type Window struct {
	Node     string
	Requests uint64
	Errors   uint64
	// Latency are upstream_rq_time's cumulative buckets over the window.
	Latency []Bucket
	// From and To are the samples' times; Complete is false when the history has no sample at or after
	// since other than the last (the window is then empty).
	From, To time.Time
	Complete bool
}

// Since sums, for the clusters named in clusters, what h's Envoy served from its
// first sample at or after since to its last: requests and errors (rq_total and rq_error of the hosts) and
// the latency histogram. A counter that went back (a cluster or host made again) counts from zero.
func Since(h History, since time.Time, clusters map[string]bool) Window {
	w := Window{Node: h.Node}
	n := len(h.Samples)
	if n == 0 {
		return w
	}
	cur := h.Samples[n-1]
	var base *Sample
	for _, s := range h.Samples {
		if !s.At.Before(since) {
			base = s
			break
		}
	}
	if base == nil || base == cur {
		return w
	}
	w.From, w.To, w.Complete = base.At, cur.At, true
	for name, c := range cur.Clusters {
		if !clusters[name] {
			continue
		}
		bc := base.Clusters[name]
		for _, host := range c.Hosts {
			var bh *Host
			if bc != nil {
				bh = findHost(bc, host.Address)
			}
			if bh == nil {
				bh = &Host{}
			}
			w.Requests += sub(host.Total, bh.Total)
			w.Errors += sub(host.Errors, bh.Errors)
		}
		w.Latency = addBuckets(w.Latency, deltaBuckets(c.Latency, bc))
	}
	return w
}
