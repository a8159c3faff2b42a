package e2e

// Stats from one Envoy count for that Envoy's row only (issue 28, finding 7): a client with a valid
// certificate of the group declares a stats port and serves made-up stats that say every endpoint is
// ejected. Real lbplane, a real Envoy, real backends.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// lyingStats serves, on a loopback port, Envoy's /clusters of e with every host marked as failing its
// active health check, and no counters: what an attacker holding a group certificate would serve.
func lyingStats(t *testing.T, e *Envoy) int {
	t.Helper()
	resp, err := adminDo(e, http.MethodGet, "/clusters?format=json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	hosts := 0
	for _, c := range doc["cluster_statuses"].([]any) {
		hs, _ := c.(map[string]any)["host_statuses"].([]any)
		for _, h := range hs {
			h.(map[string]any)["health_status"] = map[string]any{"failed_active_health_check": true, "eds_health_status": "HEALTHY"}
			hosts++
		}
	}
	if hosts == 0 {
		t.Fatalf("the real Envoy has no hosts to lie about: %s", b)
	}
	lie, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/clusters") {
			w.Write(lie)
		}
		// Anything else (the stats) answers empty: no counters.
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return lis.Addr().(*net.TCPAddr).Port
}

// intruderStream connects to lbplane's xDS port with a certificate lbplane issued for node in group, declares
// statsPort as its stats port, and acknowledges every response, as an Envoy does, until the test ends.
func intruderStream(t *testing.T, l *Lbplane, node, group string, statsPort int) {
	t.Helper()
	conn := xdsConn(t, l, issuedPair(t, l, node, group), false)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, err := structpb.NewStruct(map[string]any{xdsserver.StatsPortKey: float64(statsPort)})
	if err != nil {
		t.Fatal(err)
	}
	var sendMu sync.Mutex
	send := func(r *discovery.DiscoveryRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return s.Send(r)
	}
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		if err := send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: node, Cluster: group, Metadata: md}, TypeUrl: typ}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for { // ends with the stream (cancel)
			r, err := s.Recv()
			if err != nil {
				return
			}
			if send(&discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo}) != nil {
				return
			}
		}
	}()
	eventually(t, 20*time.Second, node+" acknowledges its config", func() error {
		ps, err := l.Client.Proxies(context.Background())
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.NodeID == node && p.State == xdsserver.Synced && p.Version != "" {
				return nil
			}
		}
		return fmt.Errorf("proxies: %v", nodesOf(ps))
	})
}

func TestAttackFakeStatsCannotEjectForEveryone(t *testing.T) {
	t.Parallel()
	bs := startBackends(t, "a", "b", "c")
	e := setupWith(t, statusPolicy, map[string]any{"B": bs}, bs...)
	waitServing(t, e.URL, "a", "b", "c")
	// Control: the real Envoy alone reports all three healthy.
	eventually(t, 20*time.Second, "the real Envoy's report", func() error {
		b, err := backendStatus(t, e.L, "st", "app")
		if err != nil {
			return err
		}
		if b.Proxies != 1 || b.Endpoints.Total != 3 || b.Endpoints.Healthy != 3 {
			return fmt.Errorf("%+v", b)
		}
		return nil
	})

	intruderStream(t, e.L, "intruder", "default", lyingStats(t, e.E))

	var b v1alpha1.BackendStatus
	eventually(t, 30*time.Second, "both Envoys reported", func() error {
		var err error
		if b, err = backendStatus(t, e.L, "st", "app"); err != nil {
			return err
		}
		if b.Proxies != 2 || len(b.PerProxy) != 2 {
			return fmt.Errorf("proxies %d, per proxy %+v", b.Proxies, b.PerProxy)
		}
		return nil
	})
	// The lie counts for the intruder's row only; the backend stays healthy, and the mismatch is shown.
	if b.Endpoints.Total != 3 || b.Endpoints.Healthy != 3 || b.Endpoints.Ejected != 0 || len(b.Ejected) != 0 {
		t.Errorf("one Envoy's stats ejected endpoints for everyone: %+v, ejected %+v", b.Endpoints, b.Ejected)
	}
	if b.Endpoints.Mismatched != 3 || len(b.Mismatches) != 3 {
		t.Errorf("the mismatch is not shown: %+v, mismatches %+v", b.Endpoints, b.Mismatches)
	}
	for _, m := range b.Mismatches {
		if m.Counted || !slices.Equal(m.EjectedOn, []string{"intruder"}) || !slices.Equal(m.HealthyOn, []string{e.E.NodeID}) {
			t.Errorf("mismatch %+v", m)
		}
	}
	rows := map[string]v1alpha1.ProxyBackendHealth{}
	for _, r := range b.PerProxy {
		rows[r.Node] = r
	}
	if r := rows[e.E.NodeID]; r.Endpoints.Healthy != 3 || r.Endpoints.Ejected != 0 || r.Mismatch {
		t.Errorf("the real Envoy's row: %+v", r)
	}
	if r := rows["intruder"]; r.Endpoints.Ejected != 3 || !r.Mismatch {
		t.Errorf("the intruder's row: %+v", r)
	}
	// lbctl status NAME -o json prints the policy, as lbctl get NAME -o json does.
	var pol v1alpha1.LoadBalancerPolicy
	if err := json.Unmarshal([]byte(lbctlOK(t, e.L, "status", "st", "-o", "json")), &pol); err != nil {
		t.Fatal(err)
	}
	st := pol.Status
	if st.Endpoints.Healthy != 3 || st.Endpoints.Mismatched != 3 {
		t.Errorf("policy counts: %+v", st.Endpoints)
	}
	text := lbctlOK(t, e.L, "status", "st")
	for _, want := range []string{"AGREES", "intruder", "The Envoys disagree", "Envoys disagree; ejected on 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("lbctl status st lacks %q:\n%s", want, text)
		}
	}
	t.Logf("lbctl status st with a lying Envoy:\n%s", text)
}
