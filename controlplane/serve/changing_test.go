package serve

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A request that may change config counts while it is answered, and only then; reads do not count.
func TestChangeRequestsCountWhileAnswered(t *testing.T) {
	var c changeRequests
	var during bool
	h := c.count(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { during = c.any() }))
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		during = false
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(m, "/v1/policies", nil))
		if !during {
			t.Errorf("%s: not counted while answered", m)
		}
		if c.any() {
			t.Errorf("%s: still counted after its answer", m)
		}
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/policies", nil))
	if during {
		t.Error("GET counted as a change")
	}
}

// Work that steps aside waits while a change is being made and goes on once it is made; under changes that
// never end it waits at most maxStepAside in a second, then goes on at once.
func TestStepAsideWaitsForAChangeWithinABudget(t *testing.T) {
	var changing atomic.Bool
	var asked atomic.Int64
	yield := stepAside(func() bool { asked.Add(1); return changing.Load() })

	yield()
	if asked.Load() != 1 {
		t.Fatalf("no change being made: asked %d times, want once", asked.Load())
	}

	// A change being made: the yield waits until it is made.
	changing.Store(true)
	done := make(chan struct{})
	go func() { yield(); close(done) }()
	for asked.Load() < 5 { // it is waiting: it has asked again and again
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the yield returned while the change was being made (within its budget)")
	default:
	}
	changing.Store(false)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the yield did not return once the change was made")
	}

	// Changes that never end: the budget (a fresh one) runs out, and the yield then returns at its first look.
	changing.Store(true)
	yield = stepAside(func() bool { asked.Add(1); return changing.Load() })
	start := time.Now()
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("the yield still waits after 1000 calls under changes that never end")
		}
		before := asked.Load()
		yield()
		if asked.Load()-before == 1 && time.Since(start) < time.Second {
			break // the budget of this second is spent: no wait at all
		}
	}
	if waited := time.Since(start); waited < maxStepAside/2 {
		t.Errorf("the budget ran out after %v of waiting, want about %v", waited, maxStepAside)
	}
}
