package serve

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// expectation predicts the endpoints' shares in status from what the engine last published for a cluster
// (its Cluster and ClusterLoadAssignment, decoded on demand) and the endpoints the Envoys report as not
// taking traffic. One prediction is kept per cluster, for the health it was made for, until the cluster's
// resources change in what the engine builds (found from the states' lineage, see xdscache.Changed): a
// status read costs a model only when one of them changed, and a kept one a map lookup; nothing is
// computed when a policy changes. The predictions are as many as the clusters whose health is read.
type expectation struct {
	eng *engine.Engine
	// mu is held through a miss too: a prediction made from one state is never kept after the next
	// state's changes were dropped.
	mu     sync.Mutex
	cache  map[expectKey]expectEntry
	states map[string]*xdscache.State
}

type expectKey struct{ group, cluster string }

type expectEntry struct {
	down string
	out  map[string]proxystats.Expected
}

func newExpectation(eng *engine.Engine) *expectation {
	return &expectation{eng: eng, cache: map[expectKey]expectEntry{}, states: map[string]*xdscache.State{}}
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
		return e.out
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
	out := map[string]proxystats.Expected{}
	if !m.ResolvedByEnvoy { // Envoy's endpoints are the addresses the names resolve to, unknown here
		for i, s := range m.Shares() {
			h := m.Hosts[i]
			out[h.Address] = proxystats.Expected{Share: s, Zone: h.Zone, Priority: h.Priority, Backup: h.Backup}
		}
	}
	x.cache[k] = expectEntry{down: downKey, out: out}
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
