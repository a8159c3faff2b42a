package proxystats

import (
	"slices"
	"time"
)

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
	// ClientErrors are the HTTP requests answered with a 4xx (known when Requests come from the clusters'
	// own counters).
	ClientErrors uint64
	// Dead are the clusters whose every endpoint fails its active health checks at the last sample.
	Dead []string
	// Latency are upstream_rq_time's cumulative buckets over the window.
	Latency []Bucket
	// From and To are the samples' times; Complete is false when the history has no sample at or after
	// since other than the last (the window is then empty).
	From, To time.Time
	Complete bool
}

// Since sums, for the clusters named in clusters, what h's Envoy served from its first sample at or after
// since to its last: requests and errors as clients saw them, and the latency histogram. A counter that
// went back (a cluster or host made again) counts from zero. Dead names the clusters whose endpoints all fail
// their active health checks at the last sample. Requests and errors are, per cluster:
//   - with HTTP requests answered, the cluster's own counters (see Counters): those answered and the 5xx
//     among them, Envoy's own 503 and 504 included;
//   - otherwise (TCP, or the router's dynamic stats off), what its endpoints served (rq_total, rq_error),
//     and the requests or connections that failed to connect or found no healthy endpoint. An endpoint's
//     rq_error counts an HTTP request whose connection failed, not a TCP one: the larger of the two
//     counts them once either way (measured on Envoy 1.40, testdata/counters-*).
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
		var was Counters
		if bc != nil {
			was = bc.Counters
		}
		now := c.Counters
		if c.Dead() {
			w.Dead = append(w.Dead, name)
		}
		if done := sub(now.Completed, was.Completed); done > 0 {
			w.Requests += done
			w.Errors += min(sub(now.Errors5xx, was.Errors5xx), done)
			w.ClientErrors += min(sub(now.Errors4xx, was.Errors4xx), done)
		} else {
			var total, errs uint64
			for _, host := range c.Hosts {
				var bh *Host
				if bc != nil {
					bh = findHost(bc, host.Address)
				}
				if bh == nil {
					bh = &Host{}
				}
				total += sub(host.Total, bh.Total)
				errs += sub(host.Errors, bh.Errors)
			}
			failed, none := sub(now.PendingFailed, was.PendingFailed), sub(now.NoneHealthy, was.NoneHealthy)
			w.Requests += total + failed + none
			w.Errors += min(max(errs, failed)+none, total+failed+none)
		}
		w.Latency = AddBuckets(w.Latency, deltaBuckets(c.Latency, bc))
	}
	slices.Sort(w.Dead)
	return w
}
