package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// SetEndpointStateFunc sets an endpoint's state as the push API's POST .../endpoint-state does.
type SetEndpointStateFunc func(context.Context, translate.Key, apiwire.EndpointStateRequest) (*apiwire.EndpointStateResult, error)

// maxActionBody bounds the body of an action.
const maxActionBody = 4 << 10

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

// endpointState drains an endpoint, puts it under maintenance or makes it ready again (the push API's
// .../endpoint-state): the same store record, log line and wait for the Envoys.
func (s *Server) endpointState(w http.ResponseWriter, r *http.Request) {
	if s.SetEndpointState == nil {
		jsonError(w, http.StatusNotImplemented, "this lbplane keeps no endpoint overrides")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxActionBody))
	if err != nil {
		jsonError(w, http.StatusRequestEntityTooLarge, "request body: over 4 KiB")
		return
	}
	var req apiwire.EndpointStateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		jsonError(w, http.StatusBadRequest, "request body: not a JSON object with endpoint, state and backend")
		return
	}
	k := translate.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	out, err := s.SetEndpointState(r.Context(), k, req)
	if err != nil {
		var se *pushapi.EndpointStateError
		if errors.As(err, &se) {
			jsonError(w, se.Code, se.Msg)
		} else {
			jsonError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	if s.Log != nil {
		s.Log.Info("endpoint state set from the dashboard", "policy", k.String(), "endpoint", req.Endpoint, "state", req.State,
			"remote", r.RemoteAddr)
	}
	s.cacheMu.Lock()
	s.cache = cached{} // the next event shows the change
	s.cacheMu.Unlock()
	writeJSON(w, out)
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"errors\":[%q]}\n", msg)
}
