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
	joined := make(map[string]map[string]time.Time, len(before))
	for name, c := range cur.Clusters {
		if cur.partial != nil && !cur.partial[name] {
			if j := before[name]; j != nil {
				joined[name] = j // carried: as it was
			}
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
		switch {
		case j == nil:
		case maps.Equal(j, before[name]):
			joined[name] = before[name]
		default:
			joined[name] = j
		}
	}
	if full := cur.partial == nil; full {
		for name := range lastRead {
			if cur.Clusters[name] == nil {
				delete(lastRead, name)
			}
		}
	}
	cur.Joined = joined
}
