package addrlimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestEachAddressHasItsOwnBucket(t *testing.T) {
	var l Limiter
	a := httptest.NewRequest("GET", "/", nil)
	a.RemoteAddr = "192.0.2.1:1234"
	b := httptest.NewRequest("GET", "/", nil)
	b.RemoteAddr = "192.0.2.2:1234"
	allowed := 0
	for range 10 {
		if l.Allow(a, 1) {
			allowed++
		}
	}
	// A rate of 1/s has a burst of 3; the loop ends well within a second on any machine.
	if allowed < 3 || allowed > 4 {
		t.Errorf("address a: %d of 10 allowed, want the burst of 3 (4 if a token refilled meanwhile)", allowed)
	}
	if !l.Allow(b, 1) {
		t.Error("address b was refused: it shares a's bucket")
	}
	for range 100 {
		if !l.Allow(a, 0) {
			t.Fatal("a rate of 0 must mean no limit")
		}
	}
}

// A request that proved a credential draws on that credential's bucket: a flood of unproven requests from
// the same address drains the address's bucket, never the credential's, and a credential's bucket is one
// for all its addresses.
func TestACredentialHasItsOwnBucket(t *testing.T) {
	var l Limiter
	req := func(addr string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		return r
	}
	for range 100 {
		l.Allow(req("127.0.0.1:1000"), 1)
	}
	if l.Allow(req("127.0.0.1:1001"), 1) {
		t.Fatal("the flood did not drain its address's bucket: the test means nothing")
	}
	if !l.AllowFor(req("127.0.0.1:1002"), "admin", 1) {
		t.Error("a good credential from the flooded address was refused")
	}
	allowed := 1
	for _, addr := range []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1", "192.0.2.4:1"} {
		if l.AllowFor(req(addr), "admin", 1) {
			allowed++
		}
	}
	if allowed < 3 || allowed > 4 {
		t.Errorf("the admin credential from five addresses: %d allowed, want its one burst of 3 (4 if a token refilled)", allowed)
	}
	if !l.AllowFor(req("192.0.2.9:1"), "read-only", 1) {
		t.Error("another credential shares the admin credential's bucket")
	}
}
