package lbctl_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/internal/lbctl"
)

// eventsServer answers GET /v1/events as lbplane does: the events after ?since=, a second one only after a
// few calls, so that a watch sees it arrive.
func eventsServer(t *testing.T) string {
	t.Helper()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	all := []apiwire.HealthEvent{
		{Seq: 1, Time: t0, Type: apiwire.EventEjected, Namespace: "default", Policy: "shop", Backend: "cart", Endpoint: "10.0.0.1:80", Node: "e1", Group: "default", Reasons: []string{"active health check failed"}},
		{Seq: 2, Time: t0.Add(time.Second), Type: apiwire.EventRecovered, Namespace: "default", Policy: "shop", Backend: "cart", Endpoint: "10.0.0.1:80", Node: "e1", Group: "default"},
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/events" || r.Header.Get("Authorization") != "Bearer t" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		known := all[:1]
		if calls.Add(1) > 3 {
			known = all
		}
		since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
		out := []apiwire.HealthEvent{}
		for _, e := range known {
			if e.Seq > since {
				out = append(out, e)
			}
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// events --watch prints the kept events, then each new one as it comes, the header once.
func TestEventsWatchPrintsNewOnes(t *testing.T) {
	url := eventsServer(t)
	var out, errb syncBuffer
	code := lbctl.Main([]string{"--server", url, "--token", "t", "events", "--watch", "--interval", "100ms", "--watch-max", "2", "--watch-timeout", "60s"},
		strings.NewReader(""), &out, &errb)
	got := out.String()
	if code != 0 || strings.Count(got, "TYPE") != 1 || strings.Count(got, "Ejected") != 1 || strings.Count(got, "Recovered") != 1 ||
		!strings.Contains(got, "active health check failed") || strings.Index(got, "Ejected") > strings.Index(got, "Recovered") {
		t.Errorf("exit %d:\n%s%s", code, got, errb.String())
	}
	// -o json: a List with the events as items.
	out = syncBuffer{}
	if code := lbctl.Main([]string{"--server", url, "--token", "t", "events", "-o", "json"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var l struct {
		Kind  string                `json:"kind"`
		Items []apiwire.HealthEvent `json:"items"`
	}
	if err := json.Unmarshal([]byte(out.String()), &l); err != nil || l.Kind != "List" || len(l.Items) != 2 {
		t.Errorf("%v: %s", err, out.String())
	}
	out = syncBuffer{}
	if code := lbctl.Main([]string{"--server", url, "--token", "t", "events", "-o", "wide"}, strings.NewReader(""), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "GROUP") || !strings.Contains(out.String(), "SEQ") {
		t.Errorf("exit %d: -o wide:\n%s", code, out.String())
	}
}
