package pki

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lbplane/lbplane/atomicfile"
)

// OwnKeys recognises the key material lbplane issued or holds, whatever file or Secret it is read from: its
// CA's key, its serving keys, and the key of every certificate its CA issued (Envoys' client and group
// certificates). A policy names files by path, and a path proves nothing: a key lbplane handed an Envoy
// (lbctl envoy writes it to disk) may sit under a files root, be linked or copied there. So a file is judged
// by what it holds:
//
//   - a private key whose public key is one lbplane holds or issued a certificate for, and
//   - a certificate its CA issued (the only certificate an issued key pairs with, unless someone made
//     another for that key),
//
// are never served. The issued public keys are recorded before the certificate is handed out, in a file
// that survives restarts (one line per key, its SHA-256 SPKI fingerprint and when its certificate expires),
// and forgotten once the certificate has expired: its key then authenticates nobody.
type OwnKeys struct {
	mu     sync.Mutex
	ca     *x509.Certificate
	held   map[[32]byte]bool
	issued map[[32]byte]time.Time
	path   string
	// dead counts the lines of the record file no longer in issued, so that it is rewritten when they are
	// most of it.
	dead int
	now  func() time.Time
	// judged caches Refuses by the SHA-256 of what it judged: every referenced file is read again every 2 s,
	// and parsing and verifying its certificates each time would cost a large fleet a core. Emptied whenever
	// the keys or the CA change, and when it reaches maxJudged.
	judged map[[32]byte]bool
	// gen counts the changes of the keys and the CA: a judgement made before one is not cached.
	gen uint64
}

const maxJudged = 10000

// ownKeysMagic starts the record file, so that a file of something else is never read as one.
const ownKeysMagic = "lbplane issued keys v1"

// expiryGrace keeps a record past its certificate's NotAfter, for clocks a little ahead of this host's.
const expiryGrace = clockSkew

// OpenOwnKeys reads the record of issued keys at path (created on the first issue; "" keeps it in memory
// only) and drops the keys whose certificates have expired.
func OpenOwnKeys(path string) (*OwnKeys, error) {
	k := &OwnKeys{held: map[[32]byte]bool{}, issued: map[[32]byte]time.Time{}, path: path, now: time.Now}
	if path == "" {
		return k, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			if line != ownKeysMagic {
				return nil, fmt.Errorf("%s: not a record of issued keys (first line %q)", path, ownKeysMagic)
			}
			continue
		}
		lines++
		fp, until, ok := parseOwnKey(line)
		if !ok {
			// A line cut short by a crash while it was appended: the certificate was not handed out.
			continue
		}
		if until.After(k.issued[fp]) {
			k.issued[fp] = until
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	k.prune()
	if lines > len(k.issued) {
		if err := k.rewrite(); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func parseOwnKey(line string) ([32]byte, time.Time, bool) {
	var fp [32]byte
	hexFP, unix, ok := strings.Cut(line, " ")
	if !ok || hex.DecodedLen(len(hexFP)) != len(fp) {
		return fp, time.Time{}, false
	}
	if _, err := hex.Decode(fp[:], []byte(hexFP)); err != nil {
		return fp, time.Time{}, false
	}
	s, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return fp, time.Time{}, false
	}
	return fp, time.Unix(s, 0), true
}

// prune forgets the keys whose certificates have expired; the caller holds k.mu or owns k.
func (k *OwnKeys) prune() {
	now := k.now()
	for fp, until := range k.issued {
		if now.After(until.Add(expiryGrace)) {
			delete(k.issued, fp)
			k.dead++
		}
	}
}

// rewrite replaces the record file with the keys still recorded; the caller holds k.mu or owns k.
func (k *OwnKeys) rewrite() error {
	var b bytes.Buffer
	b.WriteString(ownKeysMagic + "\n")
	for fp, until := range k.issued {
		fmt.Fprintf(&b, "%x %d\n", fp, until.Unix())
	}
	if err := atomicfile.Write(k.path, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("rewriting the record of issued keys: %w", err)
	}
	k.dead = 0
	return nil
}

// TrustCA makes every certificate ca issued (but ca itself, which is public) refused, and ca's own key
// held.
func (k *OwnKeys) TrustCA(ca *CA) {
	k.mu.Lock()
	k.ca, k.judged, k.gen = ca.Cert, nil, k.gen+1
	k.mu.Unlock()
	k.Hold(ca.Cert.PublicKey)
}

// Hold adds a public key whose private key lbplane holds (its CA's, a serving key, a key of its own TLS
// flags).
func (k *OwnKeys) Hold(pub crypto.PublicKey) {
	fp, ok := fingerprint(pub)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held[fp], k.judged, k.gen = true, nil, k.gen+1
}

// HoldPEM holds the public keys of every private key in PEM data (a key file of lbplane's own flags).
func (k *OwnKeys) HoldPEM(data []byte) {
	for _, pub := range privateKeys(data) {
		k.Hold(pub)
	}
}

// record adds the key of a certificate the CA is issuing, durably, before the certificate is handed out.
func (k *OwnKeys) record(pub crypto.PublicKey, notAfter time.Time) error {
	fp, ok := fingerprint(pub)
	if !ok {
		return errors.New("recording an issued key: unsupported key type")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.issued[fp], k.judged, k.gen = notAfter, nil, k.gen+1
	if k.path == "" {
		k.prune()
		return nil
	}
	k.prune()
	if k.dead > len(k.issued)+1000 {
		return k.rewrite()
	}
	return k.append(fp, notAfter)
}

// append writes one record line and syncs it; the caller holds k.mu.
func (k *OwnKeys) append(fp [32]byte, notAfter time.Time) error {
	fresh := false
	if _, err := os.Stat(k.path); errors.Is(err, os.ErrNotExist) {
		fresh = true
	}
	f, err := os.OpenFile(k.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("recording an issued key: %w", err)
	}
	line := fmt.Sprintf("%x %d\n", fp, notAfter.Unix())
	if fresh {
		line = ownKeysMagic + "\n" + line
	}
	_, err = f.WriteString(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("recording an issued key: %w", err)
	}
	return nil
}

// Refuses reports whether data holds key material of lbplane's: a private key it holds or issued a
// certificate for, or a certificate its CA issued. Everything else in data is ignored; a PEM block that
// does not parse is not lbplane's.
func (k *OwnKeys) Refuses(data []byte) bool {
	if k == nil {
		return false
	}
	sum := sha256.Sum256(data)
	k.mu.Lock()
	ca, gen := k.ca, k.gen
	refused, ok := k.judged[sum]
	k.mu.Unlock()
	if ok {
		return refused
	}
	refused = k.refuses(data, ca)
	k.mu.Lock()
	if k.gen == gen {
		if k.judged == nil || len(k.judged) >= maxJudged {
			k.judged = map[[32]byte]bool{}
		}
		k.judged[sum] = refused
	}
	k.mu.Unlock()
	return refused
}

func (k *OwnKeys) refuses(data []byte, ca *x509.Certificate) bool {
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		switch {
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			if pub := parsePrivateKey(b); pub != nil && k.owns(pub) {
				return true
			}
		case b.Type == "CERTIFICATE" && ca != nil:
			c, err := x509.ParseCertificate(b.Bytes)
			if err == nil && !c.Equal(ca) && c.CheckSignatureFrom(ca) == nil {
				return true
			}
		}
	}
}

func (k *OwnKeys) owns(pub crypto.PublicKey) bool {
	fp, ok := fingerprint(pub)
	if !ok {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[fp] {
		return true
	}
	until, ok := k.issued[fp]
	return ok && !k.now().After(until.Add(expiryGrace))
}

// fingerprint is the SHA-256 of a public key's DER SubjectPublicKeyInfo.
func fingerprint(pub crypto.PublicKey) ([32]byte, bool) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [32]byte{}, false
	}
	return sha256.Sum256(der), true
}

// privateKeys are the public keys of the private keys in PEM data.
func privateKeys(data []byte) []crypto.PublicKey {
	var out []crypto.PublicKey
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			if pub := parsePrivateKey(b); pub != nil {
				out = append(out, pub)
			}
		}
	}
}

// parsePrivateKey reads a PEM private key in the forms Envoy (BoringSSL) reads: PKCS #8, SEC 1 and PKCS #1.
func parsePrivateKey(b *pem.Block) crypto.PublicKey {
	var key any
	var err error
	switch {
	case b.Type == "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case b.Type == "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		// A mislabelled block: try the other forms, as Go's and BoringSSL's loaders do.
		for _, parse := range []func([]byte) (any, error){x509.ParsePKCS8PrivateKey,
			func(d []byte) (any, error) { return x509.ParseECPrivateKey(d) },
			func(d []byte) (any, error) { return x509.ParsePKCS1PrivateKey(d) }} {
			if key, err = parse(b.Bytes); err == nil {
				break
			}
		}
		if err != nil {
			return nil
		}
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil
	}
	return s.Public()
}
