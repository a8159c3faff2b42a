package pushapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
)

func TestRoleOf(t *testing.T) {
	for _, c := range []struct {
		header, admin, ro string
		want              pushapi.Role
	}{
		{"Bearer a", "a", "r", pushapi.RoleAdmin},
		{"Bearer r", "a", "r", pushapi.RoleReadOnly},
		{"Bearer x", "a", "r", pushapi.RoleNone},
		{"", "a", "r", pushapi.RoleNone},
		{"Bearer ", "a", "", pushapi.RoleNone}, // an unset read-only token never matches an empty one
		{"Bearer ", "", "", pushapi.RoleNone},
		{"a", "a", "r", pushapi.RoleNone},
		{"bearer a", "a", "r", pushapi.RoleNone},
	} {
		if got := pushapi.RoleOf(c.header, c.admin, c.ro); got != c.want {
			t.Errorf("RoleOf(%q, %q, %q) = %v, want %v", c.header, c.admin, c.ro, got, c.want)
		}
	}
}

func TestReadOnlyTokenOnlyReads(t *testing.T) {
	_, url, _ := pushapitest.Start(t, "admin", func(s *pushapi.Server) { s.ReadOnlyToken = "reader" })
	ctx := context.Background()
	admin := &pushapi.Client{BaseURL: url, Token: "admin"}
	reader := &pushapi.Client{BaseURL: url, Token: "reader"}
	if _, err := admin.Apply(ctx, []byte(doc("p", 10080, "a.example.com")), false); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.List(ctx); err != nil {
		t.Errorf("list with the read-only token: %v", err)
	}
	if _, err := reader.Get(ctx, "default", "p"); err != nil {
		t.Errorf("get with the read-only token: %v", err)
	}
	if _, err := reader.Proxies(ctx); err != nil {
		t.Errorf("proxies with the read-only token: %v", err)
	}
	if _, err := reader.Explain(ctx, "default", "p"); err != nil {
		t.Errorf("explain with the read-only token: %v", err)
	}
	if _, err := reader.Diff(ctx, []byte(doc("p", 10081, "a.example.com"))); err != nil {
		t.Errorf("diff with the read-only token: %v", err)
	}
	_, err := reader.Apply(ctx, []byte(doc("q", 10082, "b.example.com")), false)
	if e := apiErr(t, err); e.Status != http.StatusForbidden || !strings.Contains(e.Errors[0], "read-only") {
		t.Errorf("push with the read-only token: %v", err)
	}
	_, err = reader.Apply(ctx, []byte(doc("q", 10082, "b.example.com")), true)
	if e := apiErr(t, err); e.Status != http.StatusForbidden {
		t.Errorf("dry-run push with the read-only token: %v", err)
	}
	if e := apiErr(t, reader.Delete(ctx, "default", "p")); e.Status != http.StatusForbidden {
		t.Errorf("delete with the read-only token: %v", e)
	}
	if ps, err := admin.List(ctx); err != nil || len(ps) != 1 {
		t.Errorf("after the refused writes: %d policies, %v", len(ps), err)
	}
	if e := apiErr(t, (&pushapi.Client{BaseURL: url, Token: "readerx"}).Delete(ctx, "default", "p")); e.Status != http.StatusUnauthorized {
		t.Errorf("a wrong token: %v", e)
	}
}

func TestClientRetriesRateLimitedCalls(t *testing.T) {
	var calls atomic.Int32
	var limitFor atomic.Int32
	limitFor.Store(2)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= limitFor.Load() {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"errors":["too many requests; slow down"]}`)
			return
		}
		io.WriteString(w, `[]`)
	}))
	t.Cleanup(hs.Close)
	c := &pushapi.Client{BaseURL: hs.URL, Token: "t"}
	start := time.Now()
	if _, err := c.Proxies(context.Background()); err != nil {
		t.Fatalf("after two 429s: %v", err)
	}
	if d := time.Since(start); d < 2*time.Second || calls.Load() != 3 {
		t.Errorf("%d calls in %s: Retry-After (1s) was not honoured", calls.Load(), d)
	}
	// A server that always refuses: the client gives up after a bounded number of tries.
	calls.Store(0)
	limitFor.Store(1000)
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	_, err := c.Proxies(ctx)
	if e := apiErr(t, err); e.Status != http.StatusTooManyRequests {
		t.Errorf("always 429: %v", err)
	}
	if n := calls.Load(); n < 2 || n > 5 {
		t.Errorf("%d calls; want a bounded number of retries", n)
	}
}
