// TLS: the listener's certificates and versions, and the TLS Envoy speaks to backends.

package v1alpha1

// TLSVersion is a TLS protocol version.
// +kubebuilder:validation:Enum=TLSv1.2;TLSv1.3
// +kubebuilder:validation:MaxLength=32
type TLSVersion string

const (
	TLSv12 TLSVersion = "TLSv1.2"
	TLSv13 TLSVersion = "TLSv1.3"
)

// ListenerTLS terminates TLS on an HTTPS listener.
type ListenerTLS struct {
	// certificates are served by SNI, each to the hostnames it lists. One certificate may list none: it serves
	// the listener's hostnames no other certificate lists, and clients that send no SNI or an unknown name
	// (without one, the first certificate answers those).
	// +kubebuilder:validation:MaxItems=100
	Certificates []Certificate `json:"certificates"`
	// minVersion is the lowest TLS version accepted. Defaults to TLSv1.2.
	MinVersion TLSVersion `json:"minVersion,omitempty"`
	// maxVersion is the highest TLS version accepted. Defaults to TLSv1.3.
	MaxVersion TLSVersion `json:"maxVersion,omitempty"`
	// cipherSuites (TLS 1.2 and below; TLS 1.3 suites are not configurable) in OpenSSL names, in order of
	// preference. Empty means Envoy's defaults. Envoy takes them as BoringSSL names.
	// +kubebuilder:validation:MaxItems=20
	CipherSuites []string `json:"cipherSuites,omitempty"`
}

// Certificate is a certificate chain and its private key, PEM files read by lbplane (standalone mode) and
// delivered to Envoy over SDS; lbplane re-reads them when they change.
type Certificate struct {
	// certificateFile is the PEM certificate chain. Read by lbplane only under its files roots (lbplane serve
	// --files-root) and re-read every 2s; a half-rotated pair keeps the old one. Envoy gets it over SDS.
	CertificateFile string `json:"certificateFile,omitempty"`
	// privateKeyFile is the PEM private key. Required with certificateFile; the same rules.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
	// secretName references a Secret of type kubernetes.io/tls (Kubernetes mode only).
	SecretName string `json:"secretName,omitempty"`
	// secretNamespace is the namespace of secretName; defaults to the policy's. Another namespace is served
	// only to the policies a Gateway becomes (a ReferenceGrant there allows the Gateway) or with lbplane serve
	// --allow-cross-namespace-refs.
	// +kubebuilder:validation:MaxLength=63
	SecretNamespace string `json:"secretNamespace,omitempty"`
	// hostnames this certificate is served for (SNI). Empty: the listener's hostnames no other certificate
	// lists, and clients without SNI. A certificate for every name becomes the default_filter_chain, else the
	// oldest policy's first one.
	Hostnames []string `json:"hostnames,omitempty"`
}

// BackendTLS makes Envoy connect to the endpoints over TLS.
type BackendTLS struct {
	// sni is the server name sent and verified. Required unless insecureSkipVerify. The certificate's DNS SAN
	// must equal it.
	SNI string `json:"sni,omitempty"`
	// caFile is the PEM bundle that must have signed the endpoints' certificates. Required unless
	// insecureSkipVerify. Read and re-read by lbplane, only under its files roots; only its CERTIFICATE PEM
	// blocks are sent, and a file that holds a private key is refused. Envoy gets it over SDS.
	CAFile string `json:"caFile,omitempty"`
	// insecureSkipVerify accepts any certificate. For tests only.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// clientCertificate is presented to endpoints that require one (mutual TLS). Envoy gets it over SDS,
	// re-read like listener certificates and sent only to the policy's proxy group.
	ClientCertificate *ClientCertificate `json:"clientCertificate,omitempty"`
	// autoSNI sends each endpoint its own hostname as SNI and verifies its certificate against that name,
	// instead of one sni for all; every endpoint needs a hostname. Defaults to false. Instead of sni. A DNS
	// backend without sni defaults to it.
	AutoSNI bool `json:"autoSNI,omitempty"`
}

// ClientCertificate is the certificate Envoy presents to TLS endpoints: PEM files read by lbplane
// (standalone mode) or a kubernetes.io/tls Secret (Kubernetes mode), delivered to Envoy over SDS.
type ClientCertificate struct {
	// certificateFile is the PEM certificate chain.
	CertificateFile string `json:"certificateFile,omitempty"`
	// privateKeyFile is the PEM private key.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
	// secretName references a Secret of type kubernetes.io/tls in the policy's namespace.
	SecretName string `json:"secretName,omitempty"`
}
