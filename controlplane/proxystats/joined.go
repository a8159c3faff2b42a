package proxystats

import (
	"maps"
	"slices"
	"time"
)

// When an Envoy starts an endpoint's slow-start ramp (EdfLoadBalancerBase in Envoy 1.40): when it adds the
// endpoint healthy (a new endpoint, a new cluster, a new Envoy), or, with active health checks, when the
// endpoint passes a check after failing or waiting for its first one (the health checker sets the host's
// last_hc_pass_time, and the ramp counts from it). Envoy's admin shows neither time, so the poller notes
// the two reads of a cluster between which an endpoint appeared or turned healthy, and takes the middle:
// the ramp started within half the time between them of it.

// activeFailing tells whether Envoy holds a host failed or pending by its active health checks: passing the
// next check starts its ramp again.
func activeFailing(reasons []string) bool {
	return slices.Contains(reasons, reasonActiveFailed) || slices.Contains(reasons, reasonActivePending)
}

// markJoined sets cur.Joined from prev's (nil: cur is the Envoy's first read) and what cur read. lastRead
// is when each cluster's hosts were last read before cur (the poller's per-Envoy record, updated here);
// listedAt is when a read last listed every cluster of the Envoy (the last full read before cur; zero for
// none), or the Envoy's start for its first read. A ramp that started between two reads more than maxGap
// apart is not noted: how far into its window the endpoint is would be a guess.
func markJoined(prev, cur *Sample, lastRead map[string]time.Time, listedAt time.Time, maxGap time.Duration) {
	var before map[string]map[string]time.Time
	if prev != nil {
		before = prev.Joined
	}
	// cur shares prev's map until a cluster's joins differ: a partial read costs the clusters it read.
	joined, copied := before, false
	set := func(name string, j map[string]time.Time) {
		if maps.Equal(j, before[name]) {
			return
		}
		if !copied {
			joined, copied = maps.Clone(before), true
			if joined == nil {
				joined = map[string]map[string]time.Time{}
			}
		}
		if j == nil {
			delete(joined, name)
		} else {
			joined[name] = j
		}
	}
	read := cur.partial
	if read == nil {
		read = make(map[string]bool, len(cur.Clusters))
		for name := range cur.Clusters {
			read[name] = true
		}
		for name := range before {
			if cur.Clusters[name] == nil {
				set(name, nil) // gone from the Envoy
			}
		}
		for name := range lastRead {
			if cur.Clusters[name] == nil {
				delete(lastRead, name)
			}
		}
	}
	for name := range read {
		c := cur.Clusters[name]
		if c == nil {
			continue
		}
		var pc *Cluster
		if prev != nil {
			pc = prev.Clusters[name]
		}
		since, ok := lastRead[name]
		if !ok {
			since = listedAt // the cluster was not there when the Envoy's clusters were last listed
		}
		lastRead[name] = cur.At
		gapOK := !since.IsZero() && cur.At.Sub(since) <= maxGap
		var j map[string]time.Time
		for _, h := range c.Hosts {
			if activeFailing(h.Reasons) {
				continue
			}
			var t time.Time
			switch ph := findHost(pc, h.Address); {
			case ph != nil && !activeFailing(ph.Reasons):
				t = before[name][h.Address] // ramping, or past it, since before (or never ramped)
			case (ph == nil && len(h.Reasons) == 0) || ph != nil:
				// Added healthy, or past its active checks since the last read: the ramp started in between.
				if gapOK {
					t = since.Add(cur.At.Sub(since) / 2)
				}
			}
			if !t.IsZero() {
				if j == nil {
					j = map[string]time.Time{}
				}
				j[h.Address] = t
			}
		}
		set(name, j)
	}
	cur.Joined = joined
}
