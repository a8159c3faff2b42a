// Package pki is lbplane's own certificate authority: it is created on first start in the data directory,
// signs lbplane's xDS serving certificate, and issues each Envoy a short-lived client certificate that names
// its node id and proxy group. The CA key never leaves the directory it was created in.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/lbplane/lbplane/atomicfile"
)

// Files in the PKI directory. It is a directory of its own (<data-dir>/pki), never one of the roots policy
// file references resolve under: a policy must not be able to name the CA key.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "xds.crt"
	ServerKeyFile  = "xds.key"
)

// SecretFiles are the files in a PKI directory that must never leave lbplane: the CA's key and the xDS
// serving key. Policies cannot name them (fileroots.Roots.Protect), whatever path leads to them.
func SecretFiles(dir string) []string {
	return []string{filepath.Join(dir, CAKeyFile), filepath.Join(dir, ServerKeyFile)}
}

const (
	caValidity = 10 * 365 * 24 * time.Hour
	// ServerValidity is how long lbplane's own xDS certificate lives; it is re-issued in memory (and on disk)
	// once two thirds of that have passed, without a restart.
	ServerValidity = 30 * 24 * time.Hour
	// ClientValidity is the default life of an Envoy's certificate: short, so that a leaked one is worth little
	// and renewal is routine (lbctl bootstrap --out-dir, re-run).
	ClientValidity = 24 * time.Hour
	// clockSkew back-dates certificates so a host whose clock is a little behind accepts them at once.
	clockSkew = 5 * time.Minute
)

// CA signs certificates with a key kept in its directory.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
	// Keys, when set, records the key of every certificate issued, before it is handed out: such a key is
	// never served, whatever file it is read from (OwnKeys). Set it before the first issue.
	Keys *OwnKeys
}

// LoadOrCreateCA loads the CA from dir, or creates it (directory 0700, key 0600) when neither of its files
// exists. created tells which.
func LoadOrCreateCA(dir string) (ca *CA, created bool, err error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		ca, err := loadCA(certPath, keyPath)
		return ca, false, err
	case !errors.Is(certErr, os.ErrNotExist) || !errors.Is(keyErr, os.ErrNotExist):
		// One without the other, or unreadable: never overwrite what might be the only copy of a CA key.
		return nil, false, fmt.Errorf("%s: the CA needs both %s and %s (or neither, to create a new CA)", dir, CACertFile, CAKeyFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	certPEM, keyPEM, err := NewCAPEM()
	if err != nil {
		return nil, false, err
	}
	// The key first: a crash in between leaves a key without a certificate, which the next start refuses
	// instead of silently making a second CA.
	if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
		return nil, false, err
	}
	if err := atomicfile.Write(certPath, certPEM, 0o644); err != nil {
		return nil, false, err
	}
	ca, err = loadCA(certPath, keyPath)
	return ca, true, err
}

// NewCAPEM makes a new CA certificate and key, PEM encoded, for a store other than a directory (a
// Kubernetes Secret).
func NewCAPEM() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "lbplane CA", Organization: []string{"lbplane"}},
		NotBefore: now.Add(-clockSkew), NotAfter: now.Add(caValidity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", kder), nil
}

// ParseCA is a CA from its PEM certificate and key; source names where they came from in errors.
func ParseCA(source string, certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// tls errors name the problem (no PEM, mismatched key), never the content.
		return nil, fmt.Errorf("CA %s: %w", source, err)
	}
	return caFromPair(source, pair)
}

func loadCA(certPath, keyPath string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		// tls errors name the problem (no PEM, mismatched key), never the content.
		return nil, fmt.Errorf("CA %s / %s: %w", certPath, keyPath, err)
	}
	return caFromPair(certPath, pair)
}

func caFromPair(source string, pair tls.Certificate) (*CA, error) {
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", source, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("CA %s: not a CA certificate", source)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA %s: unsupported key type", source)
	}
	return &CA{Cert: cert, CertPEM: pemBlock("CERTIFICATE", cert.Raw), key: signer}, nil
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,252}$`)

// ValidName tells whether s can be a node id or proxy group in a certificate lbplane issues.
func ValidName(s string) bool { return nameRe.MatchString(s) }

// ClientURI is the SPIFFE-style URI SAN of an Envoy's certificate, next to its CN (node id) and OU (group).
func ClientURI(nodeID, group string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: "lbplane", Path: "/group/" + group + "/node/" + nodeID}
}

// GroupURI is the URI SAN of a group certificate: it names no node, and so serves any node id of the group.
func GroupURI(group string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: "lbplane", Path: "/group/" + group}
}

// IssueGroup issues a client certificate for any node of one proxy group, for an Envoy Deployment whose
// pods (and so node ids) come and go: URI SAN spiffe://lbplane/group/<group> without a node part, OU the
// group. It still binds the group: such a certificate never serves a node of another group.
func (ca *CA) IssueGroup(group string, validity time.Duration) (*Issued, error) {
	if !nameRe.MatchString(group) {
		return nil, fmt.Errorf("proxyGroup: must be letters, digits, '.', '_', ':' and '-' (at most 253), got %q", group)
	}
	if validity <= 0 {
		validity = ClientValidity
	}
	tmpl := &x509.Certificate{
		// The CN is not a node id (no node id contains a space), so a node-scoped check can never match it.
		Subject:     pkix.Name{CommonName: "lbplane group " + group, OrganizationalUnit: []string{group}, Organization: []string{"lbplane envoy"}},
		URIs:        []*url.URL{GroupURI(group)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(tmpl, validity)
}

// Fresh tells whether certPEM was signed by ca and is not yet due for renewal (two thirds of its life).
func (ca *CA) Fresh(certPEM []byte) bool {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return false
	}
	return c.CheckSignatureFrom(ca.Cert) == nil && time.Now().Before(renewAt(c))
}

// Issued is a certificate and its key, PEM encoded, with the CA that signed it.
type Issued struct {
	CertPEM  []byte
	KeyPEM   []byte
	CAPEM    []byte
	NotAfter time.Time
	Serial   string
}

// IssueClient issues an Envoy a client certificate for exactly one node id and one proxy group: CN is the
// node id and the only OU the group (what the xDS server checks every stream against), plus a URI SAN. It
// has no DNS or IP name, so it cannot pass as lbplane's server certificate.
func (ca *CA) IssueClient(nodeID, group string, validity time.Duration) (*Issued, error) {
	tmpl, err := clientTemplate(nodeID, group)
	if err != nil {
		return nil, err
	}
	return ca.issue(tmpl, clientValidity(validity))
}

// clientValidity is v, or ClientValidity when v is not positive.
func clientValidity(v time.Duration) time.Duration {
	if v <= 0 {
		return ClientValidity
	}
	return v
}

// clientTemplate is an Envoy's client certificate for node nodeID of proxy group group.
func clientTemplate(nodeID, group string) (*x509.Certificate, error) {
	if !nameRe.MatchString(nodeID) {
		return nil, fmt.Errorf("nodeId: must be letters, digits, '.', '_', ':' and '-' (at most 253), got %q", nodeID)
	}
	if !nameRe.MatchString(group) {
		return nil, fmt.Errorf("proxyGroup: must be letters, digits, '.', '_', ':' and '-' (at most 253), got %q", group)
	}
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeID, OrganizationalUnit: []string{group}, Organization: []string{"lbplane envoy"}},
		URIs:        []*url.URL{ClientURI(nodeID, group)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, nil
}

// IssueServer issues lbplane's xDS serving certificate for the given DNS names and IP addresses.
func (ca *CA) IssueServer(names []string, validity time.Duration) (*Issued, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "lbplane xds", Organization: []string{"lbplane"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if n != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return ca.issue(tmpl, validity)
}

func (ca *CA) issue(tmpl *x509.Certificate, validity time.Duration) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return ca.sign(tmpl, key.Public(), key, validity, time.Time{})
}

// SignClient signs an Envoy's client certificate, as IssueClient makes it, for a public key whose private
// key the Envoy made and keeps (a certificate request's). notBefore, when later than the usual back-dated
// start, is the certificate's start: a certificate issued just after a revocation of its group must not be
// covered by it (see RevokedBefore).
func (ca *CA) SignClient(pub crypto.PublicKey, nodeID, group string, validity time.Duration, notBefore time.Time) (*Issued, error) {
	tmpl, err := clientTemplate(nodeID, group)
	if err != nil {
		return nil, err
	}
	if err := checkPublicKey(pub); err != nil {
		return nil, err
	}
	return ca.sign(tmpl, pub, nil, clientValidity(validity), notBefore)
}

// checkPublicKey admits the keys lbplane itself makes and their usual peers: ECDSA P-256 or P-384, Ed25519,
// RSA of 2048 bits or more.
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return nil
		}
	}
	return fmt.Errorf("csr: the public key (%T) is not ECDSA P-256 or P-384, Ed25519 or RSA of 2048 bits or more", pub)
}

// RevokedBefore is the start a certificate needs so that a revocation made at revokedAt does not cover it:
// revocations of a group cover the certificates that start before the second it was made in.
func RevokedBefore(revokedAt time.Time) time.Time { return revokedAt.Truncate(time.Second) }

// RenewAt is when a certificate lbplane issued is due for renewal: two thirds into its life.
func RenewAt(c *x509.Certificate) time.Time { return renewAt(c) }

// sign signs tmpl for pub; with key (pub's private key, when lbplane made it) the result carries it too.
func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey, key crypto.Signer, validity time.Duration, notBefore time.Time) (*Issued, error) {
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-clockSkew), now.Add(validity)
	if notBefore.After(tmpl.NotBefore) {
		tmpl.NotBefore = notBefore
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.key)
	if err != nil {
		return nil, err
	}
	var keyPEM []byte
	if key != nil {
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		keyPEM = pemBlock("PRIVATE KEY", kder)
	}
	// The certificate holds whole seconds: report the NotAfter it carries, the moment it stops being valid.
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	// Every key a certificate of this CA names is recorded, the Envoys' own too: no policy may serve it.
	if ca.Keys != nil {
		if err := ca.Keys.record(pub, cert.NotAfter); err != nil {
			return nil, err
		}
	}
	return &Issued{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: keyPEM, CAPEM: ca.CertPEM,
		NotAfter: cert.NotAfter, Serial: tmpl.SerialNumber.Text(16)}, nil
}

// ServingCert is lbplane's xDS certificate, re-issued by the CA when two thirds of its life have passed or
// when the names it must carry change. Use GetCertificate in a tls.Config.
type ServingCert struct {
	ca    *CA
	dir   string
	names []string

	mu      sync.Mutex
	cert    *tls.Certificate
	renewAt time.Time
}

// NewServingCert loads the serving certificate from dir when it was signed by ca, carries every name and
// is not due for renewal; otherwise it issues and writes a new one. An empty dir keeps it in memory only
// (Kubernetes, where every start issues its own from the CA in a Secret).
func NewServingCert(ca *CA, dir string, names []string) (*ServingCert, error) {
	s := &ServingCert{ca: ca, dir: dir, names: dedupe(names)}
	if dir == "" {
		return s, s.renew()
	}
	if pair, err := tls.LoadX509KeyPair(filepath.Join(dir, ServerCertFile), filepath.Join(dir, ServerKeyFile)); err == nil {
		if c, err := x509.ParseCertificate(pair.Certificate[0]); err == nil && s.fits(c) {
			pair.Leaf = c
			s.cert, s.renewAt = &pair, renewAt(c)
			if ca.Keys != nil {
				// Issued before its key was recorded, perhaps: held from now on.
				ca.Keys.Hold(c.PublicKey)
			}
		}
	}
	if s.cert == nil {
		if err := s.renew(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *ServingCert) fits(c *x509.Certificate) bool {
	if c.CheckSignatureFrom(s.ca.Cert) != nil || time.Now().After(renewAt(c)) {
		return false
	}
	have := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		have = append(have, ip.String())
	}
	for _, n := range s.names {
		if ip := net.ParseIP(n); ip != nil {
			n = ip.String()
		}
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}

// renewAt is two thirds into a certificate's life, counted from when it was issued: NotBefore is back-dated
// by clockSkew, and counting from it would make a short-lived certificate (under 15 minutes) due as soon as it
// is issued, and rewritten at every check.
func renewAt(c *x509.Certificate) time.Time {
	issued := c.NotBefore.Add(clockSkew)
	if !issued.Before(c.NotAfter) {
		issued = c.NotBefore
	}
	return issued.Add(c.NotAfter.Sub(issued) * 2 / 3)
}

func (s *ServingCert) renew() error {
	is, err := s.ca.IssueServer(s.names, ServerValidity)
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	pair.Leaf = leaf
	if s.dir == "" {
		s.cert, s.renewAt = &pair, renewAt(leaf)
		return nil
	}
	// On disk for operators to inspect; the in-memory copy is what is served.
	if err := atomicfile.Write(filepath.Join(s.dir, ServerKeyFile), is.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(s.dir, ServerCertFile), is.CertPEM, 0o644); err != nil {
		return err
	}
	s.cert, s.renewAt = &pair, renewAt(leaf)
	return nil
}

// GetCertificate serves the current certificate, renewing it first when it is due. A failed renewal keeps
// the old one in service while it is still valid.
func (s *ServingCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().After(s.renewAt) {
		if err := s.renew(); err != nil && time.Now().After(s.cert.Leaf.NotAfter) {
			return nil, err
		}
	}
	return s.cert, nil
}

// NotAfter is when the certificate now in service expires (it is renewed at two thirds of its life).
func (s *ServingCert) NotAfter() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert.Leaf.NotAfter
}

// NotAfter reads when a PEM certificate expires; false when certPEM holds none.
func NotAfter(certPEM []byte) (time.Time, bool) {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return time.Time{}, false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return time.Time{}, false
	}
	return c.NotAfter, true
}

// Names are the DNS names and IP addresses the certificate carries.
func (s *ServingCert) Names() []string { return slices.Clone(s.names) }

func dedupe(in []string) []string {
	var out []string
	for _, n := range in {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
