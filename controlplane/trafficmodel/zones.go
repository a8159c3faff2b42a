package trafficmodel

// zoneSplit models locality-weighted balancing (loadBalancing.zoneWeights) within one level of a non-hashing
// cluster, as Envoy's locality scheduler does (docs: intro/arch_overview/upstream/load_balancing/
// locality_weight): a locality's effective weight is its weight times min(1, overprovisioning factor ×
// healthy / total) of its endpoints, localities are picked in proportion to that, and endpoints within one
// as the algorithm spreads over its healthy ones. A locality without a weight gets nothing. It returns nil
// when the cluster is not locality-weighted, the level is in panic (Envoy then balances over all of the
// level's endpoints, zones aside), or no locality has an effective weight (Envoy then balances over the
// level's healthy endpoints, zones aside, or routes by zone: see zoneRoute).
func (m *Cluster) zoneSplit(l *Level) map[int]float64 {
	if !m.LocalityWeighted || l.Panic {
		return nil
	}
	type loc struct {
		healthy   []int
		total     int
		effective float64
	}
	locs := map[int]*loc{}
	var order []int
	for _, i := range l.Hosts {
		li := m.Hosts[i].locality
		z := locs[li]
		if z == nil {
			z = &loc{}
			locs[li] = z
			order = append(order, li)
		}
		z.total++
		if m.Hosts[i].Healthy {
			z.healthy = append(z.healthy, i)
		}
	}
	var sum float64
	for _, li := range order {
		z := locs[li]
		if len(z.healthy) > 0 {
			avail := min(1, float64(m.OverprovisioningFactor)/100*float64(len(z.healthy))/float64(z.total))
			z.effective = float64(m.localities[li].weight) * avail
			sum += z.effective
		}
	}
	if sum == 0 {
		return nil
	}
	out := map[int]float64{}
	for _, li := range order {
		z := locs[li]
		if z.effective == 0 {
			continue
		}
		for _, w := range m.spread(z.healthy) {
			out[w.host] += z.effective / sum * w.weight
		}
	}
	return out
}
