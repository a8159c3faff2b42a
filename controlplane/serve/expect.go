package serve

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// expectation predicts the endpoints' shares in status from what the engine last published for a cluster
// (its Cluster and ClusterLoadAssignment, decoded on demand) and the endpoints the Envoys report as not
// taking traffic, for the zones of the group's Envoys when the cluster routes by zone (each Envoy taken to
// send as many requests). One prediction is kept per cluster, for the health (and, zone-aware, the Envoys'
// zones) it was made for, until the cluster's resources change in what the engine builds (found from the
// states' lineage, see xdscache.Changed): a status read costs a model only when one of them changed, and a
// kept one a map lookup; nothing is computed when a policy changes. The predictions are as many as the
// clusters whose health is read. Each carries what the model cannot predict (trafficmodel.Caveats).
type expectation struct {
	eng *engine.Engine
	// proxies are the Envoys whose zones count; nil: none known.
	proxies func() []xdsserver.ProxyStatus
	// mu is held through a miss too: a prediction made from one state is never kept after the next
	// state's changes were dropped.
	mu     sync.Mutex
	cache  map[expectKey]expectEntry
	states map[string]*xdscache.State
	zones  zoneCensus
}

type expectKey struct{ group, cluster string }

type expectEntry struct {
	down string
	// zones is the census the prediction was made for, when the cluster routes by zone.
	zones     string
	zoneAware bool
	out       map[string]proxystats.Expected
}

// zoneCensus counts each group's Envoys by zone, read again at most once per censusEvery: only zone-aware
// clusters ask, and reading every Envoy's status is not free with thousands of them.
type zoneCensus struct {
	at      time.Time
	byGroup map[string]map[string]int
}

const censusEvery = time.Second

func newExpectation(eng *engine.Engine, proxies func() []xdsserver.ProxyStatus) *expectation {
	return &expectation{eng: eng, proxies: proxies, cache: map[expectKey]expectEntry{}, states: map[string]*xdscache.State{}}
}

// census returns group's Envoys by zone and a key for them. Caller holds mu.
func (x *expectation) census(group string) (map[string]int, string) {
	if x.proxies != nil && time.Since(x.zones.at) >= censusEvery {
		x.zones = zoneCensus{at: time.Now(), byGroup: map[string]map[string]int{}}
		seen := map[string]bool{}
		for _, p := range x.proxies() {
			if k := p.Group + "\x00" + p.NodeID; !seen[k] {
				seen[k] = true
				if x.zones.byGroup[p.Group] == nil {
					x.zones.byGroup[p.Group] = map[string]int{}
				}
				x.zones.byGroup[p.Group][p.Zone]++
			}
		}
	}
	count := x.zones.byGroup[group]
	var key strings.Builder
	for _, z := range slices.Sorted(maps.Keys(count)) {
		fmt.Fprintf(&key, "%s=%d,", z, count[z])
	}
	return count, key.String()
}

func (x *expectation) expect(group, cluster string, down map[string]string) map[string]proxystats.Expected {
	downKey := ""
	if len(down) > 0 {
		downKey = strings.Join(slices.Sorted(maps.Keys(down)), ",")
	}
	k := expectKey{group, cluster}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.follow(group)
	if e, ok := x.cache[k]; ok && e.down == downKey {
		if !e.zoneAware {
			return e.out
		}
		if _, zones := x.census(group); zones == e.zones {
			return e.out
		}
	}
	b, ok := x.eng.Built(group, cluster)
	if !ok {
		return nil
	}
	var backups trafficmodel.Backups
	if b.IR != nil {
		backups = trafficmodel.BackupsOf(b.IR)
	}
	m, err := trafficmodel.NewCluster(b.Cluster, b.Assignment, down, backups)
	if err != nil {
		return nil
	}
	entry := expectEntry{down: downKey, zoneAware: m.ZoneAware}
	if m.ZoneAware {
		var count map[string]int
		count, entry.zones = x.census(group)
		m.From(trafficmodel.EnvoysByZone(count))
	}
	caveats := trafficmodel.Caveats(m)
	var warming func(time.Duration) float64
	if r := m.Ramp(); r != nil {
		warming = r.Fraction
	}
	out := map[string]proxystats.Expected{}
	if !m.ResolvedByEnvoy { // Envoy's endpoints are the addresses the names resolve to, unknown here
		for i, s := range m.Shares() {
			h := m.Hosts[i]
			out[h.Address] = proxystats.Expected{Share: s, Zone: h.Zone, Priority: h.Priority, Backup: h.Backup, Caveats: caveats, Warming: warming}
		}
	}
	entry.out = out
	x.cache[k] = entry
	return out
}

// follow drops the predictions of group's clusters whose resources changed since the state last seen (all
// of them when the group has none now). Caller holds mu.
func (x *expectation) follow(group string) {
	now, seen := x.eng.BuiltState(group), x.states[group]
	if now == seen {
		return
	}
	x.states[group] = now
	if now == nil || seen == nil {
		for k := range x.cache {
			if k.group == group {
				delete(x.cache, k)
			}
		}
		if now == nil {
			delete(x.states, group)
		}
		return
	}
	for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
		for _, name := range xdscache.Changed(seen, now, typ) {
			delete(x.cache, expectKey{group, name})
		}
	}
}
