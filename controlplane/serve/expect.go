package serve

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

// maxExpectCached bounds the predictions kept: one per backend whose health is read, until its config or
// health changes.
const maxExpectCached = 4096

// expectation predicts the endpoints' shares in status from what the engine last published for a cluster
// (its Cluster and ClusterLoadAssignment, decoded on demand) and the endpoints the Envoys report as not
// taking traffic. Predictions are kept by cluster version and health, so a status read costs a model only
// when one of them changed; nothing is computed when a policy changes.
type expectation struct {
	eng   *engine.Engine
	mu    sync.Mutex
	cache map[string]map[string]proxystats.Expected
}

func newExpectation(eng *engine.Engine) *expectation {
	return &expectation{eng: eng, cache: map[string]map[string]proxystats.Expected{}}
}

func (x *expectation) expect(group, cluster string, down map[string]string) map[string]proxystats.Expected {
	version, ok := x.eng.BuiltVersion(group, cluster)
	if !ok {
		return nil
	}
	key := group + "\x00" + cluster + "\x00" + version + "\x00" + strings.Join(slices.Sorted(maps.Keys(down)), ",")
	x.mu.Lock()
	out, ok := x.cache[key]
	x.mu.Unlock()
	if ok {
		return out
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
	out = map[string]proxystats.Expected{}
	if !m.ResolvedByEnvoy { // Envoy's endpoints are the addresses the names resolve to, unknown here
		for i, s := range m.Shares() {
			h := m.Hosts[i]
			out[h.Address] = proxystats.Expected{Share: s, Zone: h.Zone, Priority: h.Priority, Backup: h.Backup}
		}
	}
	x.mu.Lock()
	if len(x.cache) >= maxExpectCached {
		clear(x.cache)
	}
	x.cache[key] = out
	x.mu.Unlock()
	return out
}
