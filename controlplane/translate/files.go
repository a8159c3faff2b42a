package translate

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/tenancy"
)

// File is the content of a file a policy references (certificates, CA bundles), read by the caller so that
// translation stays pure. Err says why it could not be read.
type File struct {
	Data []byte
	Err  string
}

// Files maps paths to contents.
type Files map[string]File

// ReferencedFiles lists every file the policies reference, sorted and without repeats.
func ReferencedFiles(policies []*v1alpha1.LoadBalancerPolicy) []string {
	var out []string
	for _, p := range policies {
		if t := p.Spec.Listener.TLS; t != nil {
			for _, c := range t.Certificates {
				out = append(out, c.CertificateFile, c.PrivateKeyFile)
			}
		}
		for _, b := range p.Spec.Backends {
			if b.TLS != nil {
				out = append(out, b.TLS.CAFile)
			}
		}
		out = append(out, backendFiles(p)...)
	}
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// get returns a file's content, or an error that starts with the policy field naming it ("field: reason").
// The reason is what the reader said: for lbplane serve, one message for every file that is not a readable
// regular file under the files roots, so that the error tells nothing about the rest of the host.
func (f Files) get(field, path string) ([]byte, error) {
	c, ok := f[path]
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: file was not read", field)
	case c.Err != "":
		return nil, fmt.Errorf("%s: %s", field, c.Err)
	}
	return c.Data, nil
}

// keyPair checks that a certificate and key parse and belong together; field is the certificate's path in
// the policy ("spec.listener.tls.certificates[0]"), and every error starts with it or one of its fields.
func (f Files) keyPair(field, certPath, keyPath string) ([]byte, []byte, error) {
	cert, err := f.get(field+".certificateFile", certPath)
	if err != nil {
		return nil, nil, err
	}
	if holdsPrivateKey(cert) {
		// The certificate chain is sent to Envoy as it is, and shown unredacted in its /config_dump: a key
		// in it would reach whoever reads either.
		return nil, nil, fmt.Errorf("%s.certificateFile: holds a private key; a certificate file must hold certificates only (put the key in privateKeyFile)", field)
	}
	key, err := f.get(field+".privateKeyFile", keyPath)
	if err != nil {
		return nil, nil, err
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return nil, nil, fmt.Errorf("%s: %s and %s: %v", field, certPath, keyPath, err)
	}
	return cert, key, nil
}

// caBundle returns the CERTIFICATE blocks of a CA file, and nothing else of it: a combined certificate and
// key file named as a CA must never send its key to Envoy. field is the caFile's path in the policy.
func (f Files) caBundle(field, path string) ([]byte, error) {
	data, err := f.get(field, path)
	if err != nil {
		return nil, err
	}
	if holdsPrivateKey(data) {
		// Refused rather than stripped: a file that mixes a key into a CA bundle is a mistake that would hand
		// the key to whoever reads the bundle, and the owner should hear of it.
		return nil, fmt.Errorf("%s: holds a private key; a CA file must hold certificates only", field)
	}
	out, err := CertificatePEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	return out, nil
}

func holdsPrivateKey(data []byte) bool {
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			return true
		}
	}
}

// CertificatePEM returns the CERTIFICATE blocks of PEM data, re-encoded without headers or text between
// them, after checking that each parses. Private keys and every other block are dropped.
func CertificatePEM(data []byte) ([]byte, error) {
	var out []byte
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			// The parse error names the ASN.1 problem, never the content.
			return nil, fmt.Errorf("a CERTIFICATE block does not parse: %v", err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return out, nil
}

// FileErrors returns what is wrong with the files one policy references, if anything.
func FileErrors(p *v1alpha1.LoadBalancerPolicy, files Files) []string {
	c := p.DeepCopy()
	v1alpha1.Default(c)
	_, errs := resolveFiles(c, Refs{Files: files})
	return errs
}

// PolicyFiles lists the files one policy references.
func PolicyFiles(p *v1alpha1.LoadBalancerPolicy) []string {
	return ReferencedFiles([]*v1alpha1.LoadBalancerPolicy{p})
}

// Refs is everything outside the policies that translation reads, resolved by the caller so that
// translation stays pure: referenced files, and in Kubernetes mode the Services and Secrets.
type Refs struct {
	Files Files
	// Services is nil outside Kubernetes mode; then Service backends cannot be resolved.
	Services map[ServiceRef]ServiceEndpoints
	// Secrets is nil outside Kubernetes mode.
	Secrets map[SecretRef]TLSSecret
	// DNS holds what lbplane resolved the backends' host names to (see DNSQueries); a name it does not
	// hold is not resolved yet.
	DNS map[DNSQuery]DNSAnswer
	// CrossNamespace allows a backend to reference a Service in another namespace than its policy's.
	CrossNamespace bool
	// Granted are the policies whose references across namespaces were already checked by their source
	// (the Gateway API's, against ReferenceGrants): their Services need no annotation.
	Granted map[objkey.Key]bool
	// NoRouterDynamicStats turns Envoy's per-response upstream stats off (see ir.Listener).
	NoRouterDynamicStats bool
	// AccessLog is what listeners whose owner sets no spec.listener.accessLog log (lbplane serve
	// --access-log); the zero value logs nothing.
	AccessLog ir.AccessLog
	// Reach is the server's rules on backend addresses (loopback, link-local, Kubernetes namespaces):
	// endpoints they refuse make the policy invalid, and Service endpoints they refuse leave its references
	// unresolved.
	Reach reach.Rules
	// Overrides are the operator's drain and maintenance overrides of endpoints, by policy (see Overrides).
	Overrides Overrides
	// Tenancy is the operator's delegation of ports and host names to namespaces (see package tenancy).
	Tenancy tenancy.Rules
}

// ServiceRef is a backend's Service reference with its namespace filled in.
type ServiceRef struct {
	Namespace, Name string
	Port            int32
	PortName        string
}

// ServiceEndpoints are the endpoints of one Service port, from its EndpointSlices.
type ServiceEndpoints struct {
	// Err, when set, says why the reference does not resolve (no such Service, no such port).
	Err       string
	Endpoints []ServiceEndpoint
	// GrantedTo are the other namespaces whose policies may name the Service ("*": every namespace), from
	// its GrantAnnotation: the consent of whoever may edit the Service, in its own namespace.
	GrantedTo []string
}

// GrantAnnotation on a Service lists the namespaces (comma-separated, or "*") whose policies may use it as
// a backend; without it only policies of the Service's own namespace may, unless lbplane serve
// --allow-cross-namespace-refs opens every Service to every namespace.
const GrantAnnotation = "lbplane.io/allow-policies-from"

// Grants reads a GrantAnnotation's value.
func Grants(value string) []string {
	var out []string
	for _, ns := range strings.Split(value, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// ServiceEndpoint is one address of a Service port.
type ServiceEndpoint struct {
	Address            string
	Port               int32
	Ready, Terminating bool
	Zone               string
}

// SecretRef names a Secret.
type SecretRef struct{ Namespace, Name string }

// TLSSecret is a kubernetes.io/tls Secret's certificate and key, or why it cannot be used.
type TLSSecret struct {
	Cert, Key []byte
	Err       string
}

// ServiceRefOf returns the full reference of a backend's Service.
func ServiceRefOf(policyNamespace string, s *v1alpha1.ServiceRef) ServiceRef {
	ns := s.Namespace
	if ns == "" {
		ns = policyNamespace
	}
	return ServiceRef{Namespace: ns, Name: s.Name, Port: s.Port, PortName: s.PortName}
}
