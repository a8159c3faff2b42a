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
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portNum, _ := strconv.Atoi(port)
	p := &Poller{Interval: 200 * time.Millisecond, Window: time.Minute, Client: srv.Client(), Log: slog.New(slog.DiscardHandler),
		TrustUnauthenticated: true, FullReadShare: 1,
		Proxies: func(context.Context) []xdsserver.ProxyStatus {
			return []xdsserver.ProxyStatus{{NodeID: "n", Group: "g", Address: host, StatsPort: portNum}}
		},
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
