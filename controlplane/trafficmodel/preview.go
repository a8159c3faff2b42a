package trafficmodel

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// MovementSamples is how many hash values key movement is measured over: the fraction's standard error is
// below 0.15 percentage points.
const MovementSamples = 200_000

// SampleHashes returns n hash values spread like the xxHash64 of distinct keys (splitmix64 of 0..n-1: a
// fixed sequence, so that previews are reproducible).
func SampleHashes(n int) []uint64 {
	out := make([]uint64, n)
	x := uint64(0)
	for i := range out {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		out[i] = z ^ (z >> 31)
	}
	return out
}

// MovedKeys returns the fraction of hashes whose owning endpoint (by address) differs between two models
// of a hashing cluster. A hash with no owner on either side counts as moved.
func MovedKeys(before, after *Cluster, hashes []uint64) float64 {
	if len(hashes) == 0 {
		return 0
	}
	moved := 0
	for _, h := range hashes {
		a, _ := before.Owner(h)
		b, _ := after.Owner(h)
		if a < 0 || b < 0 || before.Hosts[a].Address != after.Hosts[b].Address {
			moved++
		}
	}
	return float64(moved) / float64(len(hashes))
}

// Change is one endpoint's share of a route before and after.
type Change struct {
	Route   string `json:"route"`
	Backend string `json:"backend"`
	Address string `json:"address"`
	Zone    string `json:"zone,omitempty"`
	// Priority is the endpoint's priority level (after), and Backup says it is a backup endpoint.
	Priority int     `json:"priority"`
	Backup   bool    `json:"backup,omitempty"`
	Before   float64 `json:"before"`
	After    float64 `json:"after"`
	// State is "added", "removed", "down: reason", "warming up: N % of its weight" (slow start) or empty.
	State string `json:"state,omitempty"`
}

// Movement is what a change does to sticky traffic of one route's backend.
type Movement struct {
	Route   string `json:"route"`
	Backend string `json:"backend"`
	// Kind is "hash keys" (ring hash, Maglev) or "sessions" (session persistence).
	Kind string `json:"kind"`
	// Moved is the fraction of keys (or established sessions) that land on another endpoint after.
	Moved float64 `json:"moved"`
	Note  string  `json:"note,omitempty"`
}

// Preview compares the traffic of one policy before and after a change.
type Preview struct {
	Policy    string     `json:"policy"`
	Changes   []Change   `json:"endpoints"`
	Movements []Movement `json:"movements,omitempty"`
	// Failover is what losing endpoints of the first zone does, per backend with zone failover (after).
	Failover []FailoverStep `json:"failover,omitempty"`
	Added    bool           `json:"added,omitempty"`
	Removed  bool           `json:"removed,omitempty"`
	// Envoys names the Envoys the shares are for, when a backend routes by the Envoy's zone.
	Envoys string `json:"envoys,omitempty"`
	// Caveats are what the prediction leaves out, per backend (after the change; before, for a policy
	// removed).
	Caveats []BackendCaveats `json:"caveats,omitempty"`
	// SpecRoutes is the index in the policy's spec.routes of each route Changes and Movements name (after
	// the change; before, for a route removed).
	SpecRoutes map[string]int `json:"specRoutes,omitempty"`
}

type shareKey struct{ route, backend, address string }

// Compare previews the change from before to after; either may be nil (a policy added or removed).
func Compare(before, after *Policy) *Preview {
	pv := &Preview{}
	var bs, as []EndpointShare
	if before != nil {
		pv.Policy = types.NamespacedName{Namespace: before.Namespace, Name: before.Name}.String()
		bs = before.Shares()
	} else {
		pv.Added = true
	}
	if after != nil {
		pv.Policy = types.NamespacedName{Namespace: after.Namespace, Name: after.Name}.String()
		as = after.Shares()
	} else {
		pv.Removed = true
	}
	idx := map[shareKey]int{}
	add := func(e EndpointShare) *Change {
		k := shareKey{e.Route, e.Backend, e.Address}
		if i, ok := idx[k]; ok {
			return &pv.Changes[i]
		}
		idx[k] = len(pv.Changes)
		pv.Changes = append(pv.Changes, Change{Route: e.Route, Backend: e.Backend, Address: e.Address, Zone: e.Zone, Priority: e.Priority, Backup: e.Backup})
		return &pv.Changes[len(pv.Changes)-1]
	}
	inBefore, inAfter := map[shareKey]bool{}, map[shareKey]bool{}
	for _, e := range bs {
		c := add(e)
		c.Before += e.Share
		inBefore[shareKey{e.Route, e.Backend, e.Address}] = true
	}
	for _, e := range as {
		c := add(e)
		c.After += e.Share
		c.Priority, c.Backup = e.Priority, e.Backup
		inAfter[shareKey{e.Route, e.Backend, e.Address}] = true
		switch {
		case !e.Healthy:
			c.State = "down: " + e.Reason
		case e.Warming > 0:
			c.State = fmt.Sprintf("warming up: %.0f %% of its weight", 100*e.Warming)
		}
	}
	for i := range pv.Changes {
		c := &pv.Changes[i]
		k := shareKey{c.Route, c.Backend, c.Address}
		switch {
		case !inBefore[k] && before != nil:
			c.State = "added"
		case !inAfter[k] && after != nil:
			c.State = "removed"
		}
	}
	if last := cmp.Or(after, before); last != nil {
		pv.Envoys, pv.Caveats = last.envoysNote(), last.caveats()
	}
	for _, m := range []*Policy{before, after} {
		if m == nil {
			continue
		}
		for name, i := range m.SpecRoutes {
			if pv.SpecRoutes == nil {
				pv.SpecRoutes = map[string]int{}
			}
			pv.SpecRoutes[name] = i // after's wins
		}
	}
	for _, e := range append(bs, as...) {
		if c := &pv.Changes[idx[shareKey{e.Route, e.Backend, e.Address}]]; e.ResolvedByEnvoy && c.State == "" {
			// The share is the name's; Envoy splits it over the addresses the name resolves to.
			c.State = "host name, resolved by Envoy at run time"
		}
	}
	if before == nil || after == nil {
		return pv
	}
	var hashes []uint64 // sampled when a hashing backend is compared: 1.6 MB
	for _, r := range after.Routes {
		old := before.Route(r.Name)
		if old == nil {
			continue
		}
		for _, wc := range r.Clusters {
			ac := after.Clusters[wc.Name]
			if ac == nil { // the error share
				continue
			}
			backend := after.BackendOf[wc.Name]
			i := slices.IndexFunc(old.Clusters, func(o WeightedCluster) bool { return before.BackendOf[o.Name] == backend })
			if i < 0 {
				continue
			}
			bc := before.Clusters[old.Clusters[i].Name]
			if bc == nil {
				continue
			}
			if ac.Hashing() && bc.Hashing() && len(r.Hash) > 0 {
				if hashes == nil {
					hashes = SampleHashes(MovementSamples)
				}
				m := Movement{Route: r.Name, Backend: backend, Kind: "hash keys", Moved: MovedKeys(bc, ac, hashes)}
				if len(r.Clusters) > 1 {
					m.Note = "the route splits over several backends at random, per request: keys stick within a backend only"
				}
				pv.Movements = append(pv.Movements, m)
			}
		}
		if r.Session != nil && old.Session != nil {
			pv.Movements = append(pv.Movements, sessionMovement(r.Name, before, after))
		}
	}
	for _, name := range sortedKeys(after.Clusters) {
		if f := FailoverSteps(after.Clusters[name], after.BackendOf[name]); len(f) > 0 {
			pv.Failover = append(pv.Failover, f...)
		}
	}
	return pv
}

// sessionMovement: an established session stays on its endpoint while that endpoint is there and healthy,
// or draining in a backend that keeps the sessions of draining endpoints; the sessions of the endpoints
// that leave or go down are balanced again.
func sessionMovement(route string, before, after *Policy) Movement {
	alive := map[string]bool{}
	for _, e := range after.Shares() {
		if e.Route == route && e.KeepsSessions {
			alive[e.Address] = true
		}
	}
	moved := 0.0
	for _, e := range before.Shares() {
		if e.Route == route && !alive[e.Address] {
			moved += e.Share
		}
	}
	return Movement{Route: route, Kind: "sessions", Moved: moved,
		Note: "sessions pinned to an endpoint that leaves or goes down are balanced again; the others stay (draining endpoints keep theirs unless the backend sets drainingSessions: Move)"}
}

// FailoverStep says where a backend's traffic goes when the first zone loses Lost of its Of endpoints.
type FailoverStep struct {
	Backend string `json:"backend"`
	Zone    string `json:"zone"`
	Lost    int    `json:"lost"`
	Of      int    `json:"of"`
	// Load is the percentage per level, named by its zones.
	Load  []ZoneLoad `json:"load"`
	Panic bool       `json:"panic,omitempty"`
}

// ZoneLoad is the share of one priority level.
type ZoneLoad struct {
	Zones   []string `json:"zones"`
	Backup  bool     `json:"backup,omitempty"`
	Percent uint32   `json:"percent"`
}

// FailoverSteps lists, for a cluster with more than one priority level, the load per level as the first
// level loses its healthy endpoints one by one.
func FailoverSteps(c *Cluster, backend string) []FailoverStep {
	if len(c.Levels) < 2 {
		return nil
	}
	first := c.Levels[0]
	var healthy []int
	for _, i := range first.Hosts {
		if c.Hosts[i].Healthy {
			healthy = append(healthy, i)
		}
	}
	var out []FailoverStep
	for k := 1; k <= len(healthy); k++ {
		m := c.withDown(healthy[:k], "what-if")
		st := FailoverStep{Backend: backend, Zone: zonesLabel(first.Zones), Lost: first.Total - first.Healthy + k, Of: first.Total, Panic: m.TotalPanic}
		for _, l := range m.Levels {
			st.Load = append(st.Load, ZoneLoad{Zones: l.Zones, Backup: l.Backup, Percent: l.Load})
			st.Panic = st.Panic || l.Panic
		}
		out = append(out, st)
	}
	return out
}

func zonesLabel(z []string) string {
	if len(z) == 1 {
		if z[0] == "" {
			return "(no zone)"
		}
		return z[0]
	}
	return fmt.Sprint(z)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
