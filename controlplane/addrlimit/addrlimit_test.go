package addrlimit

import (
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
