package pushapi

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pki"
)

// CertIssuer issues an Envoy's xDS client certificate for one node id and proxy group.
type CertIssuer func(nodeID, group string) (*pki.Issued, error)

// CertRequest asks for an Envoy's client certificate.
type CertRequest = apiwire.CertRequest

// CertResponse is an issued certificate, its key and the CA that signed it.
type CertResponse = apiwire.CertResponse

// maxCertRequest bounds the body of a certificate request: two short names.
const maxCertRequest = 4 << 10

// issueCert serves POST /v1/certificates. The key is made here and sent once over the API; whoever holds
// the admin token can act as any Envoy, which is why this needs the admin token.
func (s *Server) issueCert(w http.ResponseWriter, r *http.Request) {
	if s.IssueCert == nil {
		writeErr(w, http.StatusNotImplemented, "this lbplane does not issue certificates: xDS uses certificates from files (--xds-tls-*) or runs with --xds-insecure")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCertRequest))
	if err != nil {
		writeErr(w, http.StatusRequestEntityTooLarge, "request body: over 4 KiB")
		return
	}
	var req CertRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, http.StatusBadRequest, "request body: not a JSON object with nodeId and proxyGroup")
		return
	}
	if req.ProxyGroup == "" {
		req.ProxyGroup = v1alpha1.DefaultProxyGroup
	}
	is, err := s.IssueCert(req.NodeID, req.ProxyGroup)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	s.Log.Info("issued an Envoy certificate", "node", req.NodeID, "group", req.ProxyGroup, "serial", is.Serial,
		"notAfter", is.NotAfter, "client", r.RemoteAddr)
	writeJSON(w, http.StatusOK, CertResponse{Certificate: string(is.CertPEM), PrivateKey: string(is.KeyPEM), CA: string(is.CAPEM), NotAfter: is.NotAfter})
}
