package trafficmodel

// zoneSplit models locality-weighted balancing (loadBalancing.zoneWeights) within one level of a non-hashing
// cluster, as Envoy's locality scheduler does: a zone's effective weight is its weight times
// min(1, 1.4 × healthy / total) of its endpoints, zones are picked in proportion to that, and endpoints
// within the zone by their weights among the healthy ones. Zones without a weight get nothing. It returns
// nil when the cluster has no zone weights or the level is in panic (then Shares spreads as without).
// Zone-aware routing (zoneAware) is not modelled: it depends on the zone of each Envoy, which a preview of
// the policy does not have.
func (m *Cluster) zoneSplit(l *Level) map[int]float64 {
	if len(m.zoneWeights) == 0 || l.Panic {
		return nil
	}
	type zone struct {
		healthy, total []int
		effective      float64
	}
	zones := map[string]*zone{}
	for _, i := range l.Hosts {
		z := zones[m.Hosts[i].Zone]
		if z == nil {
			z = &zone{}
			zones[m.Hosts[i].Zone] = z
		}
		z.total = append(z.total, i)
		if m.Hosts[i].Healthy {
			z.healthy = append(z.healthy, i)
		}
	}
	var sum float64
	for name, z := range zones {
		if len(z.healthy) > 0 {
			avail := min(1, float64(OverprovisioningFactor)/100*float64(len(z.healthy))/float64(len(z.total)))
			z.effective = float64(m.zoneWeights[name]) * avail
			sum += z.effective
		}
	}
	out := map[int]float64{}
	if sum == 0 {
		return out
	}
	for _, z := range zones {
		if z.effective == 0 {
			continue
		}
		for _, w := range m.normalized(z.healthy) {
			out[w.host] += z.effective / sum * w.weight
		}
	}
	return out
}
