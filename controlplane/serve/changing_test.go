package serve

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
