package envoybootstrap

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestClusterStats: the default leaves the bootstrap as it was (all stats but update_duration), used swaps in
// the inclusion list, and anything else is refused before Envoy sees it.
func TestClusterStats(t *testing.T) {
	base := Params{NodeID: "n", XDS: "127.0.0.1:18000", MaxConnections: 100, AdminSocket: "/run/envoy/admin.sock"}
	render := func(mode string) ([]byte, error) {
		p := base
		p.ClusterStats = mode
		return Render(p)
	}
	def, err := render("")
	if err != nil {
		t.Fatal(err)
	}
	all, err := render(ClusterStatsAll)
	if err != nil || !bytes.Equal(def, all) {
		t.Fatalf("--cluster-stats all differs from the default (err %v)", err)
	}
	if !bytes.Contains(all, []byte("- suffix: .update_duration")) || bytes.Contains(all, []byte("inclusion_list")) {
		t.Errorf("all: want the update_duration exclusion only:\n%s", all)
	}
	used, err := render(ClusterStatsUsed)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"inclusion_list:", "- suffix: .upstream_rq_time", "- suffix: .membership_healthy", "ejections_(?:active|enforced_"} {
		if !bytes.Contains(used, []byte(want)) {
			t.Errorf("used lacks %q", want)
		}
	}
	if bytes.Contains(used, []byte("exclusion_list")) {
		t.Error("used: a stats_matcher has one list, not both")
	}
	if _, err := render("some"); err == nil || !strings.Contains(err.Error(), "--cluster-stats") {
		t.Errorf("an unknown mode: %v", err)
	}
}

// TestAdminIsAUnixSocket: admin listens on a Unix socket of mode 0600 by default, which the stats listener's
// cluster reaches too; a TCP port needs --insecure-admin-tcp, and --admin-port alone is refused. The socket
// has no default path: one in a shared directory could be taken first by another user.
func TestAdminIsAUnixSocket(t *testing.T) {
	base := Params{NodeID: "n", XDS: "127.0.0.1:18000", MaxConnections: 100, StatsPort: 19001, AdminSocket: "/run/envoy/admin.sock"}
	b, err := Render(base)
	if err != nil {
		t.Fatal(err)
	}
	sock := base.AdminSocket
	if !bytes.Contains(b, []byte(`pipe: {path: "`+sock+`", mode: 384}`)) || bytes.Count(b, []byte(`pipe: {path: "`+sock+`"`)) != 2 {
		t.Errorf("want admin and the stats listener's cluster on %s:\n%s", sock, b)
	}
	if bytes.Contains(b, []byte("port_value: 0")) || bytes.Contains(b, []byte("STATE_PREBIND")) {
		t.Errorf("a TCP admin port is left in the bootstrap:\n%s", b)
	}
	p := base
	p.AdminPort = 19000
	if _, err := Render(p); err == nil || !strings.Contains(err.Error(), "--insecure-admin-tcp") {
		t.Errorf("--admin-port without --insecure-admin-tcp: %v", err)
	}
	p.AdminSocket, p.InsecureAdminTCP = "", true
	b, err = Render(p)
	if err != nil || !bytes.Contains(b, []byte("address: 127.0.0.1\n      port_value: 19000")) || bytes.Contains(b, []byte("pipe:")) {
		t.Errorf("--insecure-admin-tcp --admin-port 19000: %v\n%s", err, b)
	}
	p.AdminSocket = "/run/envoy/admin.sock"
	if _, err := Render(p); err == nil {
		t.Error("a socket and a TCP port at once must be refused")
	}
	for _, bad := range []string{"", "admin.sock", "/" + strings.Repeat("x", 120)} {
		p := base
		p.AdminSocket = bad
		if _, err := Render(p); err == nil || !strings.Contains(err.Error(), "--admin-socket") {
			t.Errorf("--admin-socket %q: %v", bad, err)
		}
	}
}

// TestScaledTimers: the overload manager's reduce_timeouts scales the idle timers down to
// --scaled-idle-timeout, driven by the connection monitor and, with a heap budget, the heap monitor; values
// outside 1s-10s are refused.
func TestScaledTimers(t *testing.T) {
	base := Params{NodeID: "n", XDS: "127.0.0.1:18000", MaxConnections: 100, AdminSocket: "/run/envoy/admin.sock"}
	out, err := Render(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"envoy.overload_actions.reduce_timeouts", "{timer: HTTP_DOWNSTREAM_CONNECTION_IDLE, min_timeout: 2s}",
		"{timer: HTTP_DOWNSTREAM_STREAM_IDLE, min_timeout: 2s}", "- name: envoy.resource_monitors.global_downstream_max_connections\n          scaled:",
		"- name: envoy.resource_monitors.fixed_heap\n          scaled:"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the default bootstrap lacks %q", want)
		}
	}
	p := base
	p.MaxHeapBytes, p.ScaledIdleTimeout = -1, 5*time.Second
	if out, err = Render(p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("min_timeout: 5s}")) || bytes.Contains(out, []byte("fixed_heap")) {
		t.Errorf("--scaled-idle-timeout 5s without a heap budget: want 5s timers and no heap trigger:\n%s", out)
	}
	for _, bad := range []time.Duration{500 * time.Millisecond, 11 * time.Second} {
		p.ScaledIdleTimeout = bad
		if _, err := Render(p); err == nil || !strings.Contains(err.Error(), "--scaled-idle-timeout") {
			t.Errorf("%s: %v, want an error naming --scaled-idle-timeout", bad, err)
		}
	}
}

// TestSeveralXDSAddresses: every replica's address is an endpoint of the xds cluster; addresses on
// different hosts need the name every replica's certificate carries; a repeated one is refused.
func TestSeveralXDSAddresses(t *testing.T) {
	base := Params{NodeID: "n", XDS: "127.0.0.1:18000,127.0.0.1:18010, 127.0.0.1:18020", MaxConnections: 100, AdminSocket: "/run/envoy/admin.sock"}
	b, err := Render(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"18000", "18010", "18020"} {
		if !bytes.Contains(b, []byte("port_value: "+port+"\n")) {
			t.Errorf("the xds cluster lacks port %s:\n%s", port, b)
		}
	}
	p := base
	p.XDS = "192.0.2.11:18000,192.0.2.12:18000"
	p.TLS = &TLS{Cert: "/c", Key: "/k", CA: "/ca"}
	if _, err := Render(p); err == nil || !strings.Contains(err.Error(), "--xds-tls-server-name") {
		t.Errorf("two hosts without a server name: %v", err)
	}
	p.TLS = &TLS{Cert: "/c", Key: "/k", CA: "/ca", ServerName: "lb.example.internal"}
	if _, err := Render(p); err != nil {
		t.Errorf("two hosts with a server name: %v", err)
	}
	p = base
	p.XDS = "127.0.0.1:18000,127.0.0.1:18000"
	if _, err := Render(p); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("an address given twice: %v", err)
	}
}

// TestHeapBudgetReleasesAndSheds: with a heap budget, tcmalloc's soft limit is 90 % of it and it gives freed
// memory back in the background, and Envoy sheds new connections from 90 % and reads no more from 95 %;
// without one, none of it.
func TestHeapBudgetReleasesAndSheds(t *testing.T) {
	base := Params{NodeID: "n", XDS: "127.0.0.1:18000", MaxConnections: 100, AdminSocket: "/run/envoy/admin.sock", MaxHeapBytes: 512 << 20}
	b, err := Render(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"soft_memory_limit_bytes: 483183820\n", "bytes_to_release: 16777216\n",
		"- name: envoy.load_shed_points.tcp_listener_accept\n      triggers:\n        - name: envoy.resource_monitors.fixed_heap\n          threshold: {value: 0.9}",
		"- name: envoy.load_shed_points.http1_server_abort_dispatch\n      triggers:\n        - name: envoy.resource_monitors.fixed_heap\n          threshold: {value: 0.95}",
		"- name: envoy.load_shed_points.http2_server_go_away_and_close_on_dispatch\n      triggers:\n        - name: envoy.resource_monitors.fixed_heap\n          threshold: {value: 0.95}",
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("a 512 MiB budget: the bootstrap lacks %q", want)
		}
	}
	p := base
	p.MaxHeapBytes = -1
	if b, err = Render(p); err != nil || bytes.Contains(b, []byte("memory_allocator_manager")) || bytes.Contains(b, []byte("loadshed_points")) {
		t.Errorf("no budget: %v; the bootstrap still releases or sheds on the heap", err)
	}
}
