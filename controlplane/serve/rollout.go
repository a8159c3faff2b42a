package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// newRollouts makes the staged rollouts' controller (standalone mode: pushes start rollouts) and loads the
// stored ones, splitting their groups again before the sources load and xDS is served. It returns nil in
// Kubernetes mode. With the etcd store, proxies is every replica's Envoys (fleetProxies): canaries are
// placed and judged across the fleet, and only the leader judges.
func newRollouts(cfg *Config, eng *engine.Engine, tracker *xdsserver.Tracker, st store.Store, shared *store.Etcd,
	proxies func() []xdsserver.ProxyStatus, poller *proxystats.Poller, api *pushapi.Server) (*rollout.Controller, error) {
	switch cfg.RolloutDefault {
	case "", rollout.ModeImmediate, rollout.ModeStaged:
	default:
		return nil, fmt.Errorf("--rollout-default: must be %q or %q, got %q", rollout.ModeImmediate, rollout.ModeStaged, cfg.RolloutDefault)
	}
	if cfg.Kubernetes != nil {
		return nil, nil // newKubeRollouts, once the source is made
	}
	persist, ok := st.(rollout.Persist)
	if !ok {
		return nil, fmt.Errorf("the %T store cannot keep rollouts", st)
	}
	ro := &rollout.Controller{Engine: eng, Proxies: tracker.Proxies, Persist: persist, Log: cfg.Log,
		MinCanaryAge: cfg.RolloutCanaryMinAge}
	if shared != nil {
		ro.Proxies, ro.Leader = proxies, shared.Leader
	}
	watchRollouts(ro, poller)
	if err := ro.Load(); err != nil {
		return nil, fmt.Errorf("loading the stored rollouts: %w", err)
	}
	api.Rollouts, api.RolloutDefault = ro, cfg.RolloutDefault
	if cfg.RolloutDefault == rollout.ModeStaged {
		cfg.Log.Info("every pushed change is rolled out in stages unless the push says --rollout immediate")
	}
	return ro, nil
}

// watchRollouts has the rollouts judged on what poller reads, and poller read the clusters they judge at
// every read (poller nil: no stats are read).
func watchRollouts(ro *rollout.Controller, poller *proxystats.Poller) {
	if poller != nil {
		ro.Histories, poller.Watched = poller.Histories, ro.Watched
	}
}

// followRollouts serves what the stored rollouts say whenever any replica changes them.
func followRollouts(ctx context.Context, cfg *Config, st *store.Etcd, ro *rollout.Controller) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.RolloutChanges():
			if err := ro.Reload(); err != nil {
				cfg.Log.Error("reading the rollouts other replicas wrote; trying again in a second", "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if err := ro.Reload(); err != nil {
					cfg.Log.Error("reading the rollouts", "error", err)
				}
			}
		}
	}
}

// proxiesInterval is how often a replica publishes its Envoys in etcd.
const proxiesInterval = 2 * time.Second

// fleetProxies is every replica's Envoys with the etcd store: this replica's from its tracker, the
// others' as they published them (PublishProxies), read at most once a second.
type fleetProxies struct {
	st      *store.Etcd
	tracker *xdsserver.Tracker
	id      string
	log     *slog.Logger
	// sending tells whether config is on its way to this replica's Envoys, and now is the time: nil, the
	// tracker's Sending and time.Now.
	sending func() bool
	now     func() time.Time

	mu     sync.Mutex
	at     time.Time
	others []xdsserver.ProxyStatus
}

// maxProxiesReport bounds what a replica publishes of its Envoys (etcd refuses requests over 1.5 MiB by
// default); past it the rest are left out, with a warning.
const maxProxiesReport = 768 << 10

// maxReportPutOff bounds how long a replica puts off building its report while config is on its way to
// its Envoys (a stream of changes that never pauses): the others then see its Envoys at most this late.
const maxReportPutOff = 2 * proxiesInterval

// publish keeps this replica's Envoys in etcd (PublishProxies) until ctx ends. The report is built again
// only when the tracker's generation moved: with thousands of Envoys connected and nothing happening,
// building it every interval cost each replica 25 ms of CPU a second and a steady stream of garbage, whose
// collections fell in the middle of changes.
func (f *fleetProxies) publish(ctx context.Context) {
	f.st.PublishProxies(ctx, f.id, proxiesInterval, f.reporter())
}

// reporter returns what publish writes each interval: this replica's report, built again only when the
// tracker's generation has moved since the last one, and not while config is on its way to the Envoys.
// Every change moves the generation (each Envoy's version and state are in the report), and a report
// built in the middle of one is out of date when built: with 3,333 Envoys it took 40-100 ms of a third
// of a core and its garbage from the change being sent. It is built once the change has been answered,
// at most maxReportPutOff after it was first put off.
func (f *fleetProxies) reporter() func() []byte {
	sending, now := f.sending, f.now
	if sending == nil {
		sending = f.tracker.Sending
	}
	if now == nil {
		now = time.Now
	}
	dropped := 0
	var gen uint64
	var report []byte
	var putOff time.Time // when building was first put off; zero when it was not
	return func() []byte {
		// Read before the report is built: a change while it is built moves the generation again.
		g := f.tracker.Generation()
		if report != nil && g == gen {
			return report
		}
		if report != nil && sending() {
			if putOff.IsZero() {
				putOff = now()
			}
			if now().Sub(putOff) < maxReportPutOff {
				return report
			}
		}
		putOff = time.Time{}
		gen = g
		var n int
		report, n = proxiesReport(f.tracker.Proxies(), maxProxiesReport)
		if n != dropped && n > 0 {
			f.log.Warn("too many Envoys to publish in etcd: the rest are left out of rollouts and of the other replicas' stats reads", "left out", n)
		}
		dropped = n
		return report
	}
}

// proxiesReport is what the other replicas need of this replica's Envoys (who they are, where their stats
// are, what they rejected), as JSON of at most max bytes, and how many Envoys it left out.
func proxiesReport(ps []xdsserver.ProxyStatus, max int) ([]byte, int) {
	// Each Envoy is encoded once: the report is their encodings in a JSON array, as json.Marshal of the
	// slice would write it.
	out := append(make([]byte, 0, min(max, 256*len(ps)+2)), '[')
	for i, p := range ps {
		slim := xdsserver.ProxyStatus{NodeID: p.NodeID, Group: p.Group, API: p.API, ConnectedAt: p.ConnectedAt, State: p.State,
			Version: p.Version, AckedAt: p.AckedAt, Current: p.Current, Address: p.Address, StatsPort: p.StatsPort, Zone: p.Zone, Authenticated: p.Authenticated}
		for _, t := range p.Types {
			if t.Nacked {
				slim.Types = append(slim.Types, t)
			}
		}
		b, _ := json.Marshal(slim)
		if len(out)+len(b)+1+1 > max {
			return append(out, ']'), len(ps) - i
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']'), 0
}

// all returns every replica's Envoys; an Envoy that moved between replicas is counted once, on this
// replica when it is here. Another replica's Envoy said to be SYNCED in a report made before the config
// this replica serves its group (a change since, not yet reported) is STALE: it is not known to run it.
func (f *fleetProxies) all() []xdsserver.ProxyStatus {
	own := f.tracker.Proxies()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readOthers()
	if len(f.others) == 0 {
		return own
	}
	type id struct{ node, group string }
	here := make(map[id]bool, len(own))
	for _, p := range own {
		here[id{p.NodeID, p.Group}] = true
	}
	out := slices.Clone(own)
	for _, p := range f.others {
		if k := (id{p.NodeID, p.Group}); !here[k] {
			here[k] = true
			if p.State == xdsserver.Synced && p.Current != f.tracker.TargetVersion(xdscache.KeyFor(p.Group, p.Client), p.NodeID) {
				p.State, p.Message = xdsserver.Stale, "its replica has not yet reported it runs the current config"
			}
			out = append(out, p)
		}
	}
	return out
}

// otherReplicas returns the other replicas' Envoys, as their last reports say (read at most once a second).
func (f *fleetProxies) otherReplicas() []xdsserver.ProxyStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readOthers()
	return slices.Clone(f.others)
}

// readOthers reads the other replicas' reports again when the last read is more than a second old; f.mu is
// held.
func (f *fleetProxies) readOthers() {
	if time.Since(f.at) <= time.Second {
		return
	}
	reports, err := f.st.Proxies()
	if err != nil {
		return
	}
	f.others = f.others[:0]
	for id, b := range reports {
		if id == f.id {
			continue
		}
		var ps []xdsserver.ProxyStatus
		if json.Unmarshal(b, &ps) == nil {
			f.others = append(f.others, ps...)
		}
	}
	f.at = time.Now()
}

// newKubeRollouts makes the staged rollouts' controller in Kubernetes mode: the rollouts are kept in
// ConfigMaps of the leader election's namespace, every replica serves what they say, and the elected
// replica stores and judges them (see kuberollout.go), over fleet (fleetView). Call it after kube.Start,
// before xDS is served.
func newKubeRollouts(cfg *Config, eng *engine.Engine, kube *kubesource.Source, fleet func() []xdsserver.ProxyStatus, poller *proxystats.Poller, api *pushapi.Server) (*rollout.Controller, *kubeRollouts, error) {
	persist := kube.RolloutStore()
	if persist == nil {
		if cfg.RolloutDefault == rollout.ModeStaged {
			return nil, nil, fmt.Errorf("--rollout-default staged with --kubernetes needs --leader-election-namespace: the rollouts are kept in ConfigMaps there")
		}
		cfg.Log.Warn("staged rollouts are off: they need --leader-election-namespace (where their ConfigMaps live); spec.rollout is applied at once")
		return nil, nil, nil
	}
	ro := &rollout.Controller{Engine: eng, Proxies: fleet, Persist: persist, Log: cfg.Log,
		Leader: kube.Leader, LeaderWrites: true, MinCanaryAge: cfg.RolloutCanaryMinAge}
	watchRollouts(ro, poller)
	if err := ro.Load(); err != nil {
		return nil, nil, fmt.Errorf("loading the rollouts: %w", err)
	}
	hook := &kubeRollouts{ro: ro, eng: eng, mode: cfg.RolloutDefault, log: cfg.Log, leader: kube.Leader}
	kube.Rollouts, kube.RolloutKeys, kube.RolloutStatus = hook, ro.Keys, ro.Status
	api.Rollouts = ro
	if cfg.RolloutDefault == rollout.ModeStaged {
		cfg.Log.Info("every applied change is rolled out in stages unless its policy says otherwise")
	}
	return ro, hook, nil
}

// kubeFleet is every replica's Envoys from the Kubernetes proxy reports (kubesource.AllProxies), read at most
// once a second.
func kubeFleet(kube *kubesource.Source) func() []xdsserver.ProxyStatus {
	var mu sync.Mutex
	var at time.Time
	var cached []xdsserver.ProxyStatus
	return func() []xdsserver.ProxyStatus {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > time.Second {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cached, at = kube.AllProxies(ctx), time.Now()
			cancel()
		}
		return cached
	}
}

// otherReplicasView is the Envoys of the other replicas, for what needs this replica's own from its tracker
// apart: the Kubernetes proxy reports (this replica's among them), or the other replicas' in etcd, or none.
func otherReplicasView(api *pushAPI, kube *kubesource.Source, fleet func() []xdsserver.ProxyStatus) func() []xdsserver.ProxyStatus {
	switch {
	case kube != nil:
		return fleet
	case api.fleet != nil:
		return api.fleet.otherReplicas
	}
	return func() []xdsserver.ProxyStatus { return nil }
}

// fleetView is every replica's Envoys, as a policy's status counts them, for the rollouts, the metrics and
// the backend address rules alike: the Kubernetes proxy reports (one reader for them all), or else the push
// API's (what the replicas published in etcd; this replica's alone without it).
func fleetView(api *pushAPI, kube *kubesource.Source) func() []xdsserver.ProxyStatus {
	if kube != nil {
		return kubeFleet(kube)
	}
	return api.proxies
}
