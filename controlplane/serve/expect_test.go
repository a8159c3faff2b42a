package serve

import (
	"io"
	"log/slog"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// TestExpectationReadsThePublishedCluster: the expected shares of examples/backup-endpoints.yaml's backend,
// from the cluster and assignment the engine published: nothing to the backup while the primaries are
// healthy, everything once both are down; a second call with the same health is the kept answer.
func TestExpectationReadsThePublishedCluster(t *testing.T) {
	docs, err := manifest.ReadPath("../../examples/backup-endpoints.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	eng.Reach = reach.Loopback // the example's backends are on loopback, as the demo allows
	eng.Set(engine.SourceStore, manifest.Policies(docs))
	x := newExpectation(eng)
	group, cluster := v1alpha1.DefaultProxyGroup, "default/backup/app"
	got := x.expect(group, cluster, nil)
	if len(got) != 3 || got["127.0.0.1:18081"].Share != 0.5 || got["127.0.0.1:18083"].Share != 0 || !got["127.0.0.1:18083"].Backup || got["127.0.0.1:18083"].Priority != 1 {
		t.Fatalf("all healthy: %+v", got)
	}
	down := map[string]string{"127.0.0.1:18081": "active health check failed", "127.0.0.1:18082": "active health check failed"}
	if got := x.expect(group, cluster, down); got["127.0.0.1:18083"].Share != 1 || got["127.0.0.1:18081"].Share != 0 {
		t.Errorf("primaries down: %+v", got)
	}
	if len(x.cache) != 2 {
		t.Errorf("%d predictions kept, want 2", len(x.cache))
	}
	x.expect(group, cluster, down)
	if len(x.cache) != 2 {
		t.Errorf("the same health computed again: %d kept", len(x.cache))
	}
	if x.expect(group, "default/nosuch/app", nil) != nil || x.expect("nosuch", cluster, nil) != nil {
		t.Error("an unknown cluster or group got a prediction")
	}
}
