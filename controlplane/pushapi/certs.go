package pushapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/lbplane/lbplane/controlplane/pki"
)

// CertIssuer issues an Envoy's xDS client certificate for one node id and proxy group.
type CertIssuer func(nodeID, group string) (*pki.Issued, error)

// CertRequest asks for an Envoy's client certificate.
type CertRequest struct {
	NodeID     string `json:"nodeId"`
	ProxyGroup string `json:"proxyGroup"`
}

// CertResponse is an issued certificate, its private key and the CA that signed both it and lbplane's xDS
// certificate (what the Envoy must trust).
type CertResponse struct {
	Certificate string    `json:"certificate"`
	PrivateKey  string    `json:"privateKey"`
	CA          string    `json:"ca"`
	NotAfter    time.Time `json:"notAfter"`
}

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
		req.ProxyGroup = "default"
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

// IssueCertificate asks lbplane for an Envoy client certificate for nodeID in group.
func (c *Client) IssueCertificate(ctx context.Context, nodeID, group string) (*CertResponse, error) {
	body, err := json.Marshal(CertRequest{NodeID: nodeID, ProxyGroup: group})
	if err != nil {
		return nil, err
	}
	var out CertResponse
	if err := c.do(ctx, http.MethodPost, "/v1/certificates", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
