package trafficmodel

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// OverprovisioningFactor is Envoy's default, in percent: a priority level counts as fully available while
// 100/1.4 ≈ 71.4 % of its endpoints are healthy.
const OverprovisioningFactor = 140

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
}

// Level is one priority level: the endpoints of one or more zones.
type Level struct {
	Priority int      `json:"priority"`
	Zones    []string `json:"zones,omitempty"`
	// Hosts index into Cluster.Hosts, in the order Envoy gets them.
	Hosts   []int `json:"-"`
	Healthy int   `json:"healthy"`
	Total   int   `json:"total"`
	// Availability is Envoy's health of the level: min(100, 140 × healthy / total), in percent.
	Availability uint32 `json:"availability"`
	// Load is the percentage of requests the level gets.
	Load uint32 `json:"load"`
	// Panic: too few healthy endpoints, so the level balances over all of them, healthy or not.
	Panic bool `json:"panic"`
	// picked are the hosts the level balances over (healthy ones, or all in panic).
	picked []int
	hasher hasher
}

// Cluster is the load-balancing model of one IR cluster for a given health.
type Cluster struct {
	Name      string       `json:"name"`
	Algorithm ir.Algorithm `json:"algorithm"`
	Hosts     []Host       `json:"hosts"`
	Levels    []*Level     `json:"levels"`
	// PanicThreshold in percent, as Envoy rounds it.
	PanicThreshold uint64 `json:"panicThreshold"`
	// TotalPanic: every level is in panic, load follows the number of endpoints per level.
	TotalPanic bool `json:"totalPanic"`
	// zoneWeights are loadBalancing.zoneWeights (see zoneSplit).
	zoneWeights map[string]uint32
	// ResolvedByEnvoy says the endpoints are host names Envoy resolves at run time (a DNS backend): the
	// model balances over the names, while Envoy balances over the addresses they resolve to.
	ResolvedByEnvoy bool `json:"resolvedByEnvoy,omitempty"`
	logicalDNS      bool
}

// HostKey is the string Envoy hashes for an endpoint on the ring and in the Maglev table: its address as
// Envoy prints it, "ip:port" or "[ipv6]:port".
func HostKey(address string, port uint32) string {
	return net.JoinHostPort(address, strconv.FormatUint(uint64(port), 10))
}

// NewCluster models c with the endpoints in down (and draining ones) out of load balancing.
func NewCluster(c *ir.Cluster, down Down) *Cluster {
	m := &Cluster{Name: c.Name, Algorithm: c.Algorithm, PanicThreshold: DefaultPanicThreshold, ResolvedByEnvoy: c.DNS != nil,
		logicalDNS: c.DNS != nil && c.DNS.Logical}
	if c.PanicThreshold != nil {
		m.PanicThreshold = uint64(math.Round(*c.PanicThreshold))
	}
	for _, w := range c.ZoneWeights {
		if m.zoneWeights == nil {
			m.zoneWeights = map[string]uint32{}
		}
		m.zoneWeights[w.Zone] = w.Weight
	}
	prio := zonePriorities(c)
	byLevel := map[int]*Level{}
	for _, e := range c.Endpoints {
		h := Host{Address: HostKey(e.Address, e.Port), Zone: e.Zone, Weight: e.Weight, Healthy: true, Priority: prio(e.Zone)}
		if e.Draining {
			h.Healthy, h.Reason = false, "draining"
		}
		if r, ok := down[h.Address]; ok {
			h.Healthy, h.Reason = false, r
		}
		m.Hosts = append(m.Hosts, h)
		l := byLevel[h.Priority]
		if l == nil {
			l = &Level{Priority: h.Priority}
			byLevel[h.Priority] = l
		}
		if !slices.Contains(l.Zones, e.Zone) {
			l.Zones = append(l.Zones, e.Zone)
		}
	}
	// Envoy receives each level's hosts locality by locality, localities in the order their zone first
	// appears (see xdsbuild.LoadAssignment); ring building depends on that order.
	for _, l := range byLevel {
		for _, z := range l.Zones {
			for i, h := range m.Hosts {
				if h.Priority == l.Priority && h.Zone == z {
					l.Hosts = append(l.Hosts, i)
				}
			}
		}
	}
	for p := 0; p < len(byLevel); p++ {
		m.Levels = append(m.Levels, byLevel[p])
	}
	m.computeLoad()
	for _, l := range m.Levels {
		l.picked = nil
		for _, i := range l.Hosts {
			if l.Panic || m.Hosts[i].Healthy {
				l.picked = append(l.picked, i)
			}
		}
		if c.Algorithm == ir.RingHash || c.Algorithm == ir.Maglev {
			ws := m.normalized(l.picked)
			if c.Algorithm == ir.RingHash {
				minSize, maxSize := uint64(DefaultMinRingSize), uint64(DefaultMaxRingSize)
				if c.RingHash != nil {
					minSize, maxSize = c.RingHash.Min, c.RingHash.Max
				}
				l.hasher = newRing(ws, minSize, maxSize)
			} else {
				size := uint64(DefaultMaglevTableSize)
				if c.MaglevTableSize > 0 {
					size = c.MaglevTableSize
				}
				l.hasher = newMaglev(ws, size)
			}
		}
	}
	return m
}

// zonePriorities mirrors xdsbuild's: listed zones take the level of their place in the list, unlisted ones
// the last, and levels without endpoints are dropped so that they run from 0 without gaps.
func zonePriorities(c *ir.Cluster) func(string) int {
	if len(c.ZoneFailover) == 0 {
		return func(string) int { return 0 }
	}
	rank := func(zone string) int {
		if i := slices.Index(c.ZoneFailover, zone); i >= 0 {
			return i
		}
		return len(c.ZoneFailover)
	}
	present := map[int]bool{}
	for _, e := range c.Endpoints {
		present[rank(e.Zone)] = true
	}
	var levels []int
	for r := range present {
		levels = append(levels, r)
	}
	slices.Sort(levels)
	return func(zone string) int { return slices.Index(levels, rank(zone)) }
}

func (m *Cluster) normalized(hosts []int) []weighted {
	var sum uint64
	for _, i := range hosts {
		sum += uint64(m.Hosts[i].Weight)
	}
	out := make([]weighted, 0, len(hosts))
	for _, i := range hosts {
		out = append(out, weighted{host: i, key: m.Hosts[i].Address, weight: float64(m.Hosts[i].Weight) / float64(sum)})
	}
	return out
}

// computeLoad follows Envoy's LoadBalancerBase: each level's availability is 140 × healthy / total (integer
// arithmetic, capped at 100); the load goes to levels in order of priority, each taking its availability
// scaled to the total (capped at 100), rounding left-overs going to the first available level. A level is in
// panic when the total is below 100 and its healthy share is below the panic threshold; when every level is,
// load follows the number of endpoints per level instead.
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
		if l.Total > 0 {
			l.Availability = min(100, uint32(OverprovisioningFactor*l.Healthy/l.Total))
		}
		total += l.Availability
	}
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

// Shares returns the expected fraction of the cluster's requests per host (index as Hosts). Weighted
// algorithms share a level's load by weight over the hosts it balances over; hashing ones by the part of
// the hash space each host owns, which is what uniformly spread keys see.
func (m *Cluster) Shares() []float64 {
	out := make([]float64, len(m.Hosts))
	for _, l := range m.Levels {
		if l.Load == 0 || len(l.picked) == 0 {
			continue
		}
		load := float64(l.Load) / 100
		switch h := l.hasher.(type) {
		case *ring:
			for i, s := range h.shares(len(m.Hosts)) {
				out[i] += load * s
			}
		case *maglev:
			for i, s := range h.shares(len(m.Hosts)) {
				out[i] += load * s
			}
		default:
			if split := m.zoneSplit(l); split != nil {
				for i, s := range split {
					out[i] += load * s
				}
				continue
			}
			for _, w := range m.normalized(l.picked) {
				out[w.host] += load * w.weight
			}
		}
	}
	return out
}

// Unserved is the fraction of requests that find no endpoint (every level empty, panic turned off).
func (m *Cluster) Unserved() float64 {
	s := 0.0
	for _, l := range m.Levels {
		if len(l.picked) == 0 {
			s += float64(l.Load) / 100
		}
	}
	if len(m.Levels) == 0 {
		return 1
	}
	return s
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

func (l *Level) String() string {
	return fmt.Sprintf("priority %d", l.Priority)
}
