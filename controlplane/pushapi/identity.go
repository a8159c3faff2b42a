package pushapi

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pki"
)

// Identities issues Envoys their certificates against a credential of their platform (POST /v1/identity):
// in Kubernetes, a pod's projected service account token, which names the pod. The node id is the platform's
// word, never the caller's.
type Identities struct {
	// Identify returns the node id and proxy group a bearer token proves. A refusal (Refused true) is shown
	// to the caller; other errors are the platform's and answered 503.
	Identify func(ctx context.Context, token string) (nodeID, group string, refused bool, err error)
	CA       *pki.CA
	Validity time.Duration
}

// maxIdentityRequest bounds the body of an identity request: a CSR or a certificate.
const maxIdentityRequest = 16 << 10

// identity serves POST /v1/identity. No lbplane token: the caller proves who it is with its platform's
// credential, and gets a certificate for that identity only. The private key never leaves the caller.
func (s *Server) identity(w http.ResponseWriter, r *http.Request) {
	if !s.limits.AllowFor(r, "", s.RateLimit) {
		w.Header().Set("Retry-After", "1")
		writeErr(w, http.StatusTooManyRequests, "too many requests; slow down")
		return
	}
	if s.Identities == nil || s.Guard == nil {
		writeErr(w, http.StatusNotImplemented, "this lbplane does not issue Envoy identities against a platform credential")
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	node, group, refused, err := s.Identities.Identify(r.Context(), strings.TrimSpace(token))
	if err != nil {
		if refused {
			s.Log.Warn("refused an Envoy identity request", "client", r.RemoteAddr, "reason", err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="lbplane"`)
			writeErr(w, http.StatusForbidden, err.Error())
			return
		}
		s.Log.Error("checking an Envoy identity request", "client", r.RemoteAddr, "error", err)
		writeErr(w, http.StatusServiceUnavailable, "the credential could not be checked now; try again")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxIdentityRequest))
	if err != nil {
		writeErr(w, http.StatusRequestEntityTooLarge, "request body: over 16 KiB")
		return
	}
	var req apiwire.IdentityRequest
	if err := json.Unmarshal(body, &req); err != nil || (req.CSR == "") == (req.Certificate == "") {
		writeErr(w, http.StatusBadRequest, "request body: not a JSON object with exactly one of csr and certificate")
		return
	}
	resp := apiwire.IdentityResponse{NodeID: node, ProxyGroup: group}
	if req.Certificate != "" {
		resp.Renew, resp.Reason = s.stillGood(req.Certificate, node, group)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	csr, err := parseCSR(req.CSR)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	if rev, ok := s.Guard.NodeRevoked(node); ok {
		writeErr(w, http.StatusForbidden, fmt.Sprintf("node %s is revoked until %s", node, rev.Until.UTC().Format(time.RFC3339)))
		return
	}
	is, err := s.Identities.CA.SignClient(csr.PublicKey, node, group, s.Identities.Validity, s.Guard.NotBefore(group))
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	s.Log.Info("issued an Envoy certificate", "node", node, "group", group, "serial", is.Serial, "notAfter", is.NotAfter, "client", r.RemoteAddr)
	resp.Certificate, resp.CA, resp.Serial, resp.NotAfter = string(is.CertPEM), string(is.CAPEM), is.Serial, is.NotAfter
	writeJSON(w, http.StatusOK, resp)
}

// stillGood tells whether the certificate a caller holds must be replaced, and why.
func (s *Server) stillGood(certPEM, node, group string) (bool, string) {
	b, _ := pem.Decode([]byte(certPEM))
	if b == nil || b.Type != "CERTIFICATE" {
		return true, "certificate: no PEM certificate"
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return true, "certificate: " + err.Error()
	}
	switch {
	case c.CheckSignatureFrom(s.Identities.CA.Cert) != nil:
		return true, "not signed by lbplane's CA"
	case c.Subject.CommonName != node || !slices.Equal(c.Subject.OrganizationalUnit, []string{group}):
		return true, fmt.Sprintf("not node %s of proxy group %s", node, group)
	}
	if err := s.Guard.Refusal(c); err != nil {
		return true, err.Error()
	}
	if !time.Now().Before(pki.RenewAt(c)) {
		return true, "due for renewal"
	}
	return false, ""
}

func parseCSR(p string) (*x509.CertificateRequest, error) {
	b, _ := pem.Decode([]byte(p))
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("csr: no PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("csr: signature: %w", err)
	}
	return csr, nil
}
