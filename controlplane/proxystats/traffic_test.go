package proxystats

import (
	"log/slog"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// The stats lbplane asks for, as Envoy 1.40 prints them (tag-extracted names): the responses by class, the
// bytes and the requests without a healthy endpoint, and the same of another kind of stat (internal,
// external, a virtual cluster) that must not count twice.
const classesAndBytes = `# TYPE envoy_cluster_upstream_rq_xx counter
envoy_cluster_upstream_rq_xx{envoy_response_code_class="2",envoy_cluster_name="ns/p/app"} 90
envoy_cluster_upstream_rq_xx{envoy_response_code_class="4",envoy_cluster_name="ns/p/app"} 7
envoy_cluster_upstream_rq_xx{envoy_response_code_class="5",envoy_cluster_name="ns/p/app"} 3
# TYPE envoy_cluster_external_upstream_rq_xx counter
envoy_cluster_external_upstream_rq_xx{envoy_response_code_class="2",envoy_cluster_name="ns/p/app"} 90
# TYPE envoy_vhost_vcluster_upstream_rq_xx counter
envoy_vhost_vcluster_upstream_rq_xx{envoy_response_code_class="2",envoy_virtual_host="ns/p",envoy_virtual_cluster="other"} 90
# TYPE envoy_cluster_upstream_cx_rx_bytes_total counter
envoy_cluster_upstream_cx_rx_bytes_total{envoy_cluster_name="ns/p/app"} 120000
# TYPE envoy_cluster_upstream_cx_tx_bytes_total counter
envoy_cluster_upstream_cx_tx_bytes_total{envoy_cluster_name="ns/p/app"} 8000
# TYPE envoy_cluster_upstream_cx_none_healthy counter
envoy_cluster_upstream_cx_none_healthy{envoy_cluster_name="ns/p/app"} 2
`

func TestParseClassesBytesAndNoneHealthy(t *testing.T) {
	clusters := map[string]*Cluster{}
	if _, err := ParseStats([]byte(classesAndBytes), clusters); err != nil {
		t.Fatal(err)
	}
	want := Counters{Success: 90, Errors4xx: 7, Errors5xx: 3, RxBytes: 120000, TxBytes: 8000, NoneHealthy: 2}
	if got := clusters["ns/p/app"].Counters; got != want || len(clusters) != 1 {
		t.Errorf("counters %+v (clusters %d), want %+v", got, len(clusters), want)
	}
}

// Responses by class, the client-facing error rate, connections and bytes cover the window, per endpoint
// and summed over the Envoys; a counter that went back (a restarted Envoy) counts in full.
func TestTrafficFiguresOverTheWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration, c Counters, hosts ...Host) *Sample {
		s := &Sample{At: t0.Add(d), StatsAt: t0.Add(d), Clusters: map[string]*Cluster{"ns/p/app": {Hosts: hosts, Counters: c}}}
		return s
	}
	p1 := History{Group: "g", Node: "n1", Samples: []*Sample{
		at(0, Counters{Success: 100, Errors4xx: 10, RxBytes: 1000, TxBytes: 100},
			Host{Address: "a:1", Total: 110, CxTotal: 4, CxActive: 2}),
		at(30*time.Second, Counters{Success: 190, Redirection: 1, Errors4xx: 12, Errors5xx: 5, RxBytes: 5000, TxBytes: 300, NoneHealthy: 1},
			Host{Address: "a:1", Total: 208, Errors: 5, CxTotal: 9, CxConnectFail: 1, Timeouts: 2, CxActive: 3}),
	}}
	p2 := History{Group: "g", Node: "n2", Samples: []*Sample{
		at(0, Counters{Success: 500, RxBytes: 9000}, Host{Address: "a:1", Total: 500, CxTotal: 50}),
		// Restarted: everything it holds now counts.
		at(30*time.Second, Counters{Success: 20, RxBytes: 200, TxBytes: 10}, Host{Address: "a:1", Total: 20, CxTotal: 1, CxActive: 1}),
	}}
	b, ok := Summarize([]History{p1, p2}, time.Minute).Backend("g", "ns/p/app", "app")
	if !ok {
		t.Fatal("no backend")
	}
	wantR := v1alpha1.ResponseCounts{Success: 90 + 20, Redirection: 1, ClientError: 2, ServerError: 5}
	if b.Responses == nil || *b.Responses != wantR {
		t.Errorf("responses %+v, want %+v", b.Responses, wantR)
	}
	if b.ClientErrorRate == nil || *b.ClientErrorRate != 0.0424 { // 5 of 118
		t.Errorf("client error rate %v, want 0.0424", *b.ClientErrorRate)
	}
	if b.Bytes == nil || *b.Bytes != (v1alpha1.ByteCounts{Received: 4000 + 200, Sent: 200 + 10}) || b.NoHealthyEndpoint != 1 {
		t.Errorf("bytes %+v, none healthy %d", b.Bytes, b.NoHealthyEndpoint)
	}
	if b.Connections == nil || *b.Connections != (v1alpha1.ConnectionCounts{Active: 4, Opened: 5 + 1, ConnectFailures: 1}) {
		t.Errorf("connections %+v", b.Connections)
	}
	e := b.PerEndpoint[0]
	if e.ConnectionsActive != 4 || e.Connections != 6 || e.ConnectFailures != 1 || e.Timeouts != 2 {
		t.Errorf("endpoint %+v", e)
	}
	// One sample: no window, no responses or bytes yet; the open connections show.
	b, _ = Summarize([]History{{Group: "g", Node: "n1", Samples: p1.Samples[:1]}}, time.Minute).Backend("g", "ns/p/app", "app")
	if b.Responses != nil || b.Bytes != nil || b.Connections == nil || b.Connections.Active != 2 {
		t.Errorf("one sample: responses %+v bytes %+v connections %+v", b.Responses, b.Bytes, b.Connections)
	}
}

// What an Envoy served before lbplane first read it counts in the window when the Envoy started within the
// window (its counters count from zero since its start), and not when it started before. An uptime of 0 is
// an Envoy that has not flushed its stats yet: it started a moment ago.
func TestFirstReadOfAnEnvoyStartedWithinTheWindow(t *testing.T) {
	uptime := func(s string) time.Duration {
		d, err := ParseStats([]byte("# TYPE envoy_server_uptime gauge\nenvoy_server_uptime{} "+s+"\n"+classesAndBytes), map[string]*Cluster{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if got := uptime("12"); got != 12*time.Second {
		t.Fatalf("uptime %s, want 12s", got)
	}
	if got, err := ParseStats([]byte(classesAndBytes), map[string]*Cluster{}); got != -1 || err != nil {
		t.Fatalf("no uptime in the answer: %s, %v; want -1", got, err)
	}
	for _, c := range []struct {
		started time.Duration
		want    int64
	}{{0, 120}, {5 * time.Second, 120}, {2 * time.Minute, 0}} {
		p := &Poller{Interval: time.Second, Window: time.Minute, Log: slog.New(slog.DiscardHandler), proxies: map[string]*proxy{}}
		now := time.Now()
		s := &Sample{At: now, StatsAt: now, Started: now.Add(-c.started),
			Clusters: map[string]*Cluster{"ns/p/app": {Hosts: []Host{{Address: "a:1", Total: 120}}, Counters: Counters{Completed: 120, Success: 120}}}}
		p.add("n http://x", "g", "n", s, time.Millisecond, nil)
		b := p.Health()["g"]["ns/p/app"]
		var success int64
		if b.Responses != nil {
			success = b.Responses.Success
		}
		if b.Requests != c.want || success != c.want {
			t.Errorf("an Envoy started %s before its first read: %d requests, %d 2xx, want %d", c.started, b.Requests, success, c.want)
		}
	}
}
