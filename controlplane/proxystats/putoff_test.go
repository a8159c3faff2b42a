package proxystats

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// A read is put off to the next interval while config was sent to the Envoy lately, rather than started as
// soon as the quiet after it ends (changes a person makes a quarter of a second apart met every read there);
// an overdue read waits only for config in flight to arrive. The stats port here serves recorded Envoy
// output: what is tested is when the poller asks, not what Envoy answers.
func TestReadsArePutOffAfterConfigWasSent(t *testing.T) {
	clusters, err := os.ReadFile("testdata/clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	stats, err := os.ReadFile("testdata/stats.prom")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var requests []string
	var sentLately, inFlight bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.URL.Path)
		busy := inFlight
		mu.Unlock()
		if busy {
			t.Errorf("%s asked while config was in flight", r.URL.Path)
		}
		if strings.HasPrefix(r.URL.Path, "/clusters") {
			w.Write(clusters)
			return
		}
		w.Write(stats)
	}))
	defer srv.Close()
	p := &Poller{Interval: 200 * time.Millisecond, Window: time.Minute, Client: srv.Client(), Log: slog.New(slog.DiscardHandler),
		TrustUnauthenticated: true, FullReadShare: 1, Proxies: oneProxyAt(srv),
		Busy: func(_ string, quiet time.Duration) bool {
			mu.Lock()
			defer mu.Unlock()
			return inFlight || (quiet > 0 && sentLately)
		}}
	asked := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := len(requests)
		requests = nil
		return n
	}
	set := func(lately, flight bool) {
		mu.Lock()
		sentLately, inFlight = lately, flight
		mu.Unlock()
	}
	ctx := context.Background()

	// The first read of an Envoy is overdue: config sent lately does not put it off.
	set(true, false)
	p.PollOnce(ctx)
	if n := asked(); n != 2 {
		t.Fatalf("first read: %d requests, want 2 (/clusters and the stats)", n)
	}
	// Read an interval ago, config sent lately: put off, nothing asked, and no error recorded.
	p.PollOnce(ctx)
	if n := asked(); n != 0 {
		t.Errorf("config sent lately: %d requests, want the read put off", n)
	}
	if h := p.ByProxy(); len(h) != 1 {
		t.Errorf("a read put off made the proxy's view stale: %v", h)
	}
	// Nothing sent lately: read at once.
	set(false, false)
	p.PollOnce(ctx)
	if n := asked(); n == 0 {
		t.Error("nothing sent lately: no read")
	}
	// Overdue (the last read an interval and a half ago) while config is in flight: it waits for the config
	// to arrive, and then reads, although it was sent lately.
	time.Sleep(p.overdueAfter())
	set(true, true)
	go func() {
		time.Sleep(50 * time.Millisecond)
		set(true, false)
	}()
	start := time.Now()
	p.PollOnce(ctx)
	if n := asked(); n == 0 {
		t.Error("overdue read: no read")
	}
	if waited := time.Since(start); waited < 40*time.Millisecond {
		t.Errorf("overdue read started %v after the tick, while config was in flight for 50ms", waited)
	}
}

// A full read that took long waits for config to have been quiet for twice as long; the busy clusters are
// read in the meantime. Two Windows after the last full read, it goes ahead.
func TestFullReadWaitsForQuietConfig(t *testing.T) {
	// Every cluster has a request in flight and its counter moves from read to read: every cluster is busy.
	reads := 0
	clusters := func() []byte {
		reads++
		var b strings.Builder
		b.WriteString(`{"cluster_statuses":[`)
		for i := range 3 {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"name":"g/p` + strconv.Itoa(i) + `/app","host_statuses":[{"address":{"socket_address":{"address":"127.0.0.1","port_value":1}},` +
				`"stats":[{"name":"rq_total","value":"` + strconv.Itoa(reads) + `"},{"name":"rq_active","value":"1"}],"health_status":{"eds_health_status":"HEALTHY"}}]}`)
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}
	const statsCost = 500 * time.Millisecond // the full read's cost: it must then wait for 1 s of quiet
	var mu sync.Mutex
	var full, partial int
	var lastSent time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if strings.HasPrefix(r.URL.Path, "/stats") {
			full++
		} else if r.URL.Query().Get("filter") != "" {
			partial++
		}
		var body []byte
		if strings.HasPrefix(r.URL.Path, "/clusters") {
			body = clusters()
		}
		mu.Unlock()
		if body != nil {
			w.Write(body)
			return
		}
		time.Sleep(statsCost)
	}))
	defer srv.Close()
	p := &Poller{Interval: 100 * time.Millisecond, Window: time.Minute, Client: srv.Client(), Log: slog.New(slog.DiscardHandler),
		TrustUnauthenticated: true, FullReadShare: 0.5, MinPartialClusters: 2, Proxies: oneProxyAt(srv),
		Busy: func(_ string, quiet time.Duration) bool {
			mu.Lock()
			defer mu.Unlock()
			return time.Since(lastSent) < quiet
		}}
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		f, pa := full, partial
		full, partial = 0, 0
		return f, pa
	}
	sent := func(ago time.Duration) {
		mu.Lock()
		lastSent = time.Now().Add(-ago)
		mu.Unlock()
	}
	key := "n " + "http://" + srv.Listener.Addr().String()
	ctx := context.Background()

	p.PollOnce(ctx) // the first read: full
	if f, _ := counts(); f != 1 {
		t.Fatalf("first read: %d full reads, want 1", f)
	}
	p.mu.Lock()
	px := p.proxies[key]
	if px == nil || px.fullCost < statsCost {
		p.mu.Unlock()
		t.Fatalf("the proxy %q after a full read: %+v", key, px)
	}
	px.nextFull = time.Now().Add(-time.Millisecond) // the next full read is due
	p.mu.Unlock()

	// Config sent 400 ms ago: quiet enough for a read of the busy clusters, not for a full read of 500 ms.
	sent(400 * time.Millisecond)
	p.PollOnce(ctx)
	if f, pa := counts(); f != 0 || pa != 1 {
		t.Errorf("config sent 400 ms ago: %d full and %d partial reads, want the busy clusters read alone", f, pa)
	}
	// Quiet for long enough: the full read.
	sent(2 * time.Second)
	p.PollOnce(ctx)
	if f, _ := counts(); f != 1 {
		t.Errorf("config quiet for 2 s: %d full reads, want 1", f)
	}
	// Two Windows after the last full read, it no longer waits for a long quiet.
	p.mu.Lock()
	px = p.proxies[key]
	px.nextFull, px.fullAt = time.Now().Add(-time.Millisecond), time.Now().Add(-2*p.Window)
	p.mu.Unlock()
	sent(400 * time.Millisecond)
	p.PollOnce(ctx)
	if f, _ := counts(); f != 1 {
		t.Errorf("the last full read two Windows ago: %d full reads, want 1", f)
	}
}

// oneProxyAt is one Envoy, node "n" of group "g", whose stats port is srv.
func oneProxyAt(srv *httptest.Server) func(context.Context) []xdsserver.ProxyStatus {
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portNum, _ := strconv.Atoi(port)
	return func(context.Context) []xdsserver.ProxyStatus {
		return []xdsserver.ProxyStatus{{NodeID: "n", Group: "g", Address: host, StatsPort: portNum}}
	}
}
