package trafficmodel

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// DefaultOverprovisioningFactor is Envoy's, in percent, for an assignment that sets none: a priority level
// counts as fully available while 100/1.4 ≈ 71.4 % of its endpoints are healthy.
const DefaultOverprovisioningFactor = 140

// DefaultPanicThreshold is Envoy's healthy panic threshold, in percent.
const DefaultPanicThreshold = 50

// Down says which endpoints ("address:port") take no traffic, and why (failed health check, ejected by
// outlier detection, "what-if"). Draining endpoints are down without being listed.
type Down map[string]string

// Host is one endpoint as the load balancer sees it.
type Host struct {
	Address  string `json:"address"` // address:port
	Zone     string `json:"zone,omitempty"`
	Weight   uint32 `json:"weight"`
	Healthy  bool   `json:"healthy"`
	Reason   string `json:"reason,omitempty"` // why it is not healthy
	Priority int    `json:"priority"`
	// Backup: a backup endpoint (its level comes after every other one).
	Backup bool `json:"backup,omitempty"`
	// Warming is the part of its weight a slow-starting endpoint has (Policy.Joined); 0: its full weight.
	Warming float64 `json:"warming,omitempty"`
	// locality is the index of the host's locality in the assignment.
	locality int
	// status is the host's health as Envoy matches it against override_host_status: UNHEALTHY when it is
	// down (failed checks, ejected, "what-if"), which overrides what EDS says, else EDS's.
	status corev3.HealthStatus
}

// Level is one priority level: the endpoints of one or more zones.
type Level struct {
	Priority int      `json:"priority"`
	Zones    []string `json:"zones,omitempty"`
	// Backup: every endpoint of the level is a backup.
	Backup bool `json:"backup,omitempty"`
	// Hosts index into Cluster.Hosts, in the order Envoy gets them.
	Hosts   []int `json:"-"`
	Healthy int   `json:"healthy"`
	Total   int   `json:"total"`
	// Availability is Envoy's health of the level: min(100, overprovisioning factor × healthy / total), in percent.
	Availability uint32 `json:"availability"`
	// Load is the percentage of requests the level gets.
	Load uint32 `json:"load"`
	// Panic: too few healthy endpoints, so the level balances over all of them, healthy or not.
	Panic bool `json:"panic"`
	// picked are the hosts the level balances over (healthy ones, or all in panic).
	picked []int
	hasher hasher
}

// locality is one LocalityLbEndpoints of the assignment.
type locality struct {
	zone     string
	priority int
	weight   uint32 // 0: none (with locality-weighted balancing, no traffic)
}

// Cluster is the load-balancing model of one built cluster (the Cluster and ClusterLoadAssignment lbplane
// sends Envoy) for a given health.
type Cluster struct {
	Name      string       `json:"name"`
	Algorithm ir.Algorithm `json:"algorithm"`
	Hosts     []Host       `json:"hosts"`
	Levels    []*Level     `json:"levels"`
	// PanicThreshold in percent, as Envoy rounds it.
	PanicThreshold uint64 `json:"panicThreshold"`
	// OverprovisioningFactor in percent, from the assignment's policy (140 when it sets none).
	OverprovisioningFactor uint32 `json:"overprovisioningFactor"`
	// TotalPanic: every level is in panic, load follows the number of endpoints per level.
	TotalPanic bool `json:"totalPanic"`
	// LocalityWeighted: zones are picked by their locality weights (loadBalancing.zoneWeights).
	LocalityWeighted bool `json:"localityWeighted,omitempty"`
	// ZoneAware: the cluster sets Envoy's zone-aware routing (zone_aware_lb_config), so each Envoy prefers
	// its own zone: the shares depend on the Envoys they are for (see From).
	ZoneAware bool `json:"zoneAware,omitempty"`
	// HashBalanceFactor bounds a hashing endpoint's load (consistent hashing with bounded loads); 0: none.
	HashBalanceFactor uint32 `json:"hashBalanceFactor,omitempty"`
	// SlowStart: endpoints that join ramp up their weight over a window.
	SlowStart bool `json:"slowStart,omitempty"`
	slow      *Ramp
	// Outlier: outlier detection ejects endpoints that fail requests.
	Outlier bool `json:"outlier,omitempty"`
	// ResolvedByEnvoy says the endpoints are host names Envoy resolves at run time (a DNS backend): the
	// model balances over the names, while Envoy balances over the addresses they resolve to.
	ResolvedByEnvoy bool `json:"resolvedByEnvoy,omitempty"`
	logicalDNS      bool
	// sessionStatuses are the host states a session's endpoint is taken in (override_host_status).
	sessionStatuses []corev3.HealthStatus
	localities      []locality
	zoneRouting     zoneRouting
	envoys          Envoys
	ringMin         uint64
	ringMax         uint64
	maglevSize      uint64
}

// defaultSessionStatuses are the states Envoy takes a session's endpoint in when the cluster sets no
// override_host_status.
var defaultSessionStatuses = []corev3.HealthStatus{corev3.HealthStatus_UNKNOWN, corev3.HealthStatus_HEALTHY, corev3.HealthStatus_DEGRADED}

// KeepsSession says whether Envoy sends a request whose session names host i to it: only when the host's
// state is one of the cluster's override_host_status; otherwise load balancing picks.
func (m *Cluster) KeepsSession(i int) bool {
	return slices.Contains(m.sessionStatuses, m.Hosts[i].status)
}

// HostKey is the string Envoy hashes for an endpoint on the ring and in the Maglev table: its address as
// Envoy prints it, "ip:port" or "[ipv6]:port".
func HostKey(address string, port uint32) string {
	return net.JoinHostPort(address, strconv.FormatUint(uint64(port), 10))
}

// Backups names the backup endpoints of a cluster ("address:port"). The assignment puts them in a level of
// their own after the others, which is all Envoy knows; the name is for people reading the model.
type Backups map[string]bool

// NewCluster models a built cluster: c as sent over CDS, cla its endpoints as sent over EDS (nil for a
// cluster of host names, whose endpoints travel inside c). The endpoints in down (and draining ones) are
// out of load balancing.
func NewCluster(c *clusterv3.Cluster, cla *endpointv3.ClusterLoadAssignment, down Down, backups Backups) (*Cluster, error) {
	m := &Cluster{Name: c.GetName(), PanicThreshold: DefaultPanicThreshold, OverprovisioningFactor: DefaultOverprovisioningFactor,
		ringMin: DefaultMinRingSize, ringMax: DefaultMaxRingSize, maglevSize: DefaultMaglevTableSize, Outlier: c.GetOutlierDetection() != nil,
		zoneRouting: defaultZoneRouting}
	if ct := c.GetClusterType(); ct != nil {
		m.ResolvedByEnvoy = true
		var dc dnsclusterv3.DnsCluster
		if ct.GetTypedConfig() != nil && ct.GetTypedConfig().UnmarshalTo(&dc) == nil {
			m.logicalDNS = dc.GetAllAddressesInSingleEndpoint()
		}
		cla = c.GetLoadAssignment()
	}
	if cla == nil {
		cla = &endpointv3.ClusterLoadAssignment{ClusterName: c.GetName()}
	}
	if t := c.GetCommonLbConfig().GetHealthyPanicThreshold(); t != nil {
		m.PanicThreshold = uint64(math.Round(t.GetValue()))
	}
	m.sessionStatuses = defaultSessionStatuses
	if set := c.GetCommonLbConfig().GetOverrideHostStatus(); set != nil {
		m.sessionStatuses = set.GetStatuses()
	}
	if f := cla.GetPolicy().GetOverprovisioningFactor(); f != nil {
		m.OverprovisioningFactor = f.GetValue()
	}
	if err := m.readPolicy(c); err != nil {
		return nil, err
	}
	byLevel := map[int]*Level{}
	for li, loc := range cla.GetEndpoints() {
		l := locality{zone: loc.GetLocality().GetZone(), priority: int(loc.GetPriority()), weight: loc.GetLoadBalancingWeight().GetValue()}
		m.localities = append(m.localities, l)
		lv := byLevel[l.priority]
		if lv == nil {
			lv = &Level{Priority: l.priority, Backup: true}
			byLevel[l.priority] = lv
		}
		if !slices.Contains(lv.Zones, l.zone) {
			lv.Zones = append(lv.Zones, l.zone)
		}
		for _, e := range loc.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			h := Host{Address: HostKey(sa.GetAddress(), sa.GetPortValue()), Zone: l.zone, Weight: max(1, e.GetLoadBalancingWeight().GetValue()),
				Healthy: true, Priority: l.priority, locality: li}
			h.Backup = backups[h.Address]
			h.status = e.GetHealthStatus()
			switch h.status {
			case corev3.HealthStatus_DRAINING:
				h.Healthy, h.Reason = false, "draining"
			case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_TIMEOUT:
				h.Healthy, h.Reason = false, "unhealthy (from the control plane)"
			}
			if r, ok := down[h.Address]; ok {
				h.Healthy, h.Reason, h.status = false, r, corev3.HealthStatus_UNHEALTHY
			}
			lv.Backup = lv.Backup && h.Backup
			lv.Hosts = append(lv.Hosts, len(m.Hosts))
			m.Hosts = append(m.Hosts, h)
		}
	}
	for p := 0; p < len(byLevel); p++ {
		l := byLevel[p]
		if l == nil {
			return nil, fmt.Errorf("cluster %s: priority %d has no endpoints (Envoy wants levels from 0 without gaps)", m.Name, p)
		}
		m.Levels = append(m.Levels, l)
	}
	m.computeLoad()
	m.pick()
	return m, nil
}

// readPolicy reads the algorithm and its settings from the cluster's load-balancing policy.
func (m *Cluster) readPolicy(c *clusterv3.Cluster) error {
	pol := c.GetLoadBalancingPolicy().GetPolicies()
	if len(pol) == 0 {
		// No policy: the cluster's lb_policy, round robin unless set, and its common_lb_config's zones.
		m.LocalityWeighted = c.GetCommonLbConfig().GetLocalityWeightedLbConfig() != nil
		m.ZoneAware = c.GetCommonLbConfig().GetZoneAwareLbConfig() != nil
		m.zoneRouting = legacyZoneRoutingOf(c.GetCommonLbConfig().GetZoneAwareLbConfig())
		switch c.GetLbPolicy() {
		case clusterv3.Cluster_LEAST_REQUEST:
			m.Algorithm = ir.LeastRequest
		case clusterv3.Cluster_RANDOM:
			m.Algorithm = ir.Random
		case clusterv3.Cluster_RING_HASH:
			m.Algorithm = ir.RingHash
		case clusterv3.Cluster_MAGLEV:
			m.Algorithm = ir.Maglev
		default:
			m.Algorithm = ir.RoundRobin
		}
		return nil
	}
	tc := pol[0].GetTypedExtensionConfig().GetTypedConfig()
	msg, err := tc.UnmarshalNew()
	if err != nil {
		return fmt.Errorf("cluster %s: load balancing policy %s: %w", m.Name, tc.GetTypeUrl(), err)
	}
	var loc *commonv3.LocalityLbConfig
	var slow *commonv3.SlowStartConfig
	switch p := msg.(type) {
	case *roundrobinv3.RoundRobin:
		m.Algorithm, loc, slow = ir.RoundRobin, p.GetLocalityLbConfig(), p.GetSlowStartConfig()
	case *leastrequestv3.LeastRequest:
		m.Algorithm, loc, slow = ir.LeastRequest, p.GetLocalityLbConfig(), p.GetSlowStartConfig()
	case *randomv3.Random:
		m.Algorithm, loc = ir.Random, p.GetLocalityLbConfig()
	case *ringhashv3.RingHash:
		m.Algorithm = ir.RingHash
		if v := p.GetMinimumRingSize(); v != nil {
			m.ringMin = v.GetValue()
		}
		if v := p.GetMaximumRingSize(); v != nil {
			m.ringMax = v.GetValue()
		}
		m.HashBalanceFactor = p.GetConsistentHashingLbConfig().GetHashBalanceFactor().GetValue()
		m.LocalityWeighted = p.GetLocalityWeightedLbConfig() != nil
	case *maglevv3.Maglev:
		m.Algorithm = ir.Maglev
		if v := p.GetTableSize(); v != nil {
			m.maglevSize = v.GetValue()
		}
		m.HashBalanceFactor = p.GetConsistentHashingLbConfig().GetHashBalanceFactor().GetValue()
		m.LocalityWeighted = p.GetLocalityWeightedLbConfig() != nil
	default:
		// Client-side weighted round robin: weights follow what the endpoints report.
		m.Algorithm = ir.BackendUtilization
	}
	if loc != nil {
		m.LocalityWeighted = loc.GetLocalityWeightedLbConfig() != nil
		m.ZoneAware = loc.GetZoneAwareLbConfig() != nil
		m.zoneRouting = zoneRoutingOf(loc.GetZoneAwareLbConfig())
	}
	m.slow = rampOf(slow)
	m.SlowStart = m.slow != nil
	return nil
}

// pick sets, per level, the hosts it balances over and, for hashing algorithms, its ring or table.
func (m *Cluster) pick() {
	for _, l := range m.Levels {
		l.picked = nil
		for _, i := range l.Hosts {
			if l.Panic || m.Hosts[i].Healthy {
				l.picked = append(l.picked, i)
			}
		}
		if !m.Hashing() {
			continue
		}
		ws := m.hashWeights(l)
		if m.Algorithm == ir.RingHash {
			l.hasher = newRing(ws, m.ringMin, m.ringMax)
		} else {
			l.hasher = newMaglev(ws, m.maglevSize)
		}
	}
}

// hashWeights are the normalised weights a hashing load balancer builds its ring or table from: the
// endpoints' weights over the level's picked endpoints or, with locality weights, each locality's weight
// (over the sum of the level's locality weights) times the endpoint's weight within its locality; a
// locality without weight is left out.
func (m *Cluster) hashWeights(l *Level) []weighted {
	if !m.LocalityWeighted {
		return m.normalized(l.picked)
	}
	var sum uint64
	byLoc := map[int][]int{}
	var order []int
	for _, i := range l.Hosts {
		if _, ok := byLoc[m.Hosts[i].locality]; !ok {
			order = append(order, m.Hosts[i].locality)
			sum += uint64(m.localities[m.Hosts[i].locality].weight)
			byLoc[m.Hosts[i].locality] = nil
		}
	}
	for _, i := range l.picked {
		byLoc[m.Hosts[i].locality] = append(byLoc[m.Hosts[i].locality], i)
	}
	var out []weighted
	if sum == 0 {
		return m.normalized(l.picked)
	}
	for _, li := range order {
		w := m.localities[li].weight
		if w == 0 {
			continue
		}
		for _, h := range m.normalized(byLoc[li]) {
			h.weight *= float64(w) / float64(sum)
			out = append(out, h)
		}
	}
	return out
}

func (m *Cluster) normalized(hosts []int) []weighted {
	var sum float64
	for _, i := range hosts {
		sum += m.effectiveWeight(i)
	}
	out := make([]weighted, 0, len(hosts))
	for _, i := range hosts {
		out = append(out, weighted{host: i, key: m.Hosts[i].Address, weight: m.effectiveWeight(i) / sum})
	}
	return out
}

// computeLoad follows Envoy's priority load (docs: intro/arch_overview/upstream/load_balancing/priority):
// each level's availability is overprovisioning factor × healthy / total (integer arithmetic, capped at
// 100); the load goes to levels in order of priority, each taking its availability scaled to the total
// (capped at 100), rounding left-overs going to the first available level. A level is in panic when the
// total is below 100 and its healthy share is below the panic threshold; when every level is, load
// follows the number of endpoints per level instead.
func (m *Cluster) computeLoad() {
	var total uint32
	for _, l := range m.Levels {
		l.Total = len(l.Hosts)
		l.Healthy = 0
		for _, i := range l.Hosts {
			if m.Hosts[i].Healthy {
				l.Healthy++
			}
		}
		l.Availability, l.Load, l.Panic = 0, 0, false
		if l.Total > 0 {
			l.Availability = min(100, uint32(uint64(m.OverprovisioningFactor)*uint64(l.Healthy)/uint64(l.Total)))
		}
		total += l.Availability
	}
	m.TotalPanic = false
	total = min(total, 100)
	if total > 0 {
		left := uint32(100)
		first := -1
		for i, l := range m.Levels {
			if first < 0 && l.Availability > 0 {
				first = i
			}
			l.Load = min(left, l.Availability*100/total)
			left -= l.Load
		}
		if left > 0 && first >= 0 {
			m.Levels[first].Load += left
		}
	}
	if len(m.Levels) == 0 {
		return
	}
	threshold := min(m.PanicThreshold, 100)
	if threshold == 0 && total == 0 {
		m.Levels[0].Load = 100
		return
	}
	all := true
	for _, l := range m.Levels {
		healthyPct := 0.0
		if l.Total > 0 {
			healthyPct = 100 * float64(l.Healthy) / float64(l.Total)
		}
		l.Panic = total != 100 && healthyPct < float64(threshold)
		all = all && l.Panic
	}
	if !all {
		return
	}
	m.TotalPanic = true
	hosts := len(m.Hosts)
	left := uint32(100)
	first := -1
	for i, l := range m.Levels {
		if first < 0 && l.Total > 0 {
			first = i
		}
		l.Load = uint32(100 * l.Total / hosts)
		left -= l.Load
	}
	m.Levels[first].Load += left
}

// Hashing reports whether the cluster picks endpoints by a request hash.
func (m *Cluster) Hashing() bool { return m.Algorithm == ir.RingHash || m.Algorithm == ir.Maglev }

// Shares returns the expected fraction of the cluster's requests per host (index as Hosts), for the
// Envoys the model is for (From; one without a zone unless set): each Envoy's shares, weighed by its part
// of the requests. Round robin and least request share a level's load by weight over the hosts it
// balances over (least request while requests do not overlap: under concurrent load it favours the least
// busy); random ignores weights, as Envoy's does; hashing algorithms share by the part of the hash space
// each host owns, which is what uniformly spread keys see. With locality weights, zones are picked first
// (see zoneSplit); in an Envoy with a zone, priority 0 may be routed by zone (see zoneRoute).
func (m *Cluster) Shares() []float64 {
	out := make([]float64, len(m.Hosts))
	for _, p := range m.envoys.parts() {
		for i, s := range m.sharesFrom(p.local) {
			out[i] += p.Part * s
		}
	}
	return out
}

// sharesFrom is Shares as one Envoy, placed as local says (nil: no zone), sees them.
func (m *Cluster) sharesFrom(local *Local) []float64 {
	out := make([]float64, len(m.Hosts))
	for _, l := range m.Levels {
		if l.Load == 0 || len(l.picked) == 0 || (l.Panic && m.zoneRouting.failOnPanic) {
			continue
		}
		load := float64(l.Load) / 100
		if l.hasher != nil {
			for i, s := range l.hasher.shares(len(m.Hosts)) {
				out[i] += load * s
			}
			continue
		}
		split := m.zoneSplit(l)
		if split == nil {
			split = m.zoneRoute(l, local)
		}
		if split != nil {
			for i, s := range split {
				out[i] += load * s
			}
			continue
		}
		for _, w := range m.spread(l.picked) {
			out[w.host] += load * w.weight
		}
	}
	return out
}

// From makes the model's shares those of the Envoys e (see Shares).
func (m *Cluster) From(e Envoys) { m.envoys = e }

// spread is how a non-hashing algorithm shares among hosts: by weight, except random, which is uniform.
func (m *Cluster) spread(hosts []int) []weighted {
	if m.Algorithm != ir.Random {
		return m.normalized(hosts)
	}
	out := make([]weighted, 0, len(hosts))
	for _, i := range hosts {
		out = append(out, weighted{host: i, key: m.Hosts[i].Address, weight: 1 / float64(len(hosts))})
	}
	return out
}

// Unserved is the fraction of requests that find no endpoint (every level empty, panic turned off or
// failing traffic, a zone with no healthy endpoint chosen).
func (m *Cluster) Unserved() float64 {
	if len(m.Levels) == 0 {
		return 1
	}
	s := 1.0
	for _, x := range m.Shares() {
		s -= x
	}
	return max(0, math.Round(s*1e9)/1e9)
}

// Level picks the priority level for a hash as Envoy does: hash % 100 + 1 against the running sum of loads.
func (m *Cluster) Level(h uint64) *Level {
	v := uint32(h%100) + 1
	var sum uint32
	for _, l := range m.Levels {
		sum += l.Load
		if v <= sum {
			return l
		}
	}
	if len(m.Levels) > 0 {
		return m.Levels[0]
	}
	return nil
}

// Owner returns the host index that owns hash h (-1 when none) and its level. Only hashing clusters have
// an owner.
func (m *Cluster) Owner(h uint64) (int, *Level) {
	l := m.Level(h)
	if l == nil || l.hasher == nil {
		return -1, l
	}
	return l.hasher.owner(h), l
}

// HostIndex returns the index of the host with this address:port, or -1.
func (m *Cluster) HostIndex(address string) int {
	return slices.IndexFunc(m.Hosts, func(h Host) bool { return h.Address == address })
}

// withDown returns a copy of the model with more hosts down.
func (m *Cluster) withDown(hosts []int, reason string) *Cluster {
	c := *m
	c.Hosts = slices.Clone(m.Hosts)
	for _, i := range hosts {
		c.Hosts[i].Healthy, c.Hosts[i].Reason = false, reason
	}
	c.Levels = nil
	for _, l := range m.Levels {
		c.Levels = append(c.Levels, &Level{Priority: l.Priority, Zones: l.Zones, Hosts: l.Hosts, Backup: l.Backup})
	}
	c.computeLoad()
	c.pick()
	return &c
}

func (l *Level) String() string {
	return fmt.Sprintf("priority %d", l.Priority)
}
