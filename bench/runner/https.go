package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type tlsFiles struct{ Cert, Key, Both string }

// makeCert writes a self-signed RSA 2048 certificate for 127.0.0.1: RSA because the suites measured are
// ECDHE-RSA, 2048 bits because that is what most sites still serve.
func makeCert(dir string) (tlsFiles, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return tlsFiles{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench.lbplane.test"},
		DNSNames: []string{"bench.lbplane.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tlsFiles{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	f := tlsFiles{Cert: filepath.Join(dir, "bench.crt"), Key: filepath.Join(dir, "bench.key"), Both: filepath.Join(dir, "bench.pem")}
	for path, b := range map[string][]byte{f.Cert: certPEM, f.Key: keyPEM, f.Both: append(append([]byte{}, certPEM...), keyPEM...)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return tlsFiles{}, err
		}
	}
	return f, nil
}

// tlsSuite is one protocol version and cipher suite the client is limited to. Every peer offers all three;
// limiting the client (wrk, through OpenSSL's configuration file) is what picks one, so the peers' own
// preferences play no part, and Envoy and Go cannot restrict TLS 1.3 suites on the server side anyway.
type tlsSuite struct {
	Key      string // in records and tables
	Protocol string // OpenSSL's name
	Cipher   string // OpenSSL's TLS 1.2 name or TLS 1.3 suite; also the name in Envoy's ssl.ciphers stats
}

var tlsSuites = []tlsSuite{
	{"TLS1.2 ECDHE-RSA-AES256-GCM-SHA384", "TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384"},
	{"TLS1.2 ECDHE-RSA-CHACHA20-POLY1305", "TLSv1.2", "ECDHE-RSA-CHACHA20-POLY1305"},
	{"TLS1.3 TLS_AES_256_GCM_SHA384", "TLSv1.3", "TLS_AES_256_GCM_SHA384"},
}

// opensslConf writes an OpenSSL configuration that limits every client context in the process to one
// protocol version and one suite; wrk reads it through OPENSSL_CONF.
func opensslConf(dir string, s tlsSuite) (string, error) {
	tls12, tls13 := s.Cipher, "TLS_AES_256_GCM_SHA384"
	if s.Protocol == "TLSv1.3" {
		tls12 = "ECDHE-RSA-AES256-GCM-SHA384"
		tls13 = s.Cipher
	}
	conf := fmt.Sprintf(`openssl_conf = conf
[conf]
ssl_conf = ssl
[ssl]
system_default = limits
[limits]
MinProtocol = %s
MaxProtocol = %s
CipherString = %s
Ciphersuites = %s
`, s.Protocol, s.Protocol, tls12, tls13)
	path := filepath.Join(dir, "openssl-"+strings.NewReplacer(" ", "-", ".", "").Replace(s.Key)+".cnf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// httpsPeers are the peers with an HTTPS listener (direct has none: the backends speak plain HTTP).
func httpsPeers(ps []*peer) []*peer {
	var out []*peer
	for _, p := range ps {
		if p.TLSPort != 0 {
			out = append(out, p)
		}
	}
	return out
}

// envoyCiphers reads an Envoy's count of handshakes per negotiated suite on its HTTPS listener: the check
// that the client's limit took effect.
func envoyCiphers(adminPort, tlsPort int) (map[string]int64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats?filter=ssl%%5C.ciphers%%5C.", adminPort))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	prefix := fmt.Sprintf("listener.127.0.0.1_%d.ssl.ciphers.", tlsPort)
	out := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ": ")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		n, _ := strconv.ParseInt(value, 10, 64)
		out[strings.TrimPrefix(name, prefix)] = n
	}
	return out, sc.Err()
}

// isEnvoy tells the peers whose admin port answers Envoy's stats.
func isEnvoy(p *peer) bool { return strings.Contains(p.Name, "envoy") }

// https measures HTTPS termination for each suite, once with connections kept (the handshake amortised)
// and once with a new connection, and so a full handshake, for every request (wrk does not resume
// sessions).
func httpsRuns(ctx context.Context, e *env, cfg config, ps []*peer, r int,
	measure func(p *peer, scenario, protocol, variant string, conns, r int, url string, opt wrkOptions) error) error {
	var hp []*peer
	for _, p := range httpsPeers(ps) {
		if cfg.runs(cfg.HTTPSPeers, p.Name) {
			hp = append(hp, p)
		}
	}
	for _, s := range cfg.TLSSuites {
		conf, err := opensslConf(e.dir, s)
		if err != nil {
			return err
		}
		for _, mode := range []string{"reuse", "handshake"} {
			opt := wrkOptions{env: []string{"OPENSSL_CONF=" + conf}, duration: cfg.HTTPSDuration}
			if mode == "handshake" {
				opt.headers = []string{"Connection: close"}
			}
			for i := range hp {
				p := hp[(i+r)%len(hp)]
				var before map[string]int64
				if isEnvoy(p) {
					before, _ = envoyCiphers(p.HTTPPort+1000, p.TLSPort)
				}
				opt.check = func() string {
					if !isEnvoy(p) {
						return ""
					}
					after, err := envoyCiphers(p.HTTPPort+1000, p.TLSPort)
					if err != nil {
						return "reading Envoy's cipher stats: " + err.Error()
					}
					for name, n := range after {
						if n > before[name] && name != s.Cipher {
							return fmt.Sprintf("Envoy negotiated %s, not %s: the client limit did not take effect", name, s.Cipher)
						}
					}
					if after[s.Cipher] <= before[s.Cipher] {
						return fmt.Sprintf("Envoy counted no %s handshake", s.Cipher)
					}
					return ""
				}
				if err := measure(p, "https", s.Key, mode, cfg.HTTPSConns, r, fmt.Sprintf("https://127.0.0.1:%d/", p.TLSPort), opt); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
