package serve

import (
	"context"
	"log/slog"
	"time"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/healthhistory"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
)

// newHistory keeps the health events and series of what poller reads, naming each cluster's policy and
// backend from what eng published.
func newHistory(eng *engine.Engine, log *slog.Logger) *healthhistory.Recorder {
	return &healthhistory.Recorder{Log: log, Owner: func(group, cluster string) (healthhistory.Owner, bool) {
		res, origin := eng.Result()
		for k, pr := range res.Policies.All() {
			if pr.ProxyGroup != group {
				continue
			}
			name, ok := pr.BackendOf(cluster)
			if !ok {
				continue
			}
			o := healthhistory.Owner{Policy: k, Backend: name}
			for _, p := range eng.Policies(origin[k]) {
				if objkey.Of(p) != k {
					continue
				}
				for _, b := range p.Spec.Backends {
					if b.Name == name && b.HealthCheck != nil && b.HealthCheck.Active != nil {
						o.ActiveChecks = true
					}
				}
			}
			return o, true
		}
		return healthhistory.Owner{}, false
	}}
}

// recordHistory hands every reading of poller to rec, each interval, until ctx ends.
func recordHistory(ctx context.Context, rec *healthhistory.Recorder, poller *proxystats.Poller, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			rec.Observe(now, poller.ByProxy(), poller.Health())
		}
	}
}
