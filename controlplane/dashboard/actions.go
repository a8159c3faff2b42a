package dashboard

import (
	"fmt"
	"mime"
	"net/http"

	"github.com/lbplane/lbplane/controlplane/pushapi"
)

// requireAdmin lets through a session that logged in with the admin token, from a page of the dashboard
// itself: the request must be same-origin (Sec-Fetch-Site, or Origin) and carry a JSON body, which a form
// on another site cannot send without the browser asking first. A read-only session gets 403.
func (s *Server) requireAdmin(h http.HandlerFunc) http.HandlerFunc {
	return s.requireSession(func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			jsonError(w, http.StatusForbidden, "cross-site request refused")
			return
		}
		if s.role(r) != pushapi.RoleAdmin {
			jsonError(w, http.StatusForbidden, "this session logged in with the read-only token: log in with the admin token to change an endpoint's state")
			return
		}
		if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
			jsonError(w, http.StatusUnsupportedMediaType, "Content-Type: application/json required")
			return
		}
		h(w, r)
	})
}

// endpointState drains an endpoint, puts it under maintenance or makes it ready again with the push API's
// own handler (the same store record, log line and wait for the Envoys), and has the next event show it.
func (s *Server) endpointState(w http.ResponseWriter, r *http.Request) {
	if s.EndpointState == nil {
		jsonError(w, http.StatusNotImplemented, "this lbplane keeps no endpoint overrides")
		return
	}
	s.EndpointState(w, r)
	s.cacheMu.Lock()
	s.cache = cached{}
	s.cacheMu.Unlock()
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"errors\":[%q]}\n", msg)
}
