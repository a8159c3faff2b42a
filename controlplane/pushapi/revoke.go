package pushapi

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// maxRevokeRequest bounds the body of a revocation: a name, a serial and a short reason.
const maxRevokeRequest = 4 << 10

// revoke serves POST /v1/revocations: the admin token cuts a node or one certificate off (lbctl revoke).
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if s.Guard == nil {
		writeErr(w, http.StatusNotImplemented, "xDS runs without client certificates (--xds-insecure): there is no identity to revoke")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRevokeRequest))
	if err != nil {
		writeErr(w, http.StatusRequestEntityTooLarge, "request body: over 4 KiB")
		return
	}
	var req apiwire.RevokeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, http.StatusBadRequest, "request body: not a JSON object with nodeId, serial or group")
		return
	}
	if len(req.Reason) > 1024 {
		writeErr(w, http.StatusBadRequest, "reason: longer than 1024 bytes")
		return
	}
	rev, closed, err := s.Guard.Revoke(apiwire.Revocation{NodeID: req.NodeID, Serial: req.Serial, Group: req.Group, Reason: req.Reason})
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, apiwire.RevokeResult{Revocation: rev, Closed: closed})
}

// revocations serves GET /v1/revocations: the revocations in force.
func (s *Server) revocations(w http.ResponseWriter, _ *http.Request) {
	out := []apiwire.Revocation{}
	if s.Guard != nil {
		out = append(out, s.Guard.Revocations()...)
	}
	writeJSON(w, http.StatusOK, out)
}
