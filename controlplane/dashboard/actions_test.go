package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// Only a session of the admin token changes an endpoint's state, from the dashboard's own page (same
// origin, a JSON body); a read-only session, a cross-site request and a form post are refused before the
// change is asked for, and the state says which sessions may change.
func TestEndpointStateNeedsAnAdminSessionFromThePage(t *testing.T) {
	s := testServer()
	var calls []apiwire.EndpointStateRequest
	s.EndpointState = func(w http.ResponseWriter, r *http.Request) {
		var req apiwire.EndpointStateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.PathValue("namespace") != "default" || r.PathValue("name") != "demo" {
			t.Errorf("the push API's handler got %+v (%v) for %s", req, err, r.URL.Path)
		}
		calls = append(calls, req)
		writeJSON(w, apiwire.EndpointStateResult{Policy: "default/demo", Changed: true, Endpoints: 1})
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	login := func(tok string) *http.Cookie {
		resp, err := client().PostForm(srv.URL+Prefix+"login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return sessionCookie(t, resp)
	}
	post := func(c *http.Cookie, site, ctype, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Prefix+"api/policies/default/demo/endpoint-state", strings.NewReader(body))
		if c != nil {
			req.AddCookie(c)
		}
		req.Header.Set("Sec-Fetch-Site", site)
		req.Header.Set("Content-Type", ctype)
		resp, err := client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	canChange := func(c *http.Cookie) bool {
		var st State
		if err := json.NewDecoder(get(t, srv, Prefix+"api/state", c).Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.CanChange
	}
	body := `{"endpoint":"198.51.100.7:80","state":"Draining"}`
	ro, adm := login(readOnly), login(admin)
	for _, c := range []struct {
		name        string
		cookie      *http.Cookie
		site, ctype string
		want        int
	}{
		{"no session", nil, "same-origin", "application/json", http.StatusUnauthorized},
		{"read-only session", ro, "same-origin", "application/json", http.StatusForbidden},
		{"cross-site", adm, "cross-site", "application/json", http.StatusForbidden},
		{"a form post", adm, "same-origin", "application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"admin session", adm, "same-origin", "application/json", http.StatusOK},
	} {
		if got := post(c.cookie, c.site, c.ctype, body); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if len(calls) != 1 || calls[0].Endpoint != "198.51.100.7:80" || calls[0].State != "Draining" {
		t.Errorf("changes asked for: %+v", calls)
	}
	if canChange(ro) || !canChange(adm) {
		t.Errorf("canChange: read-only %v, admin %v", canChange(ro), canChange(adm))
	}
}
