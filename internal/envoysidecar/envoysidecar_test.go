package envoysidecar

import "testing"

// Busy counts requests in flight and non-HTTP connections on the traffic listeners only.
func TestBusy(t *testing.T) {
	stats := `http.admin.downstream_cx_active: 1
http.admin.downstream_rq_active: 1
http.http-10080.downstream_cx_active: 7
http.http-10080.downstream_rq_active: 2
http.lbplane_stats.downstream_cx_active: 3
listener.0.0.0.0_10080.downstream_cx_active: 7
listener.0.0.0.0_10080.worker_0.downstream_cx_active: 7
listener.0.0.0.0_9000.downstream_cx_active: 1
listener.admin.downstream_cx_active: 1
listener.lbplane_stats.downstream_cx_active: 3
cluster.default/a/b.upstream_cx_active: 9
`
	// 7 listener connections - 7 HTTP connections + 2 requests + 1 TCP connection.
	if got := Busy(stats); got != 3 {
		t.Errorf("Busy = %d, want 3", got)
	}
	if got := Busy("http.http-10080.downstream_cx_active: 4\nlistener.0.0.0.0_10080.downstream_cx_active: 4\n"); got != 0 {
		t.Errorf("idle keep-alive connections: Busy = %d, want 0", got)
	}
}
