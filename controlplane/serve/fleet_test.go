package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// Another replica's Envoys count with this replica's, and one reported SYNCED on a config older than the
// one this replica serves its group is not taken to run the current one: it is STALE until its replica
// reports again.
func TestFleetProxiesOthersBehindTheTargetAreStale(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints(), CACert: c.TLS().CA, Cert: c.TLS().Cert, Key: c.TLS().Key, SecretKey: bytes.Repeat([]byte{7}, 32), Prefix: "/fleet/", Passive: true, Timeout: 5 * time.Second}, "here")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cache := xdscache.New()
	s, err := xdscache.NewState(map[string][]proto.Message{resource.ClusterType: {&clusterv3.Cluster{Name: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	cache.Publish("g", s)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &fleetProxies{st: st, tracker: xdsserver.NewTracker(cache, log), id: "here", log: log}

	report, _ := json.Marshal([]xdsserver.ProxyStatus{
		{NodeID: "current", Group: "g", State: xdsserver.Synced, Version: s.Version, Current: s.Version},
		{NodeID: "behind", Group: "g", State: xdsserver.Synced, Version: "older", Current: "older"},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go st.PublishProxies(ctx, "there", time.Hour, func() []byte { return report })

	deadline := time.Now().Add(10 * time.Second)
	var got map[string]string
	for time.Now().Before(deadline) {
		got = map[string]string{}
		for _, p := range f.all() {
			got[p.NodeID] = p.State
		}
		if len(got) == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got["current"] != xdsserver.Synced || got["behind"] != xdsserver.Stale {
		t.Errorf("the other replica's Envoys: %v, want current %s and behind %s", got, xdsserver.Synced, xdsserver.Stale)
	}
}
